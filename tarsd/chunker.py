"""Markdown-aware chunking with scored break points.

A note is split into chunks no larger than the embedder's token budget. Where to cut is
chosen among markdown break points (headings, rules, code fences, blank lines, list items)
in a window before the budget runs out, each scored ``base * (1 - (distance/window)^2)``,
so a heading a little earlier beats a blank line right at the limit. Code fences are never
cut unless a single fence is larger than the budget on its own. Every chunk keeps its exact
1-based start and end line in the file.
"""

from __future__ import annotations

import bisect
import hashlib
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import yaml

# Base scores for breaking *before* a line (../shared/reference/tars-design.md).
HEADING_SCORES = {1: 100, 2: 90, 3: 80, 4: 70, 5: 60, 6: 50}
RULE_SCORE = 70
FENCE_SCORE = 80
BLANK_SCORE = 10
LIST_SCORE = 5
SPLIT_LINE_SCORE = 1  # between pieces of one overlong line: allowed, but the last resort
FORBIDDEN = -1  # inside a code fence

# Breaks are looked for in this fraction of the target before the cut-off.
WINDOW_FRACTION = 0.35
# No overlap after a break this strong: a new section starts cleanly.
CLEAN_BREAK_SCORE = 50
# Context (title and parent headings) larger than this share of the budget is left out.
MAX_CONTEXT_FRACTION = 0.25

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$")
_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+")
_FRONT_MATTER_END = ("---", "...")

if hasattr(yaml, "CSafeLoader"):
    _YamlLoader = yaml.CSafeLoader
else:  # pragma: no cover - PyYAML built without libyaml
    _YamlLoader = yaml.SafeLoader


class TokenCounter(Protocol):
    """Counts tokens the way the embedder will; chunks are sized with it."""

    fingerprint: str
    # True when the count of texts joined by whitespace is the sum of their counts; the
    # chunker then adds up line counts instead of counting each chunk again.
    additive: bool

    def count(self, texts: list[str]) -> list[int]: ...

    def token_ends(self, text: str) -> Sequence[int]:
        """The character offset where each token of ``text`` ends (for cutting long lines);
        ``exact_ends`` says whether they are the tokenizer's own or an even spread."""
        ...


@dataclass(frozen=True, slots=True)
class Chunk:
    seq: int
    start_line: int  # 1-based, inclusive
    end_line: int  # 1-based, inclusive
    heading_path: str  # "Parent > Child", the headings in force where the chunk starts
    text: str  # the note's own lines, exactly
    embed_text: str  # what the embedder sees: context line + text
    content_hash: str  # sha256 of embed_text: the embedding cache key
    tokens: int


@dataclass(slots=True)
class ParsedNote:
    title: str
    tags: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)


@dataclass(slots=True)
class _Unit:
    """A line of the note, or a piece of a line too long for one chunk."""

    line: int  # 1-based line number
    text: str
    tokens: int
    score: int  # break score for starting a chunk at this unit
    headings: tuple[str, ...]  # heading path in force at this unit
    is_heading: bool
    cut_in_word: bool = False  # a piece of a giant word: counts no longer add up


def parse_front_matter(lines: list[str]) -> tuple[dict, int]:
    """Return the front matter mapping and the number of lines it occupies (0 if none)."""
    if not lines or lines[0].rstrip() != "---":
        return {}, 0
    for index in range(1, len(lines)):
        if lines[index].rstrip() in _FRONT_MATTER_END:
            try:
                data = yaml.load("\n".join(lines[1:index]), Loader=_YamlLoader)
            except yaml.YAMLError:
                data = None
            # Invalid YAML is still front matter by shape: it is skipped, not embedded.
            return (data if isinstance(data, dict) else {}), index + 1
    return {}, 0


def _string_list(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip().lstrip("#") for part in re.split(r"[,\s]+", value) if part.strip().lstrip("#")]
    if isinstance(value, (list, tuple)):
        return [str(item).strip().lstrip("#") for item in value if item is not None and str(item).strip()]
    return [str(value)]


def _units(lines: list[str], first: int, counts: list[int]) -> list[_Unit]:
    units: list[_Unit] = []
    stack: list[tuple[int, str]] = []
    fence: str | None = None  # the opening fence marker while inside a code block
    previous_blank = after_fence = False
    for offset, text in enumerate(lines):
        fence_match = _FENCE.match(text)
        if fence is not None:
            marker = fence_match.group(1) if fence_match else ""
            if marker[:1] == fence[0] and len(marker) >= len(fence) and not text.strip()[len(marker) :]:
                fence, after_fence = None, True
            units.append(_Unit(first + offset, text, counts[offset], FORBIDDEN, tuple(h for _, h in stack), False))
            previous_blank = False
            continue
        score, is_heading = 0, False
        if fence_match:
            fence, score = fence_match.group(1), FENCE_SCORE
        elif heading := _HEADING.match(text):
            level = len(heading.group(1))
            score, is_heading = HEADING_SCORES[level], True
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, heading.group(2).strip()))
        elif _RULE.match(text):
            score = RULE_SCORE
        elif _LIST_ITEM.match(text):
            score = LIST_SCORE
        score = max(score, FENCE_SCORE if after_fence else BLANK_SCORE if previous_blank else 0)
        after_fence, previous_blank = False, not text.strip()
        units.append(_Unit(first + offset, text, counts[offset], score, tuple(h for _, h in stack), is_heading))
    return units


