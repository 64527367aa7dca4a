"""A note's lines as units of their own.

Session logs hold one turn (or one point of a summary) per line, and a passage of five or six
of them gives a vector that is about none in particular: on LoCoMo's conversations a passage's
vector found every evidence turn of a question in 0.44 of them, a line's own vector (with the
passage's as a prior) in 0.60 (bench/episodic_recall.py). So each line of such a note is also
embedded on its own (tarsd/store/line_units.py keeps them), and recall (tarsd/search/recall.py)
ranks lines, not passages, in these notes.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from tarsd.markdown.chunker import MAX_CHARS_PER_TOKEN, TokenCounter, parse_front_matter

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]")
_LIST_MARK = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?")
_WORD = re.compile(r"\w")
# Lines counted at a time (a session log of 1,000 turns is counted in one go).
COUNT_BATCH = 1024


@dataclass(frozen=True, slots=True)
class LineUnit:
    line: int  # 1-based line of the note
    text: str  # what the embedder sees: the line without its list mark, cut to the token budget
    content_hash: str  # sha256 of text: the embedding cache key, shared with passages


def line_units(lines: list[str], counter: TokenCounter, budget: int) -> list[LineUnit]:
    """A unit for each line of the note's body that says something: not blank, not a heading,
    a fence or a line inside a code block, not front matter, holding a letter or a digit.
    ``lines`` as chunker.note_lines splits them."""
    _, body_start = parse_front_matter(lines)
    found: list[tuple[int, str]] = []
    fence = ""
    for number, line in enumerate(lines[body_start:], body_start + 1):
        marker = _FENCE.match(line)
        if fence:
            if (
                marker
                and marker.group(1)[0] == fence[0]
                and len(marker.group(1)) >= len(fence)
                and not line.strip()[len(marker.group(1)) :]
            ):
                fence = ""
            continue
        if marker:
            fence = marker.group(1)
            continue
        if _HEADING.match(line):
            continue
        # Cut before counting: a line of a megabyte is never tokenized whole.
        text = _LIST_MARK.sub("", line, count=1).strip()[: budget * MAX_CHARS_PER_TOKEN]
        if _WORD.search(text):
            found.append((number, text))
    units = []
    for start in range(0, len(found), COUNT_BATCH):
        batch = found[start : start + COUNT_BATCH]
        for (number, text), tokens in zip(batch, counter.count([text for _, text in batch]), strict=True):
            if tokens > budget:
                text = _cut(text, counter, budget)
            units.append(LineUnit(number, text, hashlib.sha256(text.encode("utf-8")).hexdigest()))
    return units


def _cut(text: str, counter: TokenCounter, budget: int) -> str:
    """The start of ``text`` that fits ``budget`` tokens (a line is a turn: its opening says what it is about)."""
    ends = counter.token_ends(text)
    cut = text[: ends[budget - 1]] if len(ends) >= budget else text
    while cut and counter.count([cut])[0] > budget:  # an estimate's even spread may overshoot
        cut = cut[: len(cut) * budget // (budget + 8)]
    return cut
