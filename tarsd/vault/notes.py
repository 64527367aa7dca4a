"""Reading a note for a client or the model, safely: the one implementation behind the
read_note request and the chat tool of the same name.

The rules are the vault's (tarsd/vault/files.py): only a regular markdown file whose real path is
inside the vault is read. A path outside the vault, one through a symlinked folder leading
out of it, a symlink, a FIFO or a dot-folder (.obsidian, .git) is refused with the reason; the
checks are on the path, but the read itself opens the file with no symlink followed in any
folder (vault.read_note), so a folder swapped for a symlink after the checks is refused too.
Lines are numbered as the chunker numbers them, so a search hit's start_line..end_line reads
back the same passage; a heading is found as the chunker sees headings (not in front matter
or code blocks). What is returned is bounded in characters: a longer range stops early and
says where, so the caller can ask for the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tarsd.markdown.chunker import note_lines, outline
from tarsd.vault.files import REDIRECTED, OutsideVault, is_ignored, read_note, stat_note, vault_relative


class NoteError(Exception):
    """The note cannot be read as asked: ``code`` (bad_request | not_found | unreadable), the
    message, and a hint naming what to do."""

    def __init__(self, code: str, message: str, hint: str = ""):
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint


@dataclass(frozen=True, slots=True)
class NoteSlice:
    path: str  # relative to the vault
    title: str
    start_line: int  # 1-based, of lines[0]; 0 for an empty note
    end_line: int  # inclusive
    lines: list[str] = field(default_factory=list)
    total_lines: int = 0
    truncated: bool = False  # stopped at max_chars before end_line asked for: ask again from end_line + 1
    heading: str = ""  # the heading path read ("Parent > Child"), when asked for a heading
    problem: str = ""  # read, but with a problem (invalid UTF-8 replaced)


def read_lines(
    vault: Path,
    path: str,
    *,
    start_line: int | None = None,
    end_line: int | None = None,
    heading: str = "",
    max_chars: int = 100_000,
    max_bytes: int = 10_000_000,
    missing_ok: bool = False,
) -> NoteSlice:
    """Lines of the note at ``path`` (absolute, or relative to the vault): all of them, the
    range start_line..end_line (1-based, inclusive; None: from the start, to the end), or the
    section under ``heading`` (its heading line to the line before the next heading of the
    same or a higher level). Raises NoteError. ``missing_ok``: a missing file reads as an empty
    note (a memory file that nothing was remembered in yet)."""
    if not path.strip():
        raise NoteError("bad_request", "no note given", "give a note's path inside the vault, as search returns it")
    if heading.strip() and (start_line is not None or end_line is not None):
        raise NoteError("bad_request", "give a heading or a line range, not both", "read the heading's section, then a range of it")
    try:
        rel = vault_relative(vault, path)
    except OutsideVault as exc:
        raise NoteError("bad_request", str(exc), exc.hint) from None
    if rel == "." or is_ignored(rel):
        raise NoteError(
            "bad_request", f"{path} is not a note: tars reads only markdown notes (.md) outside dot-folders", "give a note's path"
        )
    disk = stat_note(vault, rel)
    if disk is None:
        if missing_ok and not (vault / rel).exists():
            return NoteSlice(rel, "", 0, 0)
        raise NoteError("not_found", f"there is no note at {rel}", "search for it, or check the path (it is relative to the vault)")
    if disk.problem is not None:
        raise NoteError("bad_request", f"{rel}: {disk.problem}", "tars reads only real files inside the vault")
    content = read_note(vault, rel, max_bytes)
    if content.problem == REDIRECTED:  # a folder swapped for a symlink since the check above
        raise NoteError("bad_request", f"{rel}: {content.problem}", "tars reads only real files inside the vault")
    if content.text is None:
        raise NoteError("unreadable", f"{rel}: {content.problem}")
    lines = note_lines(content.text)
    shape = outline(lines)
    total = len(lines)
    found_heading = ""
    if heading.strip():
        first, last, found_heading = _section(shape.headings, heading, total, rel)
        while last > first and not lines[last - 1].strip():
            last -= 1  # the blank lines before the next heading are not the section's
    else:
        first = 1 if start_line is None else start_line
        last = total if end_line is None else min(end_line, total)
        if total and first > total:
            raise NoteError("bad_request", f"line {first} is past the end of {rel}, which has {total} lines", f"ask for lines 1 to {total}")
        if end_line is not None and end_line < first:
            raise NoteError("bad_request", f"end_line {end_line} is before start_line {first}", "give start_line <= end_line")
    if not total:
        return NoteSlice(rel, shape.title, 0, 0, [], 0, heading=found_heading, problem=content.problem or "")
    taken, truncated = _bounded(lines[first - 1 : last], max_chars)
    return NoteSlice(
        rel,
        shape.title,
        first,
        first + len(taken) - 1,
        taken,
        total,
        truncated=truncated,
        heading=found_heading,
        problem=content.problem or "",
    )


def _section(headings: list[tuple[int, tuple[str, ...]]], wanted: str, total: int, rel: str) -> tuple[int, int, str]:
    """(first line, last line, heading path) of the section under ``wanted``: its whole path
    ("Parent > Child") or its own name, case and spacing aside; the whole path wins."""
    key = _key(wanted)
    match = next((i for i, (_, path) in enumerate(headings) if _key(" > ".join(path)) == key), None)
    if match is None:
        match = next((i for i, (_, path) in enumerate(headings) if _key(path[-1]) == key), None)
    if match is None:
        shown = "; ".join(" > ".join(path) for _, path in headings[:30]) or "none"
        raise NoteError("not_found", f"{rel} has no heading {wanted.strip()!r}", f"its headings: {shown}")
    line, path = headings[match]
    # A following heading at the same or a higher level ends the section (deeper ones are inside it).
    end = next((other - 1 for other, deeper in headings[match + 1 :] if len(deeper) <= len(path)), total)
    return line, end, " > ".join(path)


def _key(text: str) -> str:
    return " ".join(text.replace(">", " > ").split()).casefold()


def _bounded(lines: list[str], max_chars: int) -> tuple[list[str], bool]:
    """The first lines that fit in max_chars (a first line longer than that is cut), and
    whether any were left out."""
    taken: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) > max_chars:
            if not taken:
                taken.append(line[:max_chars])
            return taken, True
        taken.append(line)
        used += len(line) + 1
    return taken, False
