"""Where the ``note`` target may write, checked when a routine is written (at add, edit, an
approved proposal and each read of the routines file), not at its first delivery: a note path
inside the vault that means one note, and a heading that reads back as itself.

A note path is relative to the vault, with ``{date}`` for the day (``Daily/{date}.md``). Refused:
an absolute path, ``..``, a path a symlinked folder leads out of the vault, and the characters
Obsidian gives a meaning in a link (``#`` a heading, ``^`` a block, ``|`` an alias, ``[[``/``]]``),
which also could never name the note a link to it would open. A heading is matched as a whole
ATX heading line (``## tars``), outside fenced code blocks, any level and any case.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from tarsd.vault.files import OutsideVault, owned_file

NOTE_HINT = 'give a path inside the vault, e.g. "Daily/{date}.md" ({date} is the day); no "..", "#", "^", "|" or "[[ ]]"'
_LINK_MARKS = ("#", "^", "|", "[[", "]]", "\\")
# An ATX heading: up to 3 spaces, 1-6 "#", a blank or the end, the text, an optional closing run of
# "#" that a blank precedes (so "## C#" is the heading "C#", and "## notes ##" is "notes").
_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
MAX_HEADING = 200
MAX_NOTE_PATH = 500


def heading_of(line: str) -> tuple[int, str] | None:
    """(level, text) of an ATX heading line, None for any other line."""
    match = _ATX.fullmatch(line.rstrip("\r\n"))
    if match is None:
        return None
    return len(match.group(1)), (match.group(2) or "").strip()


def note_problem(template: str, vault: Path | None = None, when: datetime | None = None) -> str:
    """Why ``template`` cannot name the note target's note ("" when it can). With ``vault``, the
    path (``{date}`` made the day of ``when``, default today) must also stay in it through any
    symlinked folder."""
    rel = template.strip()
    if not rel:
        return ""  # the config's [routines] note is used
    if len(rel) > MAX_NOTE_PATH:
        return f"the note's path is {len(rel):,} characters long; at most {MAX_NOTE_PATH}"
    if rel.startswith(("/", "~")) or re.match(r"[A-Za-z]:[\\/]", rel):
        return f"the note {rel!r} is not a path inside the vault"
    if any(part == ".." for part in rel.split("/")):
        return f"the note {rel!r} has '..' in it: it could lead anywhere"
    marks = [mark for mark in _LINK_MARKS if mark in rel]
    if marks:
        return f"the note {rel!r} has {', '.join(repr(m) for m in marks)} in it, which a note's name in the vault cannot have"
    if vault is not None:
        day = (when or datetime.now()).strftime("%Y-%m-%d")
        path = rel.replace("{date}", day)
        try:
            owned_file(vault, path if path.endswith(".md") else path + ".md")
        except OutsideVault as exc:
            return f"the note {rel!r}: {exc}"
    return ""


def heading_problem(heading: str) -> str:
    """Why ``heading`` cannot be the note target's heading ("" when it can): it must read back as
    itself when written as ``## heading`` (no closing run of "#", not too long)."""
    text = heading.strip()
    if not text:
        return ""  # the config's [routines] heading is used
    if len(text) > MAX_HEADING:
        return f"the heading is {len(text)} characters long; at most {MAX_HEADING}"
    if heading_of(f"## {text}") != (2, text):
        return f"the heading {text!r} would not read back as itself in markdown (it ends in a run of '#' after a blank)"
    return ""
