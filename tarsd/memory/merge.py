"""Merging a sync tool's conflict copy of a file tars writes back into the file, line by line.

Two kinds of file tars writes are merged (tarsd/sync/files.py says which file is which kind):

- ``MEMORY`` (Memory.md, Procedural.md): facts and rules, one a line, under headings. Every line of
  either version stays, unless tars's journal (tarsd/memory/journal.py) shows that tars removed it
  (forget, a replacement) *after* the line's last edit: then it is left out. The same fact in both
  versions (however stamped, under whichever heading) is kept once, where the file has it.
- ``LOG`` (the feedback files, the notes routines write to, and any file another module registers
  as a log): entries tars and you append. Every line of either version stays.

Sections are matched by heading, so a heading both machines created ("# Pets") is there once, with
the lines of both under it; within a section the two versions are aligned line by line (difflib),
and the lines only one version has go in at their place.

A line only one version has is either an addition on that side or a removal on the other; no sync
tool says which. The rules, in order:

1. tars's journal has a removal of that very line (forget, replace) newer than its last edit (its
   newest add in the journal; for a line tars never wrote, the time of the version holding it):
   the line is left out (listed under ``removed``).
2. A removal is journaled but it is older than the line's last edit: the line stays, listed under
   ``kept`` (it was written again, or edited, after the removal).
3. A line tars never wrote that reads like a line tars removed (a hand edit of it, at least 60 %
   alike): the same comparison, the removal against the time of the version holding the edit.
4. Otherwise the line stays. A line of yours (no stamp, no journal entry) that only one version has
   is listed under ``kept``: tars cannot tell your deletion in one version from your addition in
   the other, so it keeps it and says so. tars's own lines are additions: kept, not listed.

Nothing here touches a file: ``merge`` is text in, text out (tarsd/sync/merging.py writes it).
"""

from __future__ import annotations

import difflib
import re
import time
from dataclasses import dataclass, field

from tarsd.memory import facts
from tarsd.memory.journal import JournalView
from tarsd.memory.lines import HEADING, join_lines, memory_lines, split_lines

MEMORY, LOG = "memory", "log"
KINDS = (MEMORY, LOG)
EDIT_LIKENESS = 0.6  # a line tars never wrote this alike to a removed one is taken for a hand edit of it
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass
class Merged:
    text: str  # the merged file
    changed: bool  # differs from the file's version ("ours")
    added: list[str] = field(default_factory=list)  # lines of the copy now in the file
    added_under: list[tuple[str, str]] = field(default_factory=list)  # the same, with the heading each went under
    removed: list[tuple[str, str]] = field(default_factory=list)  # (line, why) left out: removed after their last edit
    kept: list[tuple[str, str]] = field(default_factory=list)  # (line, why) in one version only, kept: look at them
    duplicates: int = 0  # lines of the copy the file already held (the same fact, otherwise stamped or placed)


@dataclass
class _Section:
    key: tuple[int, str, int]  # (heading level, title lowered, which occurrence); (0, "", 0): before the first heading
    lines: list[str]  # the heading line first (none for the part before the first heading), then the section's lines

    @property
    def title(self) -> str:
        heading = HEADING.match(self.lines[0]) if self.key[0] and self.lines else None
        return heading.group(2) if heading is not None else ""


def _sections(text: str) -> list[_Section]:
    sections = [_Section((0, "", 0), [])]
    counts: dict[tuple[int, str], int] = {}
    fenced = False
    lines = split_lines(text)
    front = 0
    if lines and lines[0].rstrip() == "---":  # front matter is the first section's, heading-like lines and all
        front = next((i + 1 for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), 0)
    for number, line in enumerate(lines):
        if number >= front and _FENCE.match(line):
            fenced = not fenced
        heading = None if fenced or number < front else HEADING.match(line)
        if heading is not None:
            level, title = len(heading.group(1)), heading.group(2).strip().lower()
            seen = counts.get((level, title), 0)
            counts[(level, title)] = seen + 1
            sections.append(_Section((level, title, seen), [line]))
        else:
            sections[-1].lines.append(line)
    return sections


def _fact_key(line: str) -> str:
    parsed = memory_lines(line)
    return facts.key(parsed[0].text) if parsed else ""


def _stamped(line: str) -> bool:
    parsed = memory_lines(line)
    return bool(parsed) and parsed[0].stamp is not None


