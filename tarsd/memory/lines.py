"""The lines of a memory file: parsed (list item, section, provenance stamp) and edited one
line at a time, keeping everything else in the file byte for byte.

Pure text work, shared by the memory files (tarsd/memory/files.py) and the write guard that puts
back a line an editor's stale save dropped (tarsd/memory/guard.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from tarsd.memory import facts, provenance

HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LIST_PREFIX = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?")
RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")


@dataclass(frozen=True, slots=True)
class MemoryLine:
    index: int  # 0-based line number in the file
    raw: str  # the line as it is in the file
    text: str  # without list marker and provenance stamp: what is shown and compared
    section: str  # the heading it is under ("" before the first)
    stamp: provenance.Stamp | None  # None: a line the user wrote


def split_lines(text: str) -> list[str]:
    """The lines of a file as tars reads and writes them: split at \\n only (so a U+2028 or a
    form feed inside a line of the user's stays where it is), without a \\r at the end."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def join_lines(lines: list[str], like: str) -> str:
    """Lines back into a file, with the line ending of ``like`` (the text they came from)."""
    newline = "\r\n" if "\r\n" in like else "\n"
    return newline.join(lines) + newline if lines else ""


def memory_lines(text: str) -> list[MemoryLine]:
    """Every line holding a fact or rule: not headings, blank lines, code fences, front
    matter, rules or comment-only lines."""
    lines = split_lines(text)
    start = 0
    if lines and lines[0].rstrip() == "---":
        start = next((i + 1 for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), 0)
    found, section, fenced = [], "", False
    for index in range(start, len(lines)):
        line = lines[index]
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced or not stripped:
            continue
        if heading := HEADING.match(line):
            section = heading.group(2)
            continue
        parsed = _parse_line(line)
        if parsed is not None:
            found.append(MemoryLine(index, line, parsed[0], section, parsed[1]))
    return found


@lru_cache(maxsize=65536)
def _parse_line(line: str) -> tuple[str, provenance.Stamp | None] | None:
    """(the text shown, the stamp) of a line that holds a fact; None for a rule or a comment.
    Cached: a remember re-reads a file whose lines are almost all the same as last time."""
    stripped = line.strip()
    if RULE.match(line) or (stripped.startswith("<!--") and stripped.endswith("-->")):
        return None
    body, stamp = provenance.split(line)
    shown = LIST_PREFIX.sub("", body).strip()
    return (shown, stamp) if facts.key(shown) else None


def clip_long_lines(text: str, limit: int = facts.LONG_LINE_CHARS) -> str:
    """The text with each line longer than ``limit`` cut there and marked (a pasted 5 MB line
    must not go into every prompt)."""
    if len(text) <= limit:
        return text
    lines = text.split("\n")
    return "\n".join(line if len(line) <= limit else f"{line[:limit]} … [cut: {len(line):,} characters]" for line in lines)


def insert_under(text: str, section: str, line: str) -> str:
    """Add ``line`` at the end of the named section (any heading level), creating the
    section at the end of the file if there is none."""
    lines = split_lines(text)
    if not section:  # the lines before the first heading (a line of the user's put back)
        first = next((i for i, current in enumerate(lines) if HEADING.match(current)), len(lines))
        last = first
        while last > 0 and not lines[last - 1].strip():
            last -= 1
        lines.insert(last, line)
        return join_lines(lines, text)
    wanted = section.lower()
    start = next((i for i, current in enumerate(lines) if (m := HEADING.match(current)) and m.group(2).lower() == wanted), None)
    if start is None:
        while lines and not lines[-1].strip():
            lines.pop()
        return join_lines([*lines, *([""] if lines else []), f"# {section}", line], text)
    level = len(HEADING.match(lines[start]).group(1))
    end = len(lines)
    for i in range(start + 1, len(lines)):
        match = HEADING.match(lines[i])
        if match and len(match.group(1)) <= level:
            end = i
            break
    last = end
    while last > start + 1 and not lines[last - 1].strip():
        last -= 1
    lines.insert(last, line)
    return join_lines(lines, text)


def locate(text: str, line: MemoryLine | None, wanted_key: str) -> int | None:
    """Where a line is now: the same text at the same place, else the same text anywhere,
    else the first line that reads the same (bullet and stamp aside)."""
    lines = split_lines(text)
    if line is not None:
        if line.index < len(lines) and lines[line.index] == line.raw:
            return line.index
        if line.raw in lines:
            return lines.index(line.raw)
    return next((m.index for m in memory_lines(text) if facts.key(m.text) == wanted_key), None)


def swap_line(text: str, index: int, new: str | None) -> str:
    lines = split_lines(text)
    if new is None:
        del lines[index]
    else:
        lines[index] = new
    return join_lines(lines, text)


def drop_emptied_heading(lines: list[str], index: int) -> None:
    """After the line at ``index`` was removed: remove the heading above it if the section now
    holds nothing at all (no line, no subsection) and the heading has the shape tars gives the
    headings it creates ("# Name", tarsd/memory/files.py insert_under), with the blank lines that
    insert_under put before it."""
    start = index - 1
    while start >= 0 and not lines[start].strip():
        start -= 1
    heading = HEADING.match(lines[start]) if start >= 0 else None
    if heading is None or lines[start] != f"# {heading.group(2)}":
        return
    end = index
    while end < len(lines) and not lines[end].strip():
        end += 1
    if end < len(lines) and not HEADING.match(lines[end]):
        return  # user text after a blank line: the section is not empty
    if end < len(lines) and len(HEADING.match(lines[end]).group(1)) > 1:
        return  # a subsection of it follows
    del lines[start:end]
    if start == len(lines):  # it was the last section: no blank lines left dangling at the end
        while lines and not lines[-1].strip():
            lines.pop()


def remove_line(text: str, wanted_key: str) -> str | None:
    """The text without the first line that reads as ``wanted_key``; None if there is none."""
    index = locate(text, None, wanted_key)
    return None if index is None else swap_line(text, index, None)
