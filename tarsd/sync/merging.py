"""A conflict copy of a file tars writes, merged into the file (tarsd/memory/merge.py says how), and the
copy's content kept where it can be recovered.

The merge is written like any change tars makes to a memory file: atomically, re-read and made again
if the file changed meanwhile (tarsd/vault/atomic.py); for Memory.md and Procedural.md under the
memory lock, with the lines it brings in watched by the write guard like tars's own. Only then is the
copy moved out of the way, into ``.tars/merged/<machine>/<time>-<copy's name>`` in the vault (a
dot-folder: not indexed, not a note; one folder per machine, so two machines never write one file),
and only if it still holds what was merged: a copy that changed meanwhile is merged again at the
next look. tarsd killed in between leaves the copy: the next merge of it finds its lines in the file
already and changes nothing (equal lines are never doubled), then moves it.
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from tarsd.memory.files import MemoryFiles
from tarsd.memory.journal import Journal
from tarsd.memory.merge import MEMORY, Merged, merge
from tarsd.vault.atomic import atomic_update
from tarsd.vault.conflicts import ConflictCopy
from tarsd.vault.files import OutsideVault, owned_file
from tarsd.vault.heartbeat import FOLDER
from tarsd.vault.root import make_folders
from tarsd.vault.safe_open import read_beneath

log = logging.getLogger(__name__)

MERGED = f"{FOLDER}/merged"
_UNSAFE_NAME = re.compile(r"[^\w.() -]+")


@dataclass
class MergeDone:
    at: float
    file: str
    copy: str
    tool: str
    kept_at: str  # where the copy went, relative to the vault
    added: list[str] = field(default_factory=list)
    removed: list[tuple[str, str]] = field(default_factory=list)
    kept: list[tuple[str, str]] = field(default_factory=list)
    duplicates: int = 0

    def describe(self) -> str:
        parts = [f"{len(self.added)} line(s) of the copy added"]
        if self.duplicates:
            parts.append(f"{self.duplicates} it shared with the file")
        if self.removed:
            parts.append(f"{len(self.removed)} left out (removed by tars after their last edit)")
        if self.kept:
            parts.append(f"{len(self.kept)} kept for you to look at (in one version only)")
        return (
            f"merged {self.tool}'s conflict copy {self.copy} into {self.file}: "
            + ", ".join(parts)
            + f"; the copy is kept at {self.kept_at}"
        )


def merge_copy(
    vault: Path, copy: ConflictCopy, kind: str, memory: MemoryFiles, journal: Journal, machine: str, max_bytes: int
) -> MergeDone | None:
    """Merge ``copy`` into its file and move it to .tars/merged/. None when there was nothing to do
    now (the copy is gone: another machine merged it; or it changed while being merged: next look)."""
    try:
        raw, st = read_beneath(vault, copy.path, max_bytes)
    except FileNotFoundError:
        return None
    theirs = raw.decode("utf-8", errors="replace")
    target = owned_file(vault, copy.original)
    view = journal.view()
    outcome: list[Merged] = []

    def change(ours: str) -> str | None:
        try:
            ours_mtime = target.stat().st_mtime
        except OSError:
            ours_mtime = time.time()
        result = merge(ours, theirs, kind, copy.original, view, ours_mtime, st.st_mtime)
        outcome[:] = [result]
        return result.text if result.changed else None

    if kind == MEMORY:
        which = "semantic" if copy.original == memory.config.semantic_file else "procedural"
        memory.rewrite(which, change, added=_Later(lambda: outcome[0].added_under if outcome else []), journaled=False)
    else:
        make_folders(vault, target.parent)
        atomic_update(target, change)
    if not outcome:
        return None
    result = outcome[0]
    kept_at = _archive(vault, copy, raw, machine)
    if kept_at is None:
        return None
    done = MergeDone(
        time.time(), copy.original, copy.path, copy.tool, kept_at, result.added, result.removed, result.kept, result.duplicates
    )
    log.warning("%s", done.describe())
    for line, why in result.kept:
        log.info("merge of %s: kept %r: %s", copy.path, line.strip(), why)
    for line, why in result.removed:
        log.info("merge of %s: left out %r: %s", copy.path, line.strip(), why)
    return done


class _Later(list):
    """The (line, heading) pairs a merge brought in, for the write guard: MemoryFiles tells the guard
    after the write, and only the merge made in that write knows them."""

    def __init__(self, pairs):
        super().__init__()
        self._pairs = pairs

    def __iter__(self):
        return iter(list(self._pairs()))

    def __bool__(self) -> bool:
        return True


def _archive(vault: Path, copy: ConflictCopy, merged: bytes, machine: str) -> str | None:
    """Move the copy into .tars/merged/<machine>/ if it still holds ``merged``; its new path, or None."""
    source = owned_file(vault, copy.path)
    try:
        now = source.read_bytes()
    except FileNotFoundError:
        return "(gone: another machine merged it too)"
    if now != merged:
        log.info("the conflict copy %s changed while it was merged: merged again at the next look", copy.path)
        return None
    name = _UNSAFE_NAME.sub("-", copy.path.replace("/", "--"))[:180]
    rel = f"{MERGED}/{machine}/{time.strftime('%Y%m%d-%H%M%S')}-{name}"
    try:
        destination = owned_file(vault, rel)
        make_folders(vault, destination.parent)
        os.replace(source, destination)
    except FileNotFoundError:
        return "(gone: another machine merged it too)"
    except (OSError, OutsideVault) as exc:
        log.warning(
            "could not move the merged conflict copy %s to %s (%s): it is merged again, changing nothing, at the next look",
            copy.path,
            rel,
            exc,
        )
        return None
    return rel
