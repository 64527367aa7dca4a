"""Which tarsd run on this vault: each leaves a small heartbeat file in the vault's ``.tars/`` folder.

Two machines sharing a vault (a Mac and a Pi, kept in step by a sync tool) see each other only
through the vault: neither can reach the other's socket, and a sync tool carries nothing else. So
each tarsd writes ``.tars/machines/<machine>.json`` every BEAT_SECONDS and reads the others':

- in the vault, so the sync tool carries it to the other machine (Syncthing, Dropbox and iCloud
  Drive sync dot-folders; Obsidian Sync does not: docs/two-machines.md says what that means);
- in a dot-folder, so tars's indexer and watcher pass it over (tarsd/vault/files.py is_ignored),
  Obsidian does not show it, and it is never a note, never searched, never in a prompt;
- one file per machine, written only by that machine (whole, by rename), so a sync tool never
  holds two versions of one file: no conflict copy of a heartbeat, and a newest-wins copy keeps
  the writer's version.

A heartbeat says who the machine is (an id of its own, kept beside its index database, and its
host name), when it beat last, whether it stopped cleanly, the routines it runs (tarsd/sync warns
when two machines run one of the same name) and what it does with Telegram (one machine polls).

A peer is live while its beat counter keeps changing: its file is compared with what this machine
saw before, by this machine's clock (``Liveness``), so two machines' clocks need not agree. A file
seen for the first time counts as live if it says it beat within STALE_SECONDS by its own clock.
A heartbeat is data from the vault: a bad file is skipped (and named), never trusted for more
than what it says about its machine.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import socket
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from tarsd.vault.files import OutsideVault, owned_file
from tarsd.vault.root import make_folders

log = logging.getLogger(__name__)

FOLDER = ".tars"  # tars's own folder in the vault: heartbeats, the journal, merged conflict copies
MACHINES = f"{FOLDER}/machines"
BEAT_SECONDS = 15.0
STALE_SECONDS = 60.0  # no new beat seen for this long: the machine is taken for stopped
MAX_BYTES = 64 * 1024  # a heartbeat larger than this is not tars's
_ID = re.compile(r"[a-z0-9]{8,32}")

TELEGRAM_OFF, TELEGRAM_POLLING, TELEGRAM_STANDBY = "off", "polling", "standby"


@dataclass
class Beat:
    """What a tarsd says of itself in its heartbeat file."""

    machine: str  # its id: lowercase letters and digits, made once and kept beside its database
    name: str = ""  # its host name, for people
    pid: int = 0
    started_at: float = 0.0
    beat: int = 0  # counts up at every write: how a reader sees it is alive
    beat_at: float = 0.0  # by the writer's clock
    stopped: bool = False  # it stopped cleanly (its last beat)
    version: str = ""
    routines: list[str] = field(default_factory=list)  # the routines it runs (none with [routines] enabled = false)
    note_targets: list[str] = field(default_factory=list)  # the notes its routines append to ({date} templates)
    telegram: str = TELEGRAM_OFF  # off | polling | standby
    telegram_since: float = 0.0  # when it began polling
    bot: str = ""  # which bot (a hash of its numeric id): machines with different bots both poll
    telegram_offset: int = 0  # the next update it would ask Telegram for, handed to a machine taking over

    @property
    def label(self) -> str:
        return f"{self.name or 'a machine'} ({self.machine[:6]})"


def machine_identity(id_file: Path) -> tuple[str, str]:
    """(this tarsd's machine id, its host name). The id is made once and kept in ``id_file`` (beside
    the index database: two tarsd on one host with their own databases are two machines to each
    other); a copied database folder should get a new file (delete it), or both would share an id."""
    name = socket.gethostname() or "host"
    try:
        found = id_file.read_text(encoding="utf-8", errors="replace").strip()
        if _ID.fullmatch(found):
            return found, name
    except OSError:
        pass
    machine = secrets.token_hex(6)
    with contextlib.suppress(OSError):
        id_file.parent.mkdir(parents=True, exist_ok=True)
        id_file.write_text(machine + "\n", encoding="utf-8")
    return machine, name


def beat_path(vault: Path, machine: str) -> Path:
    return owned_file(vault, f"{MACHINES}/{machine}.json")


def write_beat(vault: Path, beat: Beat) -> None:
    """This machine's heartbeat, written whole (a temp file renamed over it). OutsideVault when
    ``.tars`` is a symlink out of the vault; OSError when the vault cannot be written."""
    path = beat_path(vault, beat.machine)
    make_folders(vault, path.parent)
    temp = path.with_name(f".{path.name}.tars-tmp")
    temp.write_text(json.dumps(asdict(beat), ensure_ascii=False), encoding="utf-8")
    os.replace(temp, path)


def read_beats(vault: Path) -> tuple[list[Beat], list[str]]:
    """Every heartbeat in the vault, and the problems of files that are not one (named, skipped)."""
    try:
        folder = owned_file(vault, MACHINES)
        entries = sorted(entry.name for entry in os.scandir(folder) if entry.name.endswith(".json") and not entry.name.startswith("."))
    except (OSError, OutsideVault):
        return [], []
    beats, problems = [], []
    known = {f.name for f in fields(Beat)}
    for name in entries:
        path = folder / name
        try:
            if path.is_symlink() or path.stat().st_size > MAX_BYTES:
                raise ValueError("not a heartbeat file tars writes")
            item = json.loads(path.read_text(encoding="utf-8", errors="replace"))
            if not isinstance(item, dict) or not _ID.fullmatch(str(item.get("machine", ""))) or name != f"{item['machine']}.json":
                raise ValueError("it names no machine, or another than its file name")
            beat = Beat(**{key: value for key, value in item.items() if key in known})
            beat.routines = [str(r)[:200] for r in beat.routines][:1000] if isinstance(beat.routines, list) else []
            beat.note_targets = [str(n)[:500] for n in beat.note_targets][:100] if isinstance(beat.note_targets, list) else []
            beat.name, beat.telegram, beat.bot = str(beat.name)[:100], str(beat.telegram)[:20], str(beat.bot)[:40]
            beat.beat, beat.beat_at, beat.telegram_since = int(beat.beat), float(beat.beat_at), float(beat.telegram_since)
            beat.telegram_offset, beat.stopped = int(beat.telegram_offset), bool(beat.stopped)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            problems.append(f"{MACHINES}/{name}: {exc}")
            continue
        beats.append(beat)
    return beats, problems


class Liveness:
    """Which heartbeats are live, judged by this machine's clock (see the module's docstring)."""

    def __init__(self, stale_seconds: float = STALE_SECONDS):
        self.stale_seconds = stale_seconds
        self._seen: dict[str, tuple[int, float]] = {}  # machine -> (beat counter, when this machine first saw it)

    def live(self, beat: Beat, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        known = self._seen.get(beat.machine)
        if known is None:
            self._seen[beat.machine] = (beat.beat, min(now, beat.beat_at))  # first sight: when it says it beat
        elif known[0] != beat.beat:
            self._seen[beat.machine] = (beat.beat, now)  # a new beat since the last look
        return not beat.stopped and now - self._seen[beat.machine][1] <= self.stale_seconds

    def last_seen(self, machine: str) -> float | None:
        known = self._seen.get(machine)
        return None if known is None else known[1]
