"""Lines a sync dropped, put back from tars's journal (tarsd/memory/journal.py), by the machine that never had them.

A copying tool that keeps the newer file replaces the older side's Memory.md whole: a line tars wrote
there since the last copy is gone from the file. The machine whose version won never held that line,
and the journal (written by the machine that wrote the line, carried by the sync tool) says tars
added it. So, at each look at a memory file:

- the lines the file holds that this machine has not noted yet are noted as seen (once each): a line
  this machine has held and that is gone now was deleted (by you, or by a sync bringing a deletion),
  never put back here;
- a line tars added on another machine (tars's last word on it), missing here and never held here,
  is put back under its heading once REPLAY_AFTER_SECONDS have passed since this machine first saw
  its journal entry (time for the sync tool to bring the file itself);
- unless the file holds a line tars never wrote that reads at least EDIT_LIKENESS like it (an edit of
  it, made by hand before this machine looked), or the entry is not a line tars writes (one printable
  line with a tars stamp whose text passes the memory check): the journal is data from the vault.

The put-back is a write like tars's own (tarsd/memory/files.py ``rewrite``: atomic, under the memory
lock, watched by the write guard), not journaled again.
"""

from __future__ import annotations

import difflib
import logging
import threading
import time

from tarsd.memory import facts
from tarsd.memory.files import MemoryFiles
from tarsd.memory.journal import Event, Journal, JournalView
from tarsd.memory.lines import LIST_PREFIX, insert_under, memory_lines
from tarsd.memory.merge import EDIT_LIKENESS
from tarsd.memory.text import UnsafeMemoryText, fact_text, section_text
from tarsd.vault.files import OutsideVault

log = logging.getLogger(__name__)

REPLAY_AFTER_SECONDS = 10.0


class Replay:
    def __init__(self, memory: MemoryFiles, journal: Journal):
        self.memory = memory
        self.journal = journal
        self.put_back = 0  # lines put back since start
        self.problems: dict[str, str] = {}  # what could not be done at the last look, for status
        self._first_noticed: dict[tuple[str, str], float] = {}  # journal adds missing here: when first seen (monotonic)
        self._lock = threading.Lock()

    def follow(self, rel: str, kind: str) -> float | None:
        """One look at the memory file ``rel`` (of ``kind``): lines noted as seen, lines due put back.
        Returns in how many seconds a line waiting to be put back is due (None: none waits)."""
        try:
            present = {facts.key(line.text) for line in self.memory.lines(kind)}
        except (OSError, OutsideVault, ValueError):
            return None
        view = self.journal.view()
        unseen = view.unseen(rel, present)
        if unseen:
            self._saw(rel, unseen)
        now = time.monotonic()
        missing = view.to_put_back(rel, present)
        wanted = {(event.file, event.key) for event in missing}
        self._first_noticed = {where: at for where, at in self._first_noticed.items() if where in wanted or where[0] != rel}
        due, later = [], None
        for event in missing:
            first = self._first_noticed.setdefault((event.file, event.key), now)
            if now - first >= REPLAY_AFTER_SECONDS:
                due.append(event)
            else:
                later = REPLAY_AFTER_SECONDS
        due = self._not_edited(rel, view, present, due)
        if due:
            self._put_back(rel, kind, due)
        return later

    def _saw(self, rel: str, keys: list[str]) -> None:
        try:
            self.journal.saw(rel, keys)
        except (OSError, OutsideVault) as exc:
            self.problems["journal"] = f"cannot write tars's journal in the vault (.tars/journal): {exc}"

    def _not_edited(self, rel: str, view: JournalView, present: set[str], missing: list[Event]) -> list[Event]:
        """The lines to put back, less those the file holds an edit of (see the module's docstring)."""
        hand_lines = [key for key in present if (rel, key) not in view.added_at]
        keep = []
        for event in missing:
            if any(_alike(event.key, key) for key in hand_lines):
                log.info("%s: not putting back a line another machine wrote: this copy holds an edit of it: %s", rel, event.line)
                self._saw(rel, [event.key])
            else:
                keep.append(event)
        return keep

    def _put_back(self, rel: str, kind: str, events: list[Event]) -> None:
        lines = []
        for event in events:
            line = _checked_line(event, kind)
            if line is None:
                log.warning("%s: a journal entry of %s is not a line tars writes; not put back: %r", rel, event.machine, event.line[:200])
                self._saw(rel, [event.key])  # looked at once: never again
                continue
            lines.append((event, line))
        if not lines:
            return
        put: list[tuple[str, str]] = []

        def change(text: str) -> str | None:
            put.clear()
            present = {facts.key(line.text) for line in memory_lines(text)}
            for event, (line, section) in lines:
                if event.key not in present:
                    text = insert_under(text, section, line)
                    present.add(event.key)
                    put.append((line, section))
            return text if put else None

        try:
            self.memory.rewrite(kind, change, added=[line for _, line in lines], journaled=False)
        except (OSError, OutsideVault, ValueError) as exc:
            self.problems[f"put-back:{rel}"] = f"could not put back lines a sync dropped from {rel}: {exc}"
            return
        self._saw(rel, [event.key for event, _ in lines])
        with self._lock:
            self.put_back += len(put)
        for line, _ in put:
            log.warning("%s: put back a line tars wrote on another machine that a sync dropped (from the journal): %s", rel, line)


def _alike(a: str, b: str) -> bool:
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return matcher.real_quick_ratio() >= EDIT_LIKENESS and matcher.quick_ratio() >= EDIT_LIKENESS and matcher.ratio() >= EDIT_LIKENESS


def _checked_line(event: Event, kind: str) -> tuple[str, str] | None:
    """The line and heading of a journal entry, when it is a line tars writes (one printable line, a
    tars stamp, text that passes the memory check); None otherwise."""
    raw = event.line.strip("\n")
    parsed = memory_lines(raw)
    if "\n" in raw or "\r" in raw or len(parsed) != 1 or parsed[0].stamp is None or len(raw) > 2 * facts.MAX_FACT_CHARS:
        return None
    try:
        fact_text(LIST_PREFIX.sub("", parsed[0].text), kind)
        section = section_text(event.section)
    except (UnsafeMemoryText, ValueError):
        return None
    return raw, section
