"""No lost facts: the lines tars wrote are checked for a few minutes after it wrote them.

Editors save by reading the file, changing it, writing a temp file and renaming it over the
original. An editor that read Memory.md just before tars added a line and saved just after
puts its stale copy in place: the line tars answered "remembered" for is gone. tars cannot
lock an editor out, so it checks afterwards, with this rule:

- tars keeps the lines it wrote (and removed) in the last WATCH_SECONDS (5 minutes), with
  the time of each write;
- whenever the file changes on disk (a watcher event, a timer a few seconds after each of
  tars's own writes for events that never come, and every later write by tars itself) it
  looks at the version on disk. A version tars wrote itself needs no check;
- a line tars wrote that is missing from a version written within WINDOW_SECONDS (10 s) of
  tars's write was lost in a write race: it is put back (under its heading) and logged;
- a line missing from a version written later than that was deleted by the user: it is left
  alone and no longer watched;
- the same holds the other way for a line tars removed (forget, replace): back within the
  window, it is removed again (a line typed back by hand at once cannot be told from a stale
  copy: forget tells the user so); back later, the user wants it, and it stays;
- tars's latest write of a line decides how it is watched: remembered again after a forget,
  it is kept (the user said so), and forgotten after it was remembered, it is no longer a line
  to put back. The log names who made each change ("tars's forget", "an editor's save").

The put-back is itself an atomic re-read-then-swap update, so the editor's own change in the
stale copy is kept too.

The same rule protects an editor's change from tars. When an editor's save lands in the
microseconds between tars's check and its swap, tars swaps it straight back (tarsd/vault/atomic.py),
but for that moment tars's version stood at the path; an editor that read the file then would
next save a copy without the change it had just saved. So after such a swap-back, the lines
that save added (and removed) are watched like tars's own for the window: gone again within
it, they are put back (removed again). Deleting, by hand within the window, a line saved just
before such a collision is therefore undone once; deleting it again after the window sticks.
"""

from __future__ import annotations

import heapq
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tarsd.memory.facts import key
from tarsd.memory.lines import insert_under, memory_lines, remove_line

log = logging.getLogger(__name__)

WINDOW_SECONDS = 10.0
WATCH_SECONDS = 300.0
# After a change event: let an editor's write-and-rename burst end before looking.
SETTLE_SECONDS = 0.2
# Checks after each of tars's writes, for change events that never arrive (no watcher, an
# overflow): the last one lands just after the window closes.
CHECKS_AFTER_WRITE = (1.0, 4.0, WINDOW_SECONDS + 1.0)

Stamp = tuple[int, int, int]  # (inode, mtime_ns, size): a rename or a rewrite changes it


def stamp_of(st: os.stat_result) -> Stamp:
    return st.st_ino, st.st_mtime_ns, st.st_size


@dataclass(slots=True)
class _Written:
    line: str  # the whole line as tars wrote it (stamp included)
    key: str  # how it is recognised in a later version (facts.key)
    section: str  # where it goes back
    at: float  # wall-clock time of tars's write (or of the put-back)
    removed: bool = False  # a line tars removed rather than added
    by: str = "tars"  # who made the change watched, for the log: "tars's forget", "an editor's save", ...


