"""Markdown-aware chunking with scored break points.

A note is split into chunks no larger than the embedder's token budget. Where to cut is
chosen among markdown break points (headings, rules, code fences, blank lines, list items)
in a window before the budget runs out, each scored ``base * (1 - (distance/window)^2)``,
so a heading a little earlier beats a blank line right at the limit. Code fences are never
cut unless a single fence is larger than the budget on its own. Every chunk keeps its exact
1-based start and end line in the file.

Whatever the text, a chunk also holds at most ``MAX_CHARS_PER_TOKEN`` characters per token of
budget, and the work is linear in the note: a line too long for one chunk is tokenized a
bounded span at a time and cut into pieces.
"""

from __future__ import annotations

import bisect
import hashlib
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
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
# Characters per token of budget a chunk may hold. WordPiece reads about 4-6 characters a token
# in prose and notes (99th percentile of chunks: 5.9 on SciFact, 4.9 on the Dendron vault); only
# whitespace-padded listings pass 10 (12.7 at most in Dendron). What the tokenizer counts as next
# to nothing (a word over 100 characters is one [UNK]; whitespace and U+FFFD are no token at all)
# is held by this instead: 2,540 characters for all-MiniLM's 254 tokens.
MAX_CHARS_PER_TOKEN = 10
# A title or heading is cut to this length where it names a section (context line, heading
# path); its line stays whole in the chunk text.
MAX_NAME_CHARS = 300
# Lines are counted this many at a time: one batch for a whole note holds all its encodings at once.
COUNT_BATCH = 1024

# Closing #s are stripped afterwards: "(.*?)[ \t#]*$" takes quadratic time on a long line of "# # # ...".
_HEADING = re.compile(r"(#{1,6})[ \t]+(.*)")
_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+")
_MARKUP_START = frozenset("#`~-*_+0123456789 \t")  # the first characters the four patterns above can match
_FRONT_MATTER_END = ("---", "...")
# With match(text, pos, endpos): everything up to the last whitespace, or the last character
# that is not a letter or digit (punctuation, symbols, emoji), in text[pos:endpos].
_TO_LAST_SPACE = re.compile(r".*\s", re.DOTALL)
_TO_LAST_BOUNDARY = re.compile(r".*[\W_]", re.DOTALL)

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
        """The character offset where each token of ``text`` ends (for cutting long lines; the
        text is at most a few thousand characters). An ``exact_ends`` attribute that is true says
        they are the tokenizer's own, not an even spread."""
        ...


@dataclass(frozen=True, slots=True)
class Chunk:
    seq: int
    start_line: int  # 1-based, inclusive
    end_line: int  # 1-based, inclusive
    heading_path: str  # "Parent > Child", the headings in force where the chunk starts
    text: str  # the note's own lines, exactly
    context: str  # the line put before the text for the embedder (title and headings), or ""
    content_hash: str  # sha256 of embed_text: the embedding cache key
    tokens: int

    @property
    def embed_text(self) -> str:
        """What the embedder sees: the context line, then the text."""
        return embedding_input(self.context, self.text)


def embedding_input(context: str, text: str) -> str:
    """A passage as the embedder sees it. Made from its parts whenever needed, never stored: a
    second copy of every passage's text was a quarter of the index (420 MB at 100,000 notes)."""
    return f"{context}\n\n{text}" if context else text


@dataclass(slots=True)
class ParsedNote:
    title: str  # the front matter's title, else the first "# " heading, else the fallback
    front_title: str = ""  # the front matter's title alone: a name links may use, like an alias
    tags: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)


@dataclass(slots=True)
class _Unit:
    """A line of the note that is not empty, or a piece of a line too long for one chunk."""

    line: int  # 1-based line number
    text: str
    score: int  # break score for starting a chunk at this unit
    headings: tuple[str, ...]  # heading path in force at this unit
    is_heading: bool
    tokens: int = 0
    joins_in_word: bool = False  # a piece that goes on with the previous one inside a word: their counts do not add up


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