def _split_long_unit(unit: _Unit, limit: int, counter: TokenCounter, ends: Sequence[int]) -> list[_Unit]:
    """Split one overlong line into pieces of at most ``limit`` tokens, cutting after a
    space where there is one (else inside a giant word). Joined with no separator, the
    pieces give back the line. ``ends`` (from one tokenization of the line) aims each cut;
    each piece is then counted on its own, so the work stays linear in the line."""
    text = unit.text
    pieces: list[_Unit] = []
    start_char, start_token = 0, 0
    while start_char < len(text):
        end_token = start_token + limit
        cut = len(text) if end_token >= len(ends) else max(ends[end_token - 1], start_char + 1)
        while True:
            space = text.rfind(" ", start_char, cut) if cut < len(text) else -1
            piece_end = space + 1 if space > start_char else cut
            if getattr(counter, "exact_ends", False):
                tokens = bisect.bisect_right(ends, piece_end) - start_token
            else:
                tokens = counter.count([text[start_char:piece_end]])[0]
            if tokens <= limit or piece_end - start_char <= 1:
                break
            cut = start_char + max(1, (piece_end - start_char) * limit // (tokens + 1))
        in_word = piece_end < len(text) and space <= start_char
        pieces.append(_Unit(unit.line, text[start_char:piece_end], tokens, SPLIT_LINE_SCORE, unit.headings, False, cut_in_word=in_word))
        start_char = piece_end
        start_token = bisect.bisect_right(ends, start_char)
    pieces[0].score = unit.score
    pieces[0].is_heading = unit.is_heading
    return pieces


def _choose_cut(units: list[_Unit], start: int, end: int, target: int) -> int:
    """Pick c in (start, end] so the chunk is units[start:c]."""
    window = max(1.0, target * WINDOW_FRACTION)
    best, best_score = -1, 0.0
    distance = 0
    for cut in range(end, start, -1):
        if cut < end:
            distance += units[cut].tokens
        if distance > window:
            break
        base = units[cut].score if cut < len(units) else 0
        if base <= 0:
            continue
        final = base * (1 - (distance / window) ** 2)
        if final > best_score:
            best, best_score = cut, final
    if best > 0:
        return best
    # Nothing in the window: take the latest allowed break, even far back; only a fence
    # larger than the budget is ever cut inside.
    for cut in range(end, start, -1):
        if cut < len(units) and units[cut].score > 0:
            return cut
    return end


def _context(title: str, unit: _Unit) -> str:
    headings = list(unit.headings[:-1] if unit.is_heading else unit.headings)
    if title and (not headings or headings[0] != title) and not (unit.is_heading and unit.headings and unit.headings[-1] == title):
        headings.insert(0, title)
    return " > ".join(headings)


def chunk_note(text: str, counter: TokenCounter, budget: int, overlap: float = 0.10, fallback_title: str = "") -> ParsedNote:
    """Split a note into chunks of at most ``budget`` tokens (context line included)."""
    # A byte-order mark is how the file was encoded, not text: left in, it hides the front
    # matter's opening "---" or a first "# " heading. splitlines() also drops CRLF's "\r".
    lines = text.removeprefix("\ufeff").splitlines()
    front, body_start = parse_front_matter(lines)
    title = str(front.get("title") or "").strip()
    note = ParsedNote(title="", tags=_string_list(front.get("tags")), aliases=_string_list(front.get("aliases") or front.get("alias")))
    body = lines[body_start:]
    limit = max(8, budget)
    piece_limit = int(limit * (1 - MAX_CONTEXT_FRACTION))
    # Lines too long to fit are tokenized once, with offsets, for cutting; the rest are
    # only counted. A line's length in characters tells which it probably is.
    token_ends: dict[int, Sequence[int]] = {i: counter.token_ends(line) for i, line in enumerate(body) if len(line) > piece_limit * 3}
    short = [i for i in range(len(body)) if i not in token_ends]
    counts = [0] * len(body)
    for i, count in zip(short, counter.count([body[i] for i in short]), strict=True):
        counts[i] = count
    for i, ends in token_ends.items():
        counts[i] = len(ends)
    units = _units(body, body_start + 1, counts)
    if not title:
        title = next((u.headings[0] for u in units if u.is_heading and u.text.startswith("# ")), "") or fallback_title
    note.title = title

    context_cache: dict[str, int] = {}

    def context_for(unit: _Unit) -> tuple[str, int]:
        context = _context(title, unit)
        if context not in context_cache:
            context_cache[context] = counter.count([context])[0] + 1 if context else 0
        tokens = context_cache[context]
        return (context, tokens) if tokens <= limit * MAX_CONTEXT_FRACTION else ("", 0)

    expanded: list[_Unit] = []
    for index, unit in enumerate(units):
        if unit.tokens > piece_limit:
            ends = token_ends.get(index) or counter.token_ends(unit.text)
            expanded.extend(_split_long_unit(unit, piece_limit, counter, ends))
        else:
            expanded.append(unit)
    units = expanded

    start = 0
    while start < len(units):
        # Skip blank lines at chunk starts: they carry nothing and shift the start line.
        while start < len(units) and not units[start].text.strip():
            start += 1
        if start >= len(units):
            break
        context, context_tokens = context_for(units[start])
        target = limit - context_tokens
        total, end = 0, start
        while end < len(units) and total + units[end].tokens <= target:
            total += units[end].tokens
            end += 1
        cut = len(units) if end == len(units) else _choose_cut(units, start, end, target)
        _emit(note, units[start:cut], context, context_tokens, counter, limit)
        if cut >= len(units):
            break
        next_start = cut
        if overlap > 0 and units[cut].score < CLEAN_BREAK_SCORE:
            want = overlap * sum(u.tokens for u in units[start:cut])
            carried = 0
            while next_start - 1 > start and carried + units[next_start - 1].tokens <= want:
                next_start -= 1
                carried += units[next_start].tokens
        start = next_start
    return note


def _emit(note: ParsedNote, units: list[_Unit], context: str, context_tokens: int, counter: TokenCounter, limit: int) -> None:
    while units and not units[-1].text.strip():
        units = units[:-1]
    if not units:
        return
    parts: list[str] = []
    for index, unit in enumerate(units):
        # Pieces of one split line join without a newline, so the text stays the note's own.
        if index and unit.line == units[index - 1].line:
            parts[-1] += unit.text
        else:
            parts.append(unit.text)
    text = "\n".join(parts)
    embed_text = f"{context}\n\n{text}" if context else text
    if getattr(counter, "additive", False) and not any(u.cut_in_word for u in units):
        tokens = context_tokens + sum(u.tokens for u in units)
    else:
        tokens = counter.count([embed_text])[0]
    if tokens > limit:
        # Line counts add up to the count of their join for WordPiece, but not for every
        # tokenizer (or for pieces of one giant word): halve rather than ever truncate.
        if len(units) == 1:
            raise ValueError(f"a piece of line {units[0].line} has {tokens} tokens, over the budget of {limit}")
        middle = len(units) // 2
        _emit(note, units[:middle], context, context_tokens, counter, limit)
        _emit(note, units[middle:], context, context_tokens, counter, limit)
        return
    note.chunks.append(
        Chunk(
            seq=len(note.chunks),
            start_line=units[0].line,
            end_line=units[-1].line,
            heading_path=" > ".join(units[0].headings),
            text=text,
            embed_text=embed_text,
            content_hash=hashlib.sha256(embed_text.encode("utf-8")).hexdigest(),
            tokens=tokens,
        )
    )


class HeuristicCounter:
    """Token estimate for embedders whose tokenizer tars cannot read (Ollama, none).

    Built from C-speed string operations so a keyword-only index stays fast: a word counts
    one token plus one per three characters past six, punctuation one each, and non-ASCII
    text (CJK, emoji) about one per character. It errs high against WordPiece (about 20%
    at the median on the Dendron and SciFact texts); it is an estimate, so Ollama is also
    told never to truncate (truncate=false), and a failure is reported, not hidden."""

    fingerprint = "heuristic-v2"
    additive = True
    _DROP_PUNCTUATION = str.maketrans("", "", string.punctuation)

    def count(self, texts: list[str]) -> list[int]:
        counts = []
        for text in texts:
            words = text.split()
            punctuation = len(text) - len(text.translate(self._DROP_PUNCTUATION))
            non_ascii = (len(text.encode("utf-8", "surrogatepass")) - len(text)) // 2
            counts.append(len(words) + punctuation + non_ascii + sum(n // 3 for n in map(len, words) if n > 6))
        return counts

    def token_ends(self, text: str) -> Sequence[int]:
        # Spread evenly over the text (the splitter recounts every piece it cuts), computed
        # on demand: a list would cost more than the estimate itself.
        return _EvenEnds(len(text), self.count([text])[0])


class _EvenEnds(Sequence):
    """Token end offsets spread evenly: ``length * (i + 1) // total`` for token i."""

    def __init__(self, length: int, total: int):
        self.length, self.total = length, total

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.total))]
        if index < 0:
            index += self.total
        if not 0 <= index < self.total:
            raise IndexError(index)
        return self.length * (index + 1) // self.total
