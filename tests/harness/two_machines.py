"""Two tarsd as two machines: each with its own config, index, socket and copy of the vault (or one
vault folder for both, as two tarsd on one machine), for the rig tests in tests/sync/."""

from __future__ import annotations

import concurrent.futures
import json
import re
import threading
import time
from pathlib import Path

from harness.daemon import TarsDaemon, wait_for
from harness.paths import MODEL_DIR
from tarsctl.protocol import Remember, Remembered
from tarsd.memory.lines import memory_lines
from tarsd.vault.conflicts import find_conflict_copies

TOKEN = "7700112233:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
ME = 4_200_000_001


def machine(root: Path, name: str, vault: Path, config: str = "", env: dict[str, str] | None = None) -> TarsDaemon:
    """A tarsd for ``vault`` with a state folder of its own under ``root/name`` (not started)."""
    state = root / name
    state.mkdir(parents=True, exist_ok=True)
    vault.mkdir(parents=True, exist_ok=True)
    (state / "config.toml").write_text(config)
    token = state / "telegram_token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    return TarsDaemon(vault, state, MODEL_DIR, "none", env)


def telegram_config(url: str) -> str:
    return f"\n[telegram]\nenabled = true\nallowed_users = [{ME}]\napi_url = {json.dumps(url)}\npoll_timeout_seconds = 2\n"


def remember(daemon: TarsDaemon, fact: str, section: str = "") -> Remembered:
    with daemon.client() as client:
        reply = client.call(Remember(id=1, fact=fact, section=section, mode="force"))
    assert isinstance(reply, Remembered) and reply.added, reply
    return reply


def remember_at_once(pairs: list[tuple[TarsDaemon, str, str]]) -> list[Remembered]:
    """Remember each (daemon, fact, section) at the same moment, one thread each."""
    with concurrent.futures.ThreadPoolExecutor(len(pairs)) as pool:
        return list(pool.map(lambda p: remember(*p), pairs))


def facts_in(vault: Path, name: str = "Memory.md") -> list[str]:
    """The facts of a memory file, as shown (no list marker, no stamp), in file order."""
    path = vault / name
    return [line.text for line in memory_lines(path.read_text(encoding="utf-8"))] if path.exists() else []


def copies_in(vault: Path) -> list[str]:
    return [copy.path for copy in find_conflict_copies(vault)]


def log_lines(daemon: TarsDaemon, pattern: str) -> list[str]:
    return [line for line in daemon.log.read_text(encoding="utf-8", errors="replace").splitlines() if re.search(pattern, line)]


class Rig:
    """Two machines (``mac``, ``pi``) and the sync tool between them (``pair``: a SyncthingPair), and the
    fake Bot API both talk to. How a test waits for a sync to settle: ``settled``."""

    def __init__(self, pair, mac: TarsDaemon, pi: TarsDaemon, telegram=None):
        self.pair, self.mac, self.pi, self.telegram = pair, mac, pi, telegram

    @property
    def machines(self) -> tuple[TarsDaemon, TarsDaemon]:
        return self.mac, self.pi

    def settled(self, *names: str) -> bool:
        """One look: Syncthing settled (tests/harness/syncthing.py), no conflict copy left in either folder,
        and the files ``names`` (Memory.md when none) equal on both machines."""
        if not self.pair.settled():
            return False
        if copies_in(self.mac.vault) or copies_in(self.pi.vault):
            return False
        return all(_read(self.mac.vault / name) == _read(self.pi.vault / name) for name in names or ("Memory.md",))

    def wait_settled(self, *names: str, deadline: float = 180) -> None:
        wait_for(lambda: self.settled(*names), "the two machines to settle (synced, merged, equal)", deadline, interval=0.3)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def kill_trial(rig, trial: int, victim: TarsDaemon, peer=None, before_kill: int = 20) -> list[str]:
    """One kill -9 trial on a rig (``mac``, ``pi``, ``wait_settled``): both machines remember facts
    without pause; once ``before_kill`` were answered, ``victim`` is killed with SIGKILL (and its
    sync tool, ``peer`` with start/stop/up, when given: the whole machine dying), then started again
    and the pair left to settle. Returns the facts whose remember was answered: none may be lost."""
    other = rig.mac if victim is rig.pi else rig.pi
    stop = threading.Event()
    answered: list[str] = []

    def keep_remembering(daemon: TarsDaemon, tag: str) -> None:
        n = 0
        while not stop.is_set():
            fact = f"Kill trial {trial} {tag} fact {n:03d}"
            try:
                remember(daemon, fact, "Trials")
            except Exception:  # the killed machine stops answering: what it answered is what counts
                return
            answered.append(fact)
            n += 1

    writers = [threading.Thread(target=keep_remembering, args=(d, t)) for d, t in ((victim, "victim"), (other, "other"))]
    for writer in writers:
        writer.start()
    wait_for(lambda: len(answered) >= before_kill, "some remembers on both machines")
    victim.process.kill()  # kill -9
    victim.process.wait()
    if peer is not None:
        peer.kill()
    time.sleep(0.5)  # the other machine goes on writing meanwhile
    stop.set()
    for writer in writers:
        writer.join(timeout=60)
    if peer is not None:
        peer.start()
        wait_for(peer.up, "the sync tool to come back", 120)
    victim.start()
    rig.wait_settled()
    return list(answered)


def trial_facts(vault: Path) -> list[str]:
    return [fact for fact in facts_in(vault) if fact.startswith("Kill trial")]