def _scalar(value: object) -> str | None:
    """A front matter value as text if it is a scalar. Lists and mappings are not printed: YAML
    aliases nest them ("a billion laughs"), and a few lines would print as gigabytes."""
    if value is None or isinstance(value, (list, tuple, dict, set)):
        return None
    return str(value)


def _string_list(value: object) -> list[str]:
    if isinstance(value, str):
        return [part.strip().lstrip("#") for part in re.split(r"[,\s]+", value) if part.strip().lstrip("#")]
    if isinstance(value, (list, tuple)):
        items = (_scalar(item) for item in value)
        return [item.strip().lstrip("#") for item in items if item is not None and item.strip()]
    item = _scalar(value)
    return [] if item is None else [item]


def _units(lines: list[str], first: int) -> list[_Unit]:
    """A unit for each line that is not empty, with its break score and the headings in force.
    Empty lines have none (a note of line ends costs no memory): they are the gaps in the line
    numbers, and a line after them scores as one after a blank line."""
    units: list[_Unit] = []
    stack: list[tuple[int, str]] = []
    headings: tuple[str, ...] = ()
    fence: str | None = None  # the opening fence marker while inside a code block
    previous_blank = after_fence = False
    for offset, text in enumerate(lines):
        if not text:
            previous_blank = fence is None
            continue
        # Only a line starting with one of these can be markup: plain text skips the patterns.
        fence_match = _FENCE.match(text) if text[0] in _MARKUP_START else None
        if fence is not None:
            marker = fence_match.group(1) if fence_match else ""
            if marker[:1] == fence[0] and len(marker) >= len(fence) and not text.strip()[len(marker) :]:
                fence, after_fence = None, True
            units.append(_Unit(first + offset, text, FORBIDDEN, headings, False))
            previous_blank = False
            continue
        score, is_heading = 0, False
        if text[0] not in _MARKUP_START:
            pass
        elif fence_match:
            fence, score = fence_match.group(1), FENCE_SCORE
        elif heading := _HEADING.match(text):
            level = len(heading.group(1))
            score, is_heading = HEADING_SCORES[level], True
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, heading.group(2).rstrip(" \t#").strip()[:MAX_NAME_CHARS]))
            headings = tuple(name for _, name in stack)
        elif _RULE.match(text):
            score = RULE_SCORE
        elif _LIST_ITEM.match(text):
            score = LIST_SCORE
        score = max(score, FENCE_SCORE if after_fence else BLANK_SCORE if previous_blank else 0)
        after_fence, previous_blank = False, not text.strip()
        units.append(_Unit(first + offset, text, score, headings, is_heading))
    return units


def _break(text: str, start: int, end: int) -> int:
    """Where to end a piece text[start:end] of a longer line: after the last whitespace in its
    second half, else after the last punctuation there, else at ``end`` (any character: Python
    strings hold whole code points, so a surrogate pair is never split)."""
    middle = start + (end - start) // 2
    found = _TO_LAST_SPACE.match(text, middle, end) or _TO_LAST_BOUNDARY.match(text, middle, end)
    return found.end() if found else end


