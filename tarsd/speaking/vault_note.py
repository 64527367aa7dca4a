"""The ``note`` target: a message appended under a heading of a note the user names (the day's
daily note, say), written the way tars writes its memory files: atomically, inside the vault, never
through a symlink that leads out of it. The note and heading were checked when the routine was
written (tarsd/routines/note_target.py); the path is checked again here, as a folder may have been
swapped for a symlink since."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from tarsd.markdown.visible import in_fenced_code
from tarsd.routines.note_target import heading_of, note_problem
from tarsd.vault.atomic import atomic_update
from tarsd.vault.files import OutsideVault, owned_file


class NoteTargetError(ValueError):
    """The note cannot take the message (no note named, a path outside the vault); says what to do."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.hint = hint


def note_path(template: str, when: datetime) -> str:
    """The note for a message sent at ``when`` (local time): ``{date}`` is its YYYY-MM-DD."""
    if not template.strip():
        raise NoteTargetError(
            "the note target names no note",
            'set the routine\'s note (tarsctl routines edit NAME --note "Daily/{date}.md") or [routines] note in the config',
        )
    rel = template.replace("{date}", when.strftime("%Y-%m-%d")).strip()
    return rel if rel.endswith(".md") else rel + ".md"


def entry(title: str, text: str, when: datetime) -> str:
    """One message as it reads in the note: its time and source in bold, then its text."""
    return f"**{when.strftime('%H:%M')} {title}**\n{text.strip()}\n"


def insert_under(document: str, heading: str, block: str) -> str:
    """``document`` with ``block`` at the end of the section under ``heading`` (an ATX heading line
    whose whole text is ``heading``, any level, any case, not inside a fenced code block), or, when
    there is no such heading, with a new ``## heading`` section at the end holding it."""
    lines = document.splitlines(keepends=True)
    in_code = in_fenced_code([line.rstrip("\r\n") for line in lines])
    wanted = heading.strip().casefold()
    start = level = None
    for number, line in enumerate(lines):
        found = None if in_code[number] else heading_of(line)
        if found is None:
            continue
        if start is None and found[1].casefold() == wanted:
            start, level = number, found[0]
        elif start is not None and level is not None and found[0] <= level:
            before = "".join(lines[:number]).rstrip("\n") + "\n\n"
            return before + block + "\n" + "".join(lines[number:])
    if start is not None:
        return document.rstrip("\n") + "\n\n" + block
    prefix = document.rstrip("\n") + "\n\n" if document.strip() else ""
    return f"{prefix}## {heading.strip()}\n\n{block}"


def append_to_note(vault: Path, rel: str, heading: str, block: str) -> str:
    """Append ``block`` under ``heading`` in the note ``rel`` (made, with its folders, when missing);
    the note's path in the vault."""
    problem = note_problem(rel)
    if problem:  # a delivery recorded before these checks, or a note path the config gives
        raise NoteTargetError(problem, "fix the routine's note (tarsctl routines edit NAME --note ...) or [routines] note")
    try:
        path = owned_file(vault, rel)
    except OutsideVault as exc:
        raise NoteTargetError(str(exc), exc.hint) from None
    if path.suffix != ".md":
        raise NoteTargetError(f"{rel} is not a markdown note", "name a note ending in .md")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_update(path, lambda text: insert_under(text, heading, block))
    return path.relative_to(vault).as_posix()