class WriteGuard:
    """The lines tars wrote, and the checks. ``wrote`` and ``repair`` run under the memory
    files' write lock; ``changed`` may be called from any thread."""

    def __init__(self, verify: Callable[[Path], None]):
        self._verify = verify  # re-reads a file and repairs it (MemoryFiles.verify)
        # A vault synced with other machines: (path, line, removed, at) -> whether tars on another machine
        # changed the line the other way after ``at`` (its journal says so: tarsd/memory/journal.py). Such a
        # version is that machine's word, not an editor's stale copy: it is left as it is.
        self.elsewhere: Callable[[Path, str, bool, float], bool] | None = None
        self._entries: dict[Path, list[_Written]] = {}
        self._own: dict[Path, Stamp] = {}  # the version tars wrote last
        self._due: list[tuple[float, str]] = []  # (monotonic time, path) heap of checks
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self.restored = 0  # lines put back since start
        self.removed_again = 0
        self.last_restored: list[str] = []
        self.last_restored_at: float | None = None

    # ---- under the memory lock ----

    def wrote(self, path: Path, st: os.stat_result, added: list[tuple[str, str]], removed: list[str]) -> None:
        """tars wrote ``path`` (its stat after the write): watch what it added and removed."""
        now = time.time()
        self._own[path] = stamp_of(st)
        added_keys = {key(line) for line, _ in added}
        # tars's latest write of a line decides how it is watched: a line remembered again after a
        # forget is the user's deliberate wish, no longer a line to remove again (issue 37), and
        # a line forgotten after it was remembered is no longer one to put back (nor, once
        # gone, "deleted by hand").
        written = added_keys | {key(line) for line in removed}
        entries = [entry for entry in self._entries.get(path, []) if entry.key not in written]
        self._entries[path] = entries
        entries.extend(_Written(line, key(line), section, now) for line, section in added)
        remover = "tars's replace" if added else "tars's forget"
        # A line replaced by one that reads the same (a typo fixed) is not watched as removed.
        entries.extend(_Written(line, key(line), "", now, removed=True, by=remover) for line in removed if key(line) not in added_keys)
        if entries:
            for delay in CHECKS_AFTER_WRITE:
                self._schedule(path, delay)

    def displaced(self, path: Path, before: str, theirs: str, ours: str) -> None:
        """An editor's save (``theirs``, made from ``before``) was swapped out for a moment while
        ``ours`` stood at the path: watch the change it made that ``ours`` lacks."""

        now = time.time()
        before_keys = {key(line.raw) for line in memory_lines(before)}
        # Only whole lines: an editor saving in place may have been half-way through its write.
        their_lines = memory_lines(theirs[: theirs.rfind("\n") + 1])
        their_keys = {key(line.raw) for line in their_lines}
        our_lines = memory_lines(ours)
        our_keys = {key(line.raw) for line in our_lines}
        entries = self._entries.setdefault(path, [])
        # A line already watched keeps its rule: the editor's save may itself be a stale copy
        # that lost a line tars wrote, or brought back one tars removed.
        watched = {entry.key for entry in entries}
        added = [line for line in their_lines if key(line.raw) not in our_keys | watched]
        removed = [line for line in our_lines if key(line.raw) in before_keys - their_keys - watched]
        entries.extend(_Written(line.raw, key(line.raw), line.section, now, by="an editor's save") for line in added)
        entries.extend(_Written(line.raw, key(line.raw), "", now, removed=True, by="an editor's save") for line in removed)
        log.info(
            "%s: an editor saved while tars swapped its version in; watching the %d line(s) it added and %d it removed",
            path.name,
            len(added),
            len(removed),
        )

    def watching(self, path: Path) -> bool:
        self._expire(path)
        return bool(self._entries.get(path))

    def repair(self, path: Path, text: str, st: os.stat_result | None) -> str:
        """The text of a version read from disk, with the lines a write race lost put back.
        A version tars wrote itself is returned as it is."""
        self._expire(path)
        entries = self._entries.get(path)
        if not entries or st is None or self._own.get(path) == stamp_of(st):
            return text
        changed_at = st.st_mtime
        present = {key(line) for line in text.splitlines() if line.strip()}
        keep: list[_Written] = []
        lost: list[_Written] = []
        back: list[_Written] = []
        for entry in entries:
            there = entry.key in present
            if there != entry.removed:
                keep.append(entry)  # as tars left it
            elif changed_at - entry.at <= WINDOW_SECONDS:
                if self.elsewhere is not None and self.elsewhere(path, entry.line, entry.removed, entry.at):
                    log.info(
                        "%s: tars on another machine of the vault %s this line after %s: left so: %s",
                        path.name,
                        "wrote" if entry.removed else "removed",
                        entry.by,
                        entry.line,
                    )
                    continue  # that machine's later word stands, and the line is no longer watched
                (back if entry.removed else lost).append(entry)
                keep.append(entry)
            else:
                done, undone = ("removed", "put back") if entry.removed else ("added", "deleted")
                log.info(
                    "%s: a line %s %s %.0f s earlier was %s by hand; leaving it so: %s",
                    path.name,
                    entry.by,
                    done,
                    changed_at - entry.at,
                    undone,
                    entry.line,
                )
        self._entries[path] = keep
        if not lost and not back:
            return text

        now = time.time()
        for entry in lost:
            text = insert_under(text, entry.section, entry.line)
            log.warning(
                "%s: restored a line lost in a write race (%s added it; the file was replaced %.1f s after): %s",
                path.name,
                entry.by,
                max(0.0, changed_at - entry.at),
                entry.line,
            )
            entry.at = now  # a new write: a second stale save within the window is repaired too
        for entry in back:
            text = remove_line(text, entry.key) or text
            log.warning(
                "%s: removed again a line %s removed: a save %.1f s after brought it back, within the %.0f s window, so it was "
                "taken for an editor's stale copy (to keep the line, `tarsctl remember` it, or type it back later): %s",
                path.name,
                entry.by,
                max(0.0, changed_at - entry.at),
                WINDOW_SECONDS,
                entry.line,
            )
            entry.at = now
        self.restored += len(lost)
        self.removed_again += len(back)
        if lost:
            self.last_restored = [e.line for e in lost][-5:]
            self.last_restored_at = now
        return text

    def _expire(self, path: Path) -> None:
        entries = self._entries.get(path)
        if entries:
            cutoff = time.time() - WATCH_SECONDS
            self._entries[path] = [e for e in entries if e.at >= cutoff]

    # ---- the checks ----

    def changed(self, path: Path) -> None:
        """A change event for a memory file: look at it once the save has settled."""
        if self._entries.get(path):
            self._schedule(path, SETTLE_SECONDS)

    def _schedule(self, path: Path, delay: float) -> None:
        with self._cond:
            if self._stopped:
                return
            heapq.heappush(self._due, (time.monotonic() + delay, str(path)))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="memory-guard", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (not self._due or self._due[0][0] > time.monotonic()):
                    self._cond.wait(None if not self._due else max(0.0, self._due[0][0] - time.monotonic()))
                if self._stopped:
                    return
                paths = set()
                while self._due and self._due[0][0] <= time.monotonic():
                    paths.add(heapq.heappop(self._due)[1])
            for path in sorted(paths):
                try:
                    self._verify(Path(path))
                except Exception:  # a check must never kill the guard
                    log.exception("checking %s for lines lost in a write race failed", path)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def describe(self) -> dict[str, object]:
        return {
            "watched": sum(len(v) for v in self._entries.values()),
            "restored": self.restored,
            "removed_again": self.removed_again,
            "last_restored": list(self.last_restored),
            "last_restored_at": self.last_restored_at,
        }
