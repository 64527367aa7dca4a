"""A plain file-copy "sync" between two folders that keeps whichever side is newer: the stand-in for
the tools that make no conflict copies (rsync-style scripts, some cloud drives). Each round (every
``interval`` seconds, on a thread of its own):

- a file on one side only is copied to the other, unless it was on both sides at the end of the
  last round: then it was deleted on one side, and the deletion is copied instead;
- a file that differs is replaced by the side with the newer mtime (its mtime kept), written to a
  temp file and renamed over the older one, as sync tools write.

The older side's changes to a file are lost, whole: that is what such tools do, and what tars's
journal has to make up for (docs/two-machines.md). ``wait_settled`` waits for two rounds in a row
that copied nothing with the two trees equal.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

from harness.daemon import wait_for

# Files that are being written (tars's temp files, a copy of ours mid-write) are not copied.
_BUSY = (".tars-tmp", ".copy-tmp")


def _files(root: Path) -> dict[str, os.stat_result]:
    found = {}
    for folder, _, names in os.walk(root):
        for name in names:
            if name.endswith(_BUSY):
                continue
            path = Path(folder) / name
            try:
                found[path.relative_to(root).as_posix()] = path.stat()
            except OSError:
                continue
    return found


class NewestWinsCopy:
    def __init__(self, first: Path, second: Path, interval: float = 0.3):
        self.sides = (first, second)
        self.interval = interval
        self.known: set[str] = set()  # on both sides at the end of the last round
        self.copied = 0
        self.quiet_rounds = 0
        self._stop = threading.Event()
        self._paused = threading.Event()
        self._thread = threading.Thread(target=self._run, name="newest-wins-copy", daemon=True)

    def __enter__(self) -> NewestWinsCopy:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            if self._paused.is_set():
                continue
            changed = self.round()
            self.quiet_rounds = 0 if changed else self.quiet_rounds + 1

    def pause(self) -> None:
        self._paused.set()

    def resume(self) -> None:
        self._paused.clear()

    def round(self) -> int:
        a, b = self.sides
        left, right = _files(a), _files(b)
        changed = 0
        for rel in sorted(left.keys() | right.keys()):
            here, there = left.get(rel), right.get(rel)
            try:
                if here is None or there is None:
                    present, missing = (a, b) if there is None else (b, a)
                    if rel in self.known:
                        (present / rel).unlink(missing_ok=True)  # deleted on the other side: the deletion wins
                    else:
                        self._copy(present / rel, missing / rel)
                    changed += 1
                elif (a / rel).read_bytes() != (b / rel).read_bytes():
                    newer, older = (a, b) if here.st_mtime_ns >= there.st_mtime_ns else (b, a)
                    self._copy(newer / rel, older / rel)
                    changed += 1
            except OSError:
                continue  # moved or written meanwhile: the next round sees it
        self.known = set(_files(a)) & set(_files(b))
        self.copied += changed
        return changed

    @staticmethod
    def _copy(source: Path, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(f"{target.name}.copy-tmp")
        shutil.copy2(source, temp)
        os.replace(temp, target)

    def equal(self) -> bool:
        a, b = self.sides
        left, right = _files(a), _files(b)
        return left.keys() == right.keys() and all((a / rel).read_bytes() == (b / rel).read_bytes() for rel in left)

    def wait_settled(self, deadline: float = 120) -> None:
        wait_for(lambda: self.quiet_rounds >= 2 and self.equal(), "the copies to settle", deadline)
