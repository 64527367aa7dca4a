"""Applying approved memory-review proposals to Memory.md, undoing an applied change, and finishing
at start what a kill interrupted.

A change is worked out on the file's text line by line (``apply_text``): the lines a proposal takes
out are found by their exact text (its stamp too), at the line they were on or anywhere; a line no
longer there makes that proposal *gone* (the user edited it meanwhile), never a guess at another.
Everything else in the file stays byte for byte. Then, in this order:

1. the journal row (state writing: the file before and after, what it removes and adds);
2. a section that moves: its note, written first (a kill now leaves the lines in both places, and
   the next start takes the note back, since Memory.md still holds them);
3. Memory.md, through the memory files' own write (the write guard watches the lines it removed
   and added, as for a forget or a remember);
4. the journal row and its proposals marked applied, in one transaction;
5. the entry in the history note (review_history.py).

An undo puts the file back byte for byte when nobody changed it since (its text is the change's
"after"); otherwise it puts each line taken out back after the line it followed (or at the end of its
section) and takes out each line it added, leaving the user's edits since, and says it did so.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tarsd.memory import provenance
from tarsd.memory.lines import insert_under, join_lines, split_lines
from tarsd.memory.review_history import record
from tarsd.memory.review_store import APPROVING, GONE, PENDING, WRITING, Change, Proposal, ReviewStore
from tarsd.vault.atomic import atomic_update
from tarsd.vault.files import owned_file, read_owned
from tarsd.vault.root import make_folders

log = logging.getLogger(__name__)

UNDO_COMMAND = "tarsctl memory undo {id}"


@dataclass(slots=True)
class Worked:
    """A change worked out on a text."""

    text: str
    summary: dict
    gone: list[int] = field(default_factory=list)  # proposals whose lines are no longer there
    note: tuple[str, str, list[str]] | None = None  # a section moving out: (note path, section, its lines)


def apply_text(text: str, proposals: list[Proposal], stamp: provenance.Stamp, who: str = "") -> Worked:
    """Memory.md's text with the proposals applied; the summary of what changed (for the journal,
    the history and the undo)."""
    lines = split_lines(text)
    taken: dict[int, tuple[Proposal, dict]] = {}
    gone: list[int] = []
    usable: list[Proposal] = []
    for proposal in proposals:
        found: dict[int, dict] = {}
        for item in proposal.removes:
            index = _find(lines, item, set(taken) | set(found))
            if index is None:
                break
            found[index] = item
        else:
            usable.append(proposal)
            taken.update({index: (proposal, item) for index, item in found.items()})
            continue
        gone.append(proposal.id)
    removed = []
    for index in sorted(taken):
        proposal, item = taken[index]
        removed.append(
            {
                "raw": lines[index],
                "line": index,
                "prev": lines[index - 1] if index > 0 else "",
                "section": item.get("section", ""),
                "kind": proposal.kind,
                "why": proposal.why,
                "source": proposal.source,
                "proposal": proposal.id,
            }
        )
    for index in sorted(taken, reverse=True):
        del lines[index]
    new = join_lines(lines, text) if lines or text else ""
    added = []
    note = None
    for proposal in usable:
        if proposal.kind == "budget":
            section, path = proposal.body["section"], proposal.body["note"]
            link = f"- Moved to [[{path.removesuffix('.md')}|{section}]]: {len(proposal.removes)} lines {stamp.render()}"
            new = insert_under(new, section, link)
            added.append({"raw": link, "section": section, "proposal": proposal.id, "source": proposal.source})
            note = (path, section, [item["raw"] for item in proposal.removes])
        elif proposal.adds is not None:
            fact, section = proposal.adds["text"], proposal.adds.get("section", "")
            raw = f"- {fact} {stamp.render()}"
            new = insert_under(new, section, raw)
            added.append({"raw": raw, "section": section, "proposal": proposal.id, "source": proposal.source})
    summary = {"removed": removed, "added": added, "who": who}
    if note is not None:
        summary["moved"] = {"section": note[1], "note": note[0], "lines": note[2]}
    return Worked(new, summary, gone, note)


def _find(lines: list[str], item: dict, taken: set[int]) -> int | None:
    """The line ``item`` names: exactly its text, at its place or anywhere; None when it is gone."""
    index = item.get("line", -1)
    if 0 <= index < len(lines) and lines[index] == item["raw"] and index not in taken:
        return index
    return next((i for i, line in enumerate(lines) if line == item["raw"] and i not in taken), None)


def reverse_text(current: str, change: Change) -> str:
    """``current`` with a change undone line by line (for a file edited since the change)."""
    lines = split_lines(current)
    for item in change.summary.get("added", []):
        if item["raw"] in lines:
            lines.remove(item["raw"])
    text = join_lines(lines, current) if lines else ""
    for item in sorted(change.summary.get("removed", []), key=lambda entry: entry["line"]):
        lines = split_lines(text)
        if item["prev"] and item["prev"] in lines:
            at = lines.index(item["prev"]) + 1
            lines.insert(at, item["raw"])
            text = join_lines(lines, text)
        elif not item["prev"]:
            text = join_lines([item["raw"], *lines], text or "\n")
        else:
            text = insert_under(text, item.get("section", ""), item["raw"])
    return text


def note_text(before: str | None, section: str, moved: list[str]) -> str:
    """The note a section moves to: its heading and its lines, after what the note held."""
    head = (before.rstrip("\n") + "\n\n") if before and before.strip() else f"# {section}\n\nMoved from Memory.md by the memory review.\n\n"
    return head + "\n".join(moved) + "\n"


class Applier:
    """Writes approved changes and undoes them; ``write`` is the memory files' guarded write of Memory.md."""

    def __init__(
        self,
        vault: Path,
        store: ReviewStore,
        target: Callable[[], Path],
        write: Callable[[Callable[[str], str | None], list[tuple[str, str]], list[str]], str | None],
        history_folder: str,
        on_written: Callable[[str], None] | None = None,
    ):
        self.vault = vault
        self.store = store
        self.target = target
        self.write = write
        self.history_folder = history_folder
        self.on_written = on_written

    def rel(self) -> str:
        return self.target().relative_to(self.vault).as_posix()

    def apply(self, proposals: list[Proposal], who: str) -> tuple[Change | None, list[int], str]:
        """Apply claimed proposals as one change. (the change, or None when nothing could be
        applied; the proposals gone since they were made; the history note's path)."""
        target = self.target()
        current = read_owned(self.vault, target)
        stamp = provenance.new_stamp()
        worked = apply_text(current, proposals, stamp, who)
        if worked.gone:
            self.store.set_state(worked.gone, GONE, only_from=APPROVING)
        usable = [p for p in proposals if p.id not in worked.gone]
        if not usable:
            return None, worked.gone, ""
        note_path = ""
        note_before = note_after = None
        if worked.note is not None:
            note_path, section, moved = worked.note
            note_file = owned_file(self.vault, note_path)
            note_before = read_owned(self.vault, note_file) if note_file.exists() else None
            note_after = note_text(note_before, section, moved)
        change_id = self.store.begin_change(
            self.rel(), current, worked.text, worked.summary, [p.id for p in usable], (note_path, note_before, note_after)
        )
        try:
            if worked.note is not None:
                note_file = owned_file(self.vault, note_path)
                make_folders(self.vault, note_file.parent)
                atomic_update(note_file, lambda now: note_text(now if now.strip() else None, worked.note[1], worked.note[2]))
                if self.on_written is not None:
                    self.on_written(note_path)
            bases: list[str] = []

            def change(text: str) -> str:
                bases.append(text)
                return apply_text(text, usable, stamp, who).text if text != current else worked.text

            added = [(item["raw"], item["section"]) for item in worked.summary["added"]]
            removed = [item["raw"] for item in worked.summary["removed"]]
            written = self.write(change, added, removed)
            after = written if written is not None else (bases[-1] if bases else current)
            note_now = read_owned(self.vault, owned_file(self.vault, note_path)) if note_path else None
            self.store.written(change_id, bases[-1] if bases else current, after, note_before, note_now)
        except BaseException:
            self._roll_back(change_id)
            raise
        applied = self.store.change(change_id)
        assert applied is not None
        return applied, worked.gone, self._record(applied)

    def _roll_back(self, change_id: int) -> None:
        """A change whose write failed (a full disk): the file is as it was, the proposals wait again."""
        change = self.store.change(change_id)
        if change is not None and change.state == WRITING:
            try:
                self._put_back_note(change)
            except OSError as exc:
                log.warning("could not take back the note %s: %s", change.note_path, exc)
            self.store.dropped(change_id)

    def _put_back_note(self, change: Change) -> None:
        if not change.note_path or change.note_after is None:
            return
        note_file = owned_file(self.vault, change.note_path)
        if read_owned(self.vault, note_file) != change.note_after:
            return  # edited since (or never written): left as it is
        if change.note_before is None:
            os.unlink(note_file)
        else:
            atomic_update(note_file, lambda _now: change.note_before)
        if self.on_written is not None:
            self.on_written(change.note_path)

    def _record(self, change: Change) -> str:
        try:
            path = record(self.vault, self.history_folder, change, UNDO_COMMAND.format(id=change.id), self.store.machine())
        except OSError as exc:  # the change is made; its entry is written at the next start
            log.warning("memory change %d: the history note was not written (%s); it is at the next start", change.id, exc)
            return ""
        self.store.recorded(change.id)
        if self.on_written is not None:
            self.on_written(path)
        return path

    # ---- undo ----

    def undo(self, change: Change) -> tuple[bool, str]:
        """Undo an applied change: (byte for byte, the history note's path)."""
        exact: list[bool] = []

        def back(text: str) -> str:
            exact.append(text == change.after)
            return change.before if text == change.after else reverse_text(text, change)

        added = [(item["raw"], item.get("section", "")) for item in change.summary.get("removed", [])]
        removed = [item["raw"] for item in change.summary.get("added", [])]
        self.write(back, added, removed)
        self._put_back_note(change)
        self.store.undone(change.id)
        undone = self.store.change(change.id)
        assert undone is not None
        return (exact[-1] if exact else True), self._record(undone)

    # ---- at start ----

    def recover(self) -> list[str]:
        """Finish or roll back what a kill interrupted; for the log."""
        said = []
        for proposal in self.store.orphans():
            self.store.set_state([proposal.id], PENDING, only_from=APPROVING)
            said.append(f"proposal #{proposal.id} was being approved when tarsd stopped, before anything was written: it waits again")
        for change in self.store.changes((WRITING,)):
            current = read_owned(self.vault, owned_file(self.vault, change.path))
            if current == change.after or (current != change.before and _holds(current, change)):
                note_now = read_owned(self.vault, owned_file(self.vault, change.note_path)) if change.note_path else None
                self.store.written(change.id, change.before, current, change.note_before, note_now)
                said.append(f"memory change {change.id} was written when tarsd stopped: marked applied")
            else:
                self._put_back_note(change)
                self.store.dropped(change.id)
                said.append(f"memory change {change.id} was not written when tarsd stopped: its proposals wait again")
        for change in self.store.unrecorded():
            self._record(change)
        return said


def _holds(text: str, change: Change) -> bool:
    """The change is in ``text`` (an editor saved since): as many fewer copies of each line it took
    out as it took out, and its added lines there."""
    now, before = Counter(split_lines(text)), Counter(split_lines(change.before))
    out = Counter(item["raw"] for item in change.summary.get("removed", []))
    return all(now[raw] <= before[raw] - count for raw, count in out.items()) and all(
        now[item["raw"]] > 0 for item in change.summary.get("added", [])
    )
