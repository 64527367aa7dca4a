"""tars's journal of the memory lines it wrote and removed, kept in the vault so every machine reads it.

A sync tool carries files, not changes: when two machines both changed Memory.md, a tool like
Syncthing keeps one version and leaves the other as a conflict copy, and a plain newest-wins copy
keeps only the newer version. To merge such versions (tarsd/memory/merge.py) and to put back a
fact a copy dropped, tars needs to know what happened to a line and when: added by tars (remember,
an approved replacement, a merge), or removed by tars (forget, the old side of a replacement).

Each machine appends its own events to its own file, ``.tars/journal/<machine>.jsonl`` in the
vault, and reads everyone's: a file has one writer, so a sync tool never has two versions of it to
choose between (no conflict copy, and a newest-wins copy keeps the writer's). One JSON object a line:

    {"t": 1764237300.5, "op": "add", "file": "Memory.md", "key": "dog perry", "line": "- Dog: Perry <!-- tars:... -->", "section": "Pets"}
    {"t": 1764237301.0, "op": "remove", "file": "Memory.md", "key": "dog perry", "line": "- Dog: Perry <!-- tars:... -->"}
    {"t": 1764237302.0, "op": "seen", "file": "Memory.md", "key": "cat luna"}

``seen``: this machine's copy of the file held a line another machine added (tars puts a line back
from the journal only on a machine that never had it: tarsd/sync). ``key`` is facts.key of the
line's text (without list marker and stamp): the same fact however it is stamped. Times are each
writer's wall clock (machines in NTP sync are assumed: docs/two-machines.md).

The journal is data from the vault, not instructions: a line put back from it passes the same
check as any remember (tarsd/memory/text.py) and keeps its stamp, so a line the model noted stays
marked as the model's. A half-written last line (a copy taken mid-append) is skipped. A machine's
file is compacted when it passes COMPACT_BYTES: the newest add or remove of each line, and its
``seen`` events, are kept.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tarsd.memory import facts
from tarsd.memory.lines import memory_lines
from tarsd.vault.files import OutsideVault, owned_file
from tarsd.vault.root import make_folders

log = logging.getLogger(__name__)

ADD, REMOVE, SEEN = "add", "remove", "seen"
FOLDER = ".tars/journal"  # in the vault
COMPACT_BYTES = 2_000_000
SUFFIX = ".jsonl"


@dataclass(frozen=True, slots=True)
class Event:
    t: float
    op: str  # add | remove | seen
    file: str  # the memory file, relative to the vault
    key: str  # facts.key of the line's text
    machine: str  # whose journal it is in
    line: str = ""  # the whole line as tars wrote or removed it (add, remove)
    section: str = ""  # add: the heading it was written under


def line_key(raw: str) -> str:
    """The key a whole memory line is known by ("" for a line that holds no fact: a heading, a blank)."""
    parsed = memory_lines(raw)
    return facts.key(parsed[0].text) if parsed else ""


class Journal:
    """This machine's journal (written) and everyone's (read): see the module's docstring."""

    def __init__(self, vault: Path, machine: str):
        self.vault = vault
        self.folder = vault / FOLDER
        self.machine = machine
        self.path = self.folder / f"{machine}{SUFFIX}"
        self._lock = threading.Lock()
        # file name -> ((size, mtime_ns), bytes parsed, their sha256, the events in them): a journal that only
        # grew (appended to here, or a sync tool's new copy of a longer one) is parsed from where it was left
        self._cache: dict[str, tuple[tuple[int, int], int, bytes, list[Event]]] = {}

    # ---- writing (this machine's file only) ----

    def wrote(self, file: str, added: Iterable[tuple[str, str]] = (), removed: Iterable[str] = ()) -> None:
        """tars wrote ``file``: ``added`` (line, section) and ``removed`` lines."""
        now = time.time()
        events = [
            {"t": now, "op": ADD, "file": file, "key": key, "line": line, "section": section}
            for line, section in added
            if (key := line_key(line))
        ]
        events += [{"t": now, "op": REMOVE, "file": file, "key": key, "line": line} for line in removed if (key := line_key(line))]
        self._append(events)

    def saw(self, file: str, keys: Iterable[str]) -> None:
        """This machine's copy of ``file`` holds these lines that other machines added."""
        now = time.time()
        self._append([{"t": now, "op": SEEN, "file": file, "key": key} for key in keys])

    def _append(self, events: list[dict]) -> None:
        if not events:
            return
        data = "".join(json.dumps(event, ensure_ascii=False) + "\n" for event in events).encode("utf-8")
        with self._lock:
            folder = owned_file(self.vault, FOLDER)  # OutsideVault when .tars or its journal folder leads out of the vault
            make_folders(self.vault, folder)
            fd = os.open(folder / self.path.name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, data)
                os.fsync(fd)
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            if size > COMPACT_BYTES:
                self._compact()

    def _compact(self) -> None:
        """Rewrite this machine's file with the newest add or remove of each line and its seen events."""
        events = self._read(self.path, (0, 0), None)[3]
        newest: dict[tuple[str, str], Event] = {}
        seen: dict[tuple[str, str], Event] = {}
        for event in events:
            place = seen if event.op == SEEN else newest
            place[(event.file, event.key)] = event
        kept = sorted([*newest.values(), *seen.values()], key=lambda e: e.t)
        text = "".join(json.dumps(_as_dict(event), ensure_ascii=False) + "\n" for event in kept)
        temp = self.path.with_name(f".{self.path.name}.tars-tmp")
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, self.path)
        log.info("compacted the journal %s: %d events kept of %d", self.path.name, len(kept), len(events))

    # ---- reading (every machine's file) ----

    def events(self) -> list[Event]:
        """Every machine's events, oldest first (files read again only when they changed)."""
        found: list[Event] = []
        try:
            if owned_file(self.vault, FOLDER) != self.folder:
                return []  # a symlink, even one within the vault: never read as a journal
            names = sorted(
                entry.name
                for entry in os.scandir(self.folder)
                if entry.name.endswith(SUFFIX) and not entry.name.startswith(".") and not entry.is_symlink()
            )
        except (OSError, OutsideVault):
            return []
        for name in names:
            path = self.folder / name
            try:
                st = path.stat()
            except OSError:
                continue
            stamp = (st.st_size, st.st_mtime_ns)
            cached = self._cache.get(name)
            if cached is None or cached[0] != stamp:
                cached = self._read(path, stamp, cached)
                self._cache[name] = cached
            found.extend(cached[3])
        self._cache = {name: value for name, value in self._cache.items() if name in names}
        return sorted(found, key=lambda e: e.t)

    def signature(self) -> tuple:
        """What changes when any machine's journal changed (names, sizes, times): a cheap look."""
        try:
            found = [entry for entry in os.scandir(self.folder) if entry.name.endswith(SUFFIX)]
            return tuple(sorted((entry.name, entry.stat().st_size, entry.stat().st_mtime_ns) for entry in found))
        except OSError:
            return ()

    def view(self) -> JournalView:
        return JournalView(self.events(), self.machine)

    @staticmethod
    def _read(path: Path, stamp: tuple[int, int], cached) -> tuple[tuple[int, int], int, bytes, list[Event]]:
        machine = path.name[: -len(SUFFIX)]
        try:
            data = path.read_bytes()
        except OSError:
            return stamp, 0, b"", []
        start, events = 0, []
        if cached is not None and len(data) >= cached[1] and hashlib.sha256(data[: cached[1]]).digest() == cached[2]:
            start, events = cached[1], list(cached[3])  # it grew: only the new lines are parsed
        end = data.rfind(b"\n") + 1  # a last line without its end may still be being written
        if end < start:
            end = start
        for raw in data[start:end].decode("utf-8", errors="replace").splitlines():
            try:
                item = json.loads(raw)
                event = Event(
                    float(item["t"]),
                    str(item["op"]),
                    str(item["file"]),
                    str(item["key"]),
                    machine,
                    str(item.get("line", "")),
                    str(item.get("section", "")),
                )
            except (ValueError, KeyError, TypeError):
                continue  # a half-written line (a copy taken mid-append), or not tars's: skipped
            if event.op in (ADD, REMOVE, SEEN) and event.key:
                events.append(event)
        return stamp, end, hashlib.sha256(data[:end]).digest(), events


