"""A real Syncthing pair on 127.0.0.1 keeping two folders in step: the two-machine rig's sync tool
(docs/two-machines.md, tests/sync/).

Each peer gets a home of its own (keys, config and database) made by ``syncthing generate``; the
config is then written whole by this module so that nothing in it reaches beyond this machine:
global and local discovery, relays, NAT traversal, usage reporting (``urAccepted`` -1) and crash
reporting off, every announce, upgrade and report URL empty, the listen address
``tcp://127.0.0.1:PORT``, and each device introduced to the other by its ``tcp://127.0.0.1:PORT``.
The GUI/REST API listens on 127.0.0.1 with an API key, which is how a test asks Syncthing
what it is doing. ``addresses_in_xml`` and ``addresses_in_json`` read a config (the file, and the
one Syncthing runs with) for every address in it: the rig test fails on any that is not 127.0.0.1.
The template for devices added later (``<defaults>``) is given ``tcp://127.0.0.1:1`` too, where
Syncthing would put ``dynamic`` (global discovery).

Start-up is kept short: the file watcher on with a 1 s delay (``fsWatcherDelayS``), a 5 s full
rescan beside it, a 2 s pause before a failed pull is tried again (``pullerPauseS``; a file changed
while it was sent fails its pull, and Syncthing's own pause is a minute), ``maxConflicts`` -1
(Syncthing's default of 10 deletes the oldest conflict copies, which tars has to see to merge).

How a test waits for a sync to settle (``wait_settled``): it asks each peer to rescan now
(``POST /rest/db/scan``, which returns once the scan is done, so a write not yet seen by the
watcher is counted), then reads ``/rest/db/status`` (state ``idle``, nothing needed) and
``/rest/db/completion`` for the other device (100 %, no items needed) on both sides, and takes
the pair as settled when two such rounds in a row agree and the folders' global sequence did
not move between them. tars's own reaction to a sync (a merge) is a new change, so rig tests
wait for their whole condition (settled, no conflict copy, the files equal) in one loop.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from xml.etree import ElementTree
from xml.sax.saxutils import escape

from harness.daemon import wait_for

FOLDER_ID = "tars-vault"
WATCH_DELAY_SECONDS = 1
RESCAN_SECONDS = 5


def syncthing_binary() -> str | None:
    return shutil.which("syncthing")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# What counts as an address in a Syncthing config: the value of any element or key whose name says
# address, server, URL or addr (listen and device addresses, announce, relay and STUN servers, the
# usage, crash and release URLs), and anything shaped like a URL, host:port or IP anywhere else.
_ADDRESS_NAME = re.compile(r"address|server|url|addr", re.IGNORECASE)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s<>\"',]*", re.IGNORECASE)
_NOT_AN_ADDRESS = re.compile(r"true|false|-?\d+", re.IGNORECASE)  # announceLANAddresses, localAnnouncePort
_IP_OR_HOST_PORT = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?(?![\w.])|\[[0-9a-fA-F:]+\](?::\d+)?")


def addresses_in_xml(config_text: str) -> list[str]:
    """Every address a config.xml names (see above); empty values are not addresses."""
    found = []
    for element in ElementTree.fromstring(config_text).iter():
        value = (element.text or "").strip()
        if _named_address(element.tag, value):
            found.append(value)
        found += [value for name, value in element.attrib.items() if _named_address(name, value)]
    found += _URL.findall(config_text) + _IP_OR_HOST_PORT.findall(_URL.sub(" ", config_text))
    return found


def addresses_in_json(config: object, name: str = "") -> list[str]:
    """The same for the config Syncthing runs with (``GET /rest/config``: its defaults filled in)."""
    if isinstance(config, dict):
        return [found for key, value in config.items() for found in addresses_in_json(value, key)]
    if isinstance(config, list):
        return [found for value in config for found in addresses_in_json(value, name)]
    if not isinstance(config, str) or not config.strip():
        return []
    found = [config] if _named_address(name, config) else []
    return found + _URL.findall(config) + _IP_OR_HOST_PORT.findall(_URL.sub(" ", config))


def _named_address(name: str, value: str) -> bool:
    return bool(value) and bool(_ADDRESS_NAME.search(name)) and not _NOT_AN_ADDRESS.fullmatch(value)


def host_of(address: str) -> str:
    """The host an address names: ``tcp://127.0.0.1:22000`` and ``127.0.0.1:8384`` name 127.0.0.1;
    ``dynamic`` and ``default`` (Syncthing's public discovery and servers) name themselves."""
    rest = address.split("://", 1)[-1].split("/", 1)[0].split("?", 1)[0]
    if rest.startswith("["):
        return rest[1 : rest.index("]")] if "]" in rest else rest
    return rest.rsplit(":", 1)[0] if rest.count(":") == 1 else rest


class Peer:
    """One Syncthing instance: its home, folder, ports and REST API."""

    def __init__(self, name: str, folder: Path, root: Path):
        self.name = name
        self.folder = folder
        self.home = root / f"syncthing-{name}"
        self.gui_port = free_port()
        self.listen_port = free_port()
        self.api_key = f"tars-rig-{name}-{os.urandom(8).hex()}"
        self.device_id = ""
        self.process: subprocess.Popen | None = None
        self.log = root / f"syncthing-{name}.log"

    @property
    def config_file(self) -> Path:
        return self.home / "config.xml"

    def generate(self) -> None:
        """Keys and a device id (``syncthing generate``); the config is written afterwards."""
        done = subprocess.run(
            ["syncthing", "generate", f"--home={self.home}", "--no-default-folder", "--skip-port-probing"],
            capture_output=True,
            text=True,
            timeout=60,
            env=_env(),
        )
        found = re.search(r"Device ID:\s*([A-Z0-9-]{63})", done.stdout + done.stderr)
        if done.returncode != 0 or found is None:
            raise RuntimeError(f"syncthing generate failed ({done.returncode}): {done.stdout}{done.stderr}")
        self.device_id = found.group(1)

    def write_config(self, other: Peer) -> None:
        folder = f"""
    <folder id="{FOLDER_ID}" label="vault" path="{escape(str(self.folder))}" type="sendreceive" rescanIntervalS="{RESCAN_SECONDS}"
            fsWatcherEnabled="true" fsWatcherDelayS="{WATCH_DELAY_SECONDS}" ignorePerms="false" autoNormalize="true">
        <filesystemType>basic</filesystemType>
        <device id="{self.device_id}" introducedBy=""><encryptionPassword></encryptionPassword></device>
        <device id="{other.device_id}" introducedBy=""><encryptionPassword></encryptionPassword></device>
        <minDiskFree unit="%">0</minDiskFree>
        <versioning><cleanupIntervalS>3600</cleanupIntervalS><fsPath></fsPath><fsType>basic</fsType></versioning>
        <maxConflicts>-1</maxConflicts>
        <pullerPauseS>2</pullerPauseS>
        <markerName>.stfolder</markerName>
    </folder>"""
        devices = "".join(
            f"""
    <device id="{peer.device_id}" name="{peer.name}" compression="metadata" introducer="false"
            skipIntroductionRemovals="false" introducedBy="">
        <address>tcp://127.0.0.1:{peer.listen_port}</address>
        <paused>false</paused>
        <autoAcceptFolders>false</autoAcceptFolders>
    </device>"""
            for peer in (self, other)
        )
        config = f"""<configuration version="36">{folder}{devices}
    <gui enabled="true" tls="false" debugging="false">
        <address>127.0.0.1:{self.gui_port}</address>
        <apikey>{self.api_key}</apikey>
        <theme>default</theme>
    </gui>
    <options>
        <listenAddress>tcp://127.0.0.1:{self.listen_port}</listenAddress>
        <globalAnnounceServer></globalAnnounceServer>
        <globalAnnounceEnabled>false</globalAnnounceEnabled>
        <localAnnounceEnabled>false</localAnnounceEnabled>
        <localAnnouncePort>0</localAnnouncePort>
        <localAnnounceMCAddr></localAnnounceMCAddr>
        <reconnectionIntervalS>1</reconnectionIntervalS>
        <relaysEnabled>false</relaysEnabled>
        <startBrowser>false</startBrowser>
        <natEnabled>false</natEnabled>
        <urAccepted>-1</urAccepted>
        <urSeen>3</urSeen>
        <urURL></urURL>
        <urInitialDelayS>1800</urInitialDelayS>
        <restartOnWakeup>false</restartOnWakeup>
        <autoUpgradeIntervalH>0</autoUpgradeIntervalH>
        <releasesURL></releasesURL>
        <crashReportingURL></crashReportingURL>
        <crashReportingEnabled>false</crashReportingEnabled>
        <stunServer></stunServer>
        <announceLANAddresses>false</announceLANAddresses>
        <setLowPriority>false</setLowPriority>
        <progressUpdateIntervalS>-1</progressUpdateIntervalS>
        <minHomeDiskFree unit="%">0</minHomeDiskFree>
    </options>
    <defaults>
        <device id="" compression="metadata" introducer="false" skipIntroductionRemovals="false" introducedBy="">
            <address>tcp://127.0.0.1:1</address>
            <autoAcceptFolders>false</autoAcceptFolders>
        </device>
    </defaults>
</configuration>
"""
        self.config_file.write_text(config, encoding="utf-8")

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / ".stfolder").mkdir(exist_ok=True)
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                ["syncthing", "serve", f"--home={self.home}", "--no-browser", "--no-restart", "--no-upgrade", "--logflags=0"],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_env(),
                start_new_session=True,
            )

    def kill(self) -> None:
        """SIGKILL to Syncthing and its child (``serve`` runs a monitor process that starts the real one):
        the machine dying. Both go, or the child would hold the database and the port."""
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        """SIGTERM to Syncthing's process group (the monitor and its child), SIGKILL after 20 s."""
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()

    # ---- the REST API ----

    def call(self, method: str, path: str, timeout: float = 60, body: object = None) -> object:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"X-API-Key": self.api_key, **({"Content-Type": "application/json"} if data is not None else {})}
        request = urllib.request.Request(f"http://127.0.0.1:{self.gui_port}{path}", data=data, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            body = answer.read()
        return json.loads(body) if body.strip() else None

    def get(self, path: str) -> dict:
        answer = self.call("GET", path)
        assert isinstance(answer, dict), answer
        return answer

    def up(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(
                f"syncthing {self.name} exited ({self.process.returncode}):\n{self.log.read_text(errors='replace')[-3000:]}"
            )
        try:
            return self.get("/rest/system/ping").get("ping") == "pong"
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def connected(self, other: Peer) -> bool:
        connections = self.get("/rest/system/connections").get("connections", {})
        return bool(connections.get(other.device_id, {}).get("connected"))

    def scan(self) -> None:
        self.call("POST", f"/rest/db/scan?folder={FOLDER_ID}")

    def status(self) -> dict:
        return self.get(f"/rest/db/status?folder={FOLDER_ID}")

    def completion(self, other: Peer) -> dict:
        return self.get(f"/rest/db/completion?folder={FOLDER_ID}&device={other.device_id}")

    def pause_folder(self, paused: bool) -> None:
        """Pause the vault's folder (the devices stay connected: resuming needs no new connection)."""
        self.call("PATCH", f"/rest/config/folders/{FOLDER_ID}", body={"paused": paused})

    def folder_paused(self) -> bool:
        return bool(self.get(f"/rest/config/folders/{FOLDER_ID}").get("paused"))


class SyncthingPair:
    """Two peers keeping ``folders[0]`` and ``folders[1]`` in step; a context manager."""

    def __init__(self, first: Path, second: Path, root: Path | None = None):
        self.root = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="tars-st-"))
        self.peers = (Peer("mac", first, self.root), Peer("pi", second, self.root))

    def __enter__(self) -> SyncthingPair:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        a, b = self.peers
        for peer in self.peers:
            peer.generate()
        a.write_config(b)
        b.write_config(a)
        for peer in self.peers:
            peer.start()
        wait_for(lambda: all(peer.up() for peer in self.peers), "both Syncthing peers to answer on their REST API", 120)
        wait_for(lambda: a.connected(b) and b.connected(a), "the Syncthing peers to connect over 127.0.0.1", 120)

    def stop(self) -> None:
        for peer in self.peers:
            with contextlib.suppress(Exception):
                peer.stop()

    def configs(self) -> list[str]:
        return [peer.config_file.read_text(encoding="utf-8") for peer in self.peers]

    def pause(self) -> None:
        """Stop the exchange (changes made on both sides meanwhile meet as a conflict at ``resume``)."""
        for peer in self.peers:
            peer.pause_folder(True)
        # A paused folder has no state (neither idle nor scanning nor syncing).
        wait_for(lambda: all(peer.folder_paused() and peer.status().get("state") == "" for peer in self.peers), "the folders to pause")

    def resume(self) -> None:
        for peer in self.peers:
            peer.pause_folder(False)
        wait_for(lambda: all(not peer.folder_paused() for peer in self.peers), "the folders to resume", 120)

    def _round(self) -> tuple[int, ...] | None:
        """One look at both sides: their global sequences when both are idle and complete, else None."""
        a, b = self.peers
        for peer in self.peers:
            peer.scan()
        sequences = []
        for peer, other in ((a, b), (b, a)):
            status = peer.status()
            if status.get("state") != "idle" or status.get("needTotalItems", 0) or status.get("pullErrors", 0):
                return None
            done = peer.completion(other)
            if done.get("completion", 0) < 100 or done.get("needItems", 0) or done.get("needDeletes", 0):
                return None
            sequences += [status.get("sequence", 0), status.get("globalFiles", 0), status.get("globalDeleted", 0)]
        return tuple(sequences)

    def settled(self) -> bool:
        """Both sides idle, complete and unchanged over two rounds (see the module's docstring)."""
        first = self._round()
        if first is None:
            return False
        time.sleep(0.3)
        return self._round() == first

    def wait_settled(self, what: str = "the sync to settle", deadline: float = 180) -> None:
        wait_for(self.settled, what, deadline, interval=0.2)


def _env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("ST")}
    env.update(STNOUPGRADE="1", STNODEFAULTFOLDER="1", STNORESTART="1")
    return env