def _split_line(unit: _Unit, counter: TokenCounter, max_tokens: int, max_chars: int) -> list[_Unit]:
    """Cut a line too long for one chunk into pieces of at most ``max_tokens`` tokens and
    ``max_chars`` characters; joined with no separator they give back the line.

    The line is tokenized a span of at most ``max_chars`` characters at a time, so memory stays
    bounded and the work linear, and pieces are cut at the span's token ends. A piece with
    whitespace (or a span's edge) on both sides is counted from those ends; any other piece is
    counted again on its own, and shortened until it fits."""
    text = unit.text
    exact = getattr(counter, "exact_ends", False)
    pieces: list[_Unit] = []
    pos = span_start = span_end = 0
    ends: Sequence[int] = ()
    while pos < len(text):
        if pos >= span_end:
            span_start = pos
            span_end = len(text) if len(text) - pos <= max_chars else _break(text, pos, pos + max_chars)
            ends = counter.token_ends(text[span_start:span_end])
        first = bisect.bisect_right(ends, pos - span_start)  # the first token ending after pos
        cut = span_end if len(ends) - first <= max_tokens else _break(text, pos, span_start + ends[first + max_tokens - 1])
        if exact and (pos == span_start or text[pos - 1].isspace()) and (cut == span_end or text[cut - 1].isspace()):
            tokens = bisect.bisect_right(ends, cut - span_start) - first
        else:
            tokens = counter.count([text[pos:cut]])[0]
            while tokens > max_tokens:
                cut = _break(text, pos, pos + max(1, (cut - pos) * max_tokens // (tokens + 1)))
                tokens = counter.count([text[pos:cut]])[0]
        in_word = pos > 0 and not text[pos - 1].isspace()
        pieces.append(_Unit(unit.line, text[pos:cut], SPLIT_LINE_SCORE, unit.headings, False, tokens, joins_in_word=in_word))
        pos = cut
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


def _first_title(units: list[_Unit]) -> str:
    return next((u.headings[0] for u in units if u.is_heading and u.text.startswith("# ")), "")


@dataclass(frozen=True, slots=True)
class Outline:
    """A note's title and headings as the chunker sees them (so line numbers and heading
    paths agree with search hits): front matter and code blocks hold no heading."""

    title: str  # front matter title, else the first "# " heading, else ""
    headings: list[tuple[int, tuple[str, ...]]]  # (1-based line, heading path) of each heading


def outline(lines: list[str]) -> Outline:
    """The outline of a note's lines (split as chunk_note splits them: BOM removed, splitlines)."""
    front, body_start = parse_front_matter(lines)
    units = _units(lines[body_start:], body_start + 1)
    title = (_scalar(front.get("title")) or "").strip()[:MAX_NAME_CHARS] or _first_title(units)
    return Outline(title, [(u.line, u.headings) for u in units if u.is_heading])


def note_lines(text: str) -> list[str]:
    """A note's lines as the chunker numbers them: a byte-order mark is not text, and
    splitlines() also drops CRLF's "\r"."""
    return text.removeprefix("\ufeff").splitlines()


def chunk_note(text: str, counter: TokenCounter, budget: int, overlap: float = 0.10, fallback_title: str = "") -> ParsedNote:
    """Split a note into chunks of at most ``budget`` tokens (context line included)."""
    # A byte-order mark is how the file was encoded, not text: left in, it hides the front
    # matter's opening "---" or a first "# " heading.
    lines = note_lines(text)
    front, body_start = parse_front_matter(lines)
    title = (_scalar(front.get("title")) or "").strip()[:MAX_NAME_CHARS]
    note = ParsedNote(title="", tags=_string_list(front.get("tags")), aliases=_string_list(front.get("aliases") or front.get("alias")))
    note.front_title = title
    limit = max(8, budget)
    char_limit = limit * MAX_CHARS_PER_TOKEN
    piece_limit = int(limit * (1 - MAX_CONTEXT_FRACTION))
    piece_chars = int(char_limit * (1 - MAX_CONTEXT_FRACTION))
    units = _units(lines[body_start:], body_start + 1)
    title = title or _first_title(units) or fallback_title
    note.title = title

    # A line of more than 3 characters a piece's tokens probably needs cutting (prose runs at
    # 4-6): it goes straight to the splitter, which counts it a span at a time while cutting,
    # instead of being counted whole first. The rest are counted in batches.
    long_line = min(piece_chars, 3 * piece_limit)
    short = list(dict.fromkeys(u.text for u in units if len(u.text) <= long_line))  # each distinct line once
    counts: dict[str, int] = {}
    for index in range(0, len(short), COUNT_BATCH):
        batch = short[index : index + COUNT_BATCH]
        counts.update(zip(batch, counter.count(batch), strict=True))
    for unit in units:
        unit.tokens = counts.get(unit.text, 0)
    expanded: list[_Unit] = []
    for unit in units:
        if len(unit.text) > long_line or unit.tokens > piece_limit:
            expanded.extend(_split_line(unit, counter, piece_limit, piece_chars))
        else:
            expanded.append(unit)
    units = expanded

    context_cache: dict[str, int] = {}

    def context_for(unit: _Unit) -> tuple[str, int]:
        context = _context(title, unit)
        if context not in context_cache:
            context_cache[context] = counter.count([context])[0] + 1 if context else 0
        tokens = context_cache[context]
        fits = tokens <= limit * MAX_CONTEXT_FRACTION and len(context) + 2 <= char_limit * MAX_CONTEXT_FRACTION
        return (context, tokens) if fits else ("", 0)

    start = 0
    while start < len(units):
        # Skip blank lines at chunk starts: they carry nothing and shift the start line.
        while start < len(units) and not units[start].text.strip():
            start += 1
        if start >= len(units):
            break
        context, context_tokens = context_for(units[start])
        target = limit - context_tokens
        char_target = char_limit - (len(context) + 2 if context else 0)
        total = chars = 0
        end = start
        while end < len(units):
            unit = units[end]
            grown = chars + len(unit.text) + (unit.line - units[end - 1].line if end > start else 0)  # its text and line ends
            if total + unit.tokens > target or grown > char_target:
                break
            total, chars, end = total + unit.tokens, grown, end + 1
        cut = len(units) if end == len(units) else _choose_cut(units, start, end, target)
        _emit(note, units[start:cut], context, context_tokens, counter, limit)
        if cut >= len(units):
            break
        next_start = cut
        if overlap > 0 and units[cut].score < CLEAN_BREAK_SCORE:
            want = overlap * sum(u.tokens for u in units[start:cut])
            # Held in characters too: lines of no tokens (blank, U+FFFD) would otherwise all be
            # carried, and a chunk would start again one line after the last one.
            want_chars = want * MAX_CHARS_PER_TOKEN
            carried = carried_chars = 0
            while next_start - 1 > start:
                previous, following = units[next_start - 1], units[next_start]
                grown = carried_chars + len(previous.text) + following.line - previous.line
                if carried + previous.tokens > want or grown > want_chars:
                    break
                next_start -= 1
                carried, carried_chars = carried + previous.tokens, grown
        start = next_start
    return note


def _emit(note: ParsedNote, units: list[_Unit], context: str, context_tokens: int, counter: TokenCounter, limit: int) -> None:
    while units and not units[-1].text.strip():
        units = units[:-1]
    if not units:
        return
    # One line end per line number passed: none between pieces of one line, and the empty lines
    # between units are put back, so the text stays the note's own.
    parts = [units[0].text]
    for previous, unit in pairwise(units):
        parts += ("\n" * (unit.line - previous.line), unit.text)
    text = "".join(parts)
    embedded = embedding_input(context, text)
    if getattr(counter, "additive", False) and not any(u.joins_in_word for u in units[1:]):
        tokens = context_tokens + sum(u.tokens for u in units)
    else:
        tokens = counter.count([embedded])[0]
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
            context=context,
            content_hash=hashlib.sha256(embedded.encode("utf-8")).hexdigest(),
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

    fingerprint = "heuristic-v4"
    additive = True
    _PUNCTUATION = string.punctuation.encode()
    _LONG_WORD = re.compile(rb"\S{7,}")

    def count(self, texts: list[str]) -> list[int]:
        counts = []
        for text in texts:
            data = text.encode("utf-8", "surrogatepass")
            words = len(data.split())
            punctuation = len(data) - len(data.translate(None, self._PUNCTUATION))
            # Rounded up, so the counts of lines add up to no less than the count of their join.
            non_ascii = -(-(len(data) - len(text)) // 2)
            long_words = -(-sum(map(len, self._LONG_WORD.findall(data))) // 3)
            counts.append(words + punctuation + non_ascii + long_words)
        return counts

    def token_ends(self, text: str) -> Sequence[int]:
        # Spread evenly over the text (the splitter counts every piece it cuts again), and
        # computed when asked: the splitter only bisects into it.
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