class JournalView:
    """What the journals say about each line, for one look (a merge, a replay)."""

    def __init__(self, events: list[Event], me: str):
        self.me = me
        self.latest: dict[tuple[str, str], Event] = {}  # (file, key) -> the newest add or remove
        self.added_at: dict[tuple[str, str], float] = {}  # (file, key) -> the newest add
        self.last_removal: dict[tuple[str, str], Event] = {}  # (file, key) -> the newest remove
        self.last_add: dict[tuple[str, str], Event] = {}  # (file, key) -> the newest add
        self.removals: dict[str, list[Event]] = {}  # file -> removes, for pairing a hand edit with its line
        self.mine: set[tuple[str, str]] = set()  # lines this machine added, removed or saw
        # (file, old key, new key): a replacement tars made (one write removing the one, adding the other)
        self.replacements: set[tuple[str, str, str]] = set()
        writes: dict[tuple[str, float, str], list[Event]] = {}
        for event in events:
            if event.op != SEEN:
                writes.setdefault((event.machine, event.t, event.file), []).append(event)
            where = (event.file, event.key)
            if event.machine == me:
                self.mine.add(where)
            if event.op == SEEN:
                continue
            self.latest[where] = event
            if event.op == ADD:
                self.added_at[where] = event.t
                self.last_add[where] = event
            else:
                self.removals.setdefault(event.file, []).append(event)
                self.last_removal[where] = event
        for (_, _, file), together in writes.items():
            olds = [e.key for e in together if e.op == REMOVE]
            news = [e.key for e in together if e.op == ADD]
            self.replacements.update((file, old, new) for old in olds for new in news)

    def removed_at(self, file: str, key: str) -> Event | None:
        """tars's newest removal of the line, if it ever removed it."""
        return self.last_removal.get((file, key))

    def to_put_back(self, file: str, present: set[str]) -> list[Event]:
        """Lines tars added (its last word on them) that ``file`` lacks and this machine never had."""
        return [
            event
            for (name, key), event in self.latest.items()
            if name == file and event.op == ADD and key not in present and (name, key) not in self.mine
        ]

    def unseen(self, file: str, present: set[str]) -> list[str]:
        """Lines other machines added that ``file`` holds and this machine has not noted as seen."""
        return [
            key
            for (name, key), event in self.latest.items()
            if name == file and event.op == ADD and key in present and (name, key) not in self.mine
        ]


def _as_dict(event: Event) -> dict:
    item = {"t": event.t, "op": event.op, "file": event.file, "key": event.key}
    if event.line:
        item["line"] = event.line
    if event.section:
        item["section"] = event.section
    return item