class _Merger:
    def __init__(self, kind: str, file: str, journal: JournalView | None, ours_mtime: float, theirs_mtime: float, ours: str, theirs: str):
        self.kind, self.file, self.journal = kind, file, journal
        self.mtime = {"ours": ours_mtime, "theirs": theirs_mtime}
        self.result = Merged("", False)
        self.keys = {"ours": self._keys(ours), "theirs": self._keys(theirs)}
        self.taken_from_theirs: set[str] = set()
        removals = journal.removals.get(file, []) if journal is not None else []
        present = self.keys["ours"] | self.keys["theirs"]
        self.gone = [event for event in removals if event.key not in present]  # lines tars removed that neither version holds

    def _keys(self, text: str) -> set[str]:
        return {facts.key(line.text) for line in memory_lines(text)} if self.kind == MEMORY else set()

    def one_sided(self, line: str, side: str, section: str = "") -> bool:
        """Whether a line only ``side`` holds goes into the merged file (rule by rule: the module's docstring)."""
        key = _fact_key(line) if line.strip() else ""
        if not key:
            return True  # a heading's neighbour, a blank, a comment: layout, kept
        if self.kind == LOG:
            return self._take(line, key, side, section)
        other = "theirs" if side == "ours" else "ours"
        if side == "theirs" and (key in self.keys["ours"] or key in self.taken_from_theirs):
            self.result.duplicates += 1
            return False  # the file holds this fact already, as it stands there
        if side == "ours" and key in self.keys[other]:
            return True  # the copy holds it too, elsewhere: it stays where the file has it
        journal = self.journal
        removal = journal.removed_at(self.file, key) if journal is not None else None
        added_at = journal.added_at.get((self.file, key)) if journal is not None else None
        edited_at = added_at if added_at is not None else self.mtime[side]
        if removal is not None:
            if removal.t > edited_at:
                self.result.removed.append((line, f"removed by tars on {removal.machine} at {_clock(removal.t)}, after its last edit"))
                return False
            self.result.kept.append(
                (line, f"removed by tars on {removal.machine} at {_clock(removal.t)}, but written again or edited after")
            )
            return self._take(line, key, side, section)
        if added_at is None and not _stamped(line):
            edit = self._edit_of(key)
            if edit is not None and edit.t > edited_at:
                self.result.removed.append(
                    (
                        line,
                        f"an edit of a line tars removed on {edit.machine} at {_clock(edit.t)}, "
                        f"later than this version: {edit.line.strip()}",
                    )
                )
                return False
            if edit is not None:
                self.result.kept.append((line, f"edited after tars removed it on {edit.machine} at {_clock(edit.t)}: {edit.line.strip()}"))
            else:
                where = "the copy" if side == "theirs" else "the file"
                self.result.kept.append((line, f"a line of yours only {where} held: added there, or deleted in the other version"))
        return self._take(line, key, side, section)

    def _take(self, line: str, key: str, side: str, section: str) -> bool:
        if side == "theirs":
            self.taken_from_theirs.add(key)
            self.result.added.append(line)
            self.result.added_under.append((line, section))
        return True

    def _edit_of(self, key: str):
        best, best_ratio = None, EDIT_LIKENESS
        for event in self.gone:
            matcher = difflib.SequenceMatcher(None, key, event.key, autojunk=False)
            if matcher.real_quick_ratio() < best_ratio or matcher.quick_ratio() < best_ratio:
                continue
            ratio = matcher.ratio()
            if ratio >= best_ratio:
                best, best_ratio = event, ratio
        return best

    def lines(self, ours: list[str], theirs: list[str], section: str) -> list[str]:
        """One section's lines: ours and theirs aligned, the one-sided lines decided."""
        out: list[str] = []
        matcher = difflib.SequenceMatcher(None, [line.rstrip() for line in ours], [line.rstrip() for line in theirs], autojunk=False)
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            if op == "equal":
                out.extend(ours[i1:i2])
                continue
            out.extend(line for line in ours[i1:i2] if self.one_sided(line, "ours", section))
            for line in theirs[j1:j2]:
                if not line.strip():
                    if out and out[-1].strip():
                        out.append(line)  # the copy's blank lines only where they separate something
                elif self.one_sided(line, "theirs", section):
                    out.append(line)
        return out


def merge(
    ours: str,
    theirs: str,
    kind: str,
    file: str = "",
    journal: JournalView | None = None,
    ours_mtime: float | None = None,
    theirs_mtime: float | None = None,
) -> Merged:
    """The file's version (``ours``) with its conflict copy (``theirs``) merged in (module docstring).
    ``file`` is the file's path in the vault, as the journal names it; ``*_mtime``: when each
    version was last saved (a line's last edit, for lines tars never wrote)."""
    if kind not in KINDS:
        raise ValueError(f"no merge for files of kind {kind!r}")
    now = time.time()
    merger = _Merger(
        kind, file, journal, now if ours_mtime is None else ours_mtime, now if theirs_mtime is None else theirs_mtime, ours, theirs
    )
    mine, other = _sections(ours), _sections(theirs)
    by_key = {section.key: section for section in other}
    out: list[list[str]] = []
    placed: dict[tuple[int, str, int], int] = {}  # section key -> its index in out
    for section in mine:
        match = by_key.get(section.key)
        start = 1 if section.key[0] else 0  # the heading line, when there is one
        if match is None:
            lines = section.lines[:start] + [line for line in section.lines[start:] if merger.one_sided(line, "ours", section.title)]
        else:
            lines = section.lines[:start] + merger.lines(section.lines[start:], match.lines[start:], section.title)
        placed[section.key] = len(out)
        out.append(lines)
    insert_at = len(out)
    previous = None
    for section in other:
        if section.key in placed:
            previous = section.key
            continue
        start = 1 if section.key[0] else 0
        body = [line for line in section.lines[start:] if (line.strip() == "" or merger.one_sided(line, "theirs", section.title))]
        if not any(line.strip() for line in body) and merger.kind == MEMORY:
            continue  # a heading whose lines the file holds already (or left out): no empty heading brought in
        where = insert_at if previous is None else placed[previous] + 1
        out.insert(where, section.lines[:start] + body)
        placed = {key: (index + 1 if index >= where else index) for key, index in placed.items()}
        placed[section.key] = where
        previous = section.key
    lines: list[str] = []
    for block in out:
        if block and HEADING.match(block[0]) and lines and lines[-1].strip():
            lines.append("")  # a heading brought in from the copy starts after a blank line, as tars writes headings
        lines.extend(block)
    own = split_lines(ours)
    trailing = len(own) - len(_without_trailing_blanks(own))
    lines = _without_trailing_blanks(lines) + [""] * trailing  # the file's own ending, whatever the copy ended with
    text = join_lines(lines, ours or theirs)
    merger.result.text = text
    merger.result.changed = text != ours
    return merger.result


def _without_trailing_blanks(lines: list[str]) -> list[str]:
    end = len(lines)
    while end and not lines[end - 1].strip():
        end -= 1
    return lines[:end]


def _clock(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))
