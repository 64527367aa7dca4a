"""Recall: what of the vault goes in front of the model for a message, within a budget of characters.

Search finds notes (one passage per note, for a person to open). The model needs something
else: the lines that answer, from however many notes hold them, dated, in as few characters as
it takes. Recall spends a budget of characters (the chat's 4,400 by default) this way:

1. The passages of the mode's search, every passage a candidate (not one per note), each with
   the mode's value (searcher.py: fts's keyword value, vec's cosine, hybrid's fused value).
2. The items that can go in:
   - in a note recalled by its lines (a session log: one turn a line, markdown/line_units.py),
     each line of the best passages, and each line whose own vector is among the nearest to the
     query's (store/line_units.py). A line's value is its own (its words' BM25 against the best
     line's, and its own vector's cosine, weighed as hybrid weighs a passage's), lifted by its
     passage's value and its note's best: (line + LINE_PASSAGE * passage + LINE_NOTE * note) /
     (1 + LINE_PASSAGE + LINE_NOTE). A turn is about something said around it, and a note that
     answers the question well holds more of the answer;
   - in any other note, each passage whole (a note's section is read as one), valued the same
     way from its own value.
3. The items in order of value fill the budget: each that fits in what is left goes in (lines
   already in cost nothing), the first NEIGHBOUR_TOP lines with the line before and after them
   (a reply means little without what it answers). More than one passage of a note goes in when
   they are the ones that fit.
4. Each note's recalled lines come with its path, its date (a session log's start, a daily note's
   day; else when it last changed) and the line ranges, newest note first: what was said last is
   read first, and a fact that changed is seen with its dates.

On LoCoMo's conversations (bench/episodic_recall.py) this put every evidence turn of a question
in the budget for 0.6-0.8 of them where five whole passages held 0.64-0.66; docs/search.md#recall
has the figures per category and split.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from tarsd.search.searcher import (
    CANDIDATE_DEPTH,
    LONG_KEYWORD_WEIGHT,
    MODES,
    Candidate,
    Searcher,
    SearchError,
    is_long,
    keyword_weight,
    query_parts,
)
from tarsd.store.database import NO_FILTER, Filter, NoteLines

# Characters of recalled text (lines and the marks between their ranges) the chat spends on its
# opening context: what the five passages it sent before used (issue 44).
BUDGET_CHARS = 4_400
# A line's value is lifted by its passage's and its note's (tuned on LoCoMo's dev conversations:
# 0.5 and 0.2 put every evidence turn in the budget for 0.80 of the questions, against 0.69 for
# the line alone; the held-out conversations moved the same way).
LINE_PASSAGE = 0.5
LINE_NOTE = 0.2
# Passages whose lines are candidates, best first, and lines found by their own vectors.
LINE_PASSAGES = 40
LINE_NEAREST = 100
# Items worth less than this share of the best item's value are not recalled, however much room is left.
FLOOR_SHARE = 0.0
# The best this many lines go in with the line before and after them.
NEIGHBOUR_TOP = 3
# BM25 of a line's words (k1 and b as FTS5's).
BM25_K1, BM25_B = 1.2, 0.75
GAP = "…"  # between two ranges of one note's recalled lines
# What a note's header costs besides its path: its date and line ranges, as the model reads them.
HEADER_CHARS = 32


@dataclass(slots=True)
class Piece:
    """One note's recalled lines."""

    path: str
    title: str
    memory_type: str
    when: float  # the note's date, or when it last changed (see dated)
    dated: bool  # the note says when it took place (a session log, a daily note)
    value: float  # the best of its items' values
    lines: dict[int, str] = field(default_factory=dict)  # line -> text
    blank: frozenset[int] = frozenset()  # the note's blank lines among those read: no gap between two ranges they part

    @property
    def date(self) -> str:
        """The note's date as the model reads it: with the time when the note gives one."""
        moment = datetime.fromtimestamp(self.when).astimezone()
        return moment.strftime("%Y-%m-%d %H:%M" if self.dated and (moment.hour or moment.minute) else "%Y-%m-%d")

    @property
    def ranges(self) -> list[tuple[int, int]]:
        """The recalled lines as (first, last) ranges of lines next to each other (blank lines between count as next)."""
        found: list[tuple[int, int]] = []
        for line in sorted(self.lines):
            if found and all(n in self.blank for n in range(found[-1][1] + 1, line)):
                found[-1] = (found[-1][0], line)
            else:
                found.append((line, line))
        return found

    def text(self) -> str:
        """The recalled lines in file order, GAP between ranges."""
        parts = []
        for first, last in self.ranges:
            if parts:
                parts.append(GAP)
            parts.extend(self.lines[n] for n in range(first, last + 1) if n in self.lines)
        return "\n".join(parts)

    def line_ranges(self) -> str:
        return ",".join(f"{a}-{b}" if b > a else f"{a}" for a, b in self.ranges)


@dataclass(slots=True)
class Recalled:
    query: str
    mode: str  # the mode used (hybrid falls back to fts without vectors)
    budget: int
    pieces: list[Piece] = field(default_factory=list)  # newest note first
    chars: int = 0  # of recalled text spent (what the budget counts)
    warnings: list[str] = field(default_factory=list)

    @property
    def lines(self) -> int:
        return sum(len(p.lines) for p in self.pieces)

    def text(self) -> str:
        """Every piece as plain text: a header line (path, date, lines), then its lines."""
        return "\n\n".join(f"{p.path} ({p.date}, lines {p.line_ranges()})\n{p.text()}" for p in self.pieces)

    def spent(self, tokens: int | None = None) -> str:
        """What recall spent, in words: for the model and for --explain."""
        if not self.pieces:
            return f"nothing recalled (budget {self.budget:,} characters)"
        about = f", about {tokens:,} tokens" if tokens is not None else ""
        notes = f"{len(self.pieces)} note" + ("s" if len(self.pieces) != 1 else "")
        return f"{self.chars:,} of {self.budget:,} characters{about}: {self.lines} lines from {notes}"


@dataclass(slots=True)
class _Item:
    """What may go in: a line of a note recalled by lines, or a passage of another note."""

    file_id: int
    lines: list[int]  # the note's lines it brings (a passage: all of them)
    value: float
    line: int = 0  # a line item's own line (its neighbours may come with it)


def recall(
    searcher: Searcher,
    query: str,
    mode: str = "hybrid",
    budget_chars: int = BUDGET_CHARS,
    where: Filter = NO_FILTER,
    min_score: float = 0.0,
    max_notes: int = 0,
) -> Recalled:
    """The lines of the vault worth showing the model for ``query``, within ``budget_chars`` characters,
    from at most ``max_notes`` notes (0: any number). With a ``min_score``, nothing when the search's
    best hit is below it on the bands' scale, or when none of the query's words is in the vault: a
    message the vault says nothing about gets no context. Otherwise the budget is filled in order of
    value. Raises SearchError as search does (an unknown mode; vec without vectors)."""
    if mode not in MODES:
        raise SearchError(f"unknown search mode {mode!r}: use one of {', '.join(MODES)}")
    if mode == "hybrid" and not searcher.embedder.enabled:
        mode = "fts"
    result = Recalled(query.strip(), mode, budget_chars)
    if not result.query or budget_chars <= 0:
        return result
    lists = {"fts": ("fts",), "vec": ("vec",), "hybrid": ("fts", "vec")}[mode]
    found, vector_error = searcher.candidates(result.query, CANDIDATE_DEPTH, where, per_file=False, lists=lists)
    if vector_error is not None:
        if mode == "vec":
            raise SearchError(f"vector search is unavailable: {vector_error}")
        result.mode = mode = "fts"
        result.warnings.append(f"vector search unavailable, recalling from keywords only: {vector_error}")
    ranked = searcher.rank(found, mode, is_long(result.query))
    if not ranked or ranked[0].score < min_score:  # the first hit shows the highest score (scores never rise down the list)
        return result
    if min_score > 0 and ranked[0].found_share == 0:
        return result  # none of the message's words is in the vault: the nearest notes by meaning are a guess, not context
    store = searcher.store
    owners = store.chunk_notes([c.chunk for c in ranked])
    ranked = [c for c in ranked if c.chunk in owners]
    by_lines = _notes_by_lines(store, {owners[c.chunk][0] for c in ranked})

    # The nearest lines by their own vectors (vec and hybrid), and the lines of the best passages.
    query_vector = searcher.known_query_vector(result.query) if mode != "fts" else None
    nearest: dict[int, float] = {}
    places: dict[int, tuple[int, int]] = {}
    if query_vector is not None:
        nearest = dict(store.line_search(query_vector, LINE_NEAREST, where))
        places = store.line_places(list(nearest))
        by_lines |= {file_id for file_id, _ in places.values()}
    passages = _passage_lines(store, ranked, owners)
    wanted: dict[int, set[int]] = defaultdict(set)
    for c in ranked[:LINE_PASSAGES]:
        wanted[owners[c.chunk][0]].update(passages[c.chunk])
    for file_id, line in places.values():
        wanted[file_id].add(line)
    notes = store.note_lines({f: lines for f, lines in wanted.items()})

    items = _passage_items(ranked, owners, passages, by_lines)  # of the best LINE_PASSAGES: the lines read
    items += _line_items(searcher, result.query, mode, ranked, owners, passages, notes, by_lines, wanted, nearest, places, query_vector)
    items.sort(key=lambda item: (-item.value, item.file_id, item.line))
    _fill(result, items, notes, mode, max_notes)
    return result


def _notes_by_lines(store, file_ids: set[int]) -> set[int]:
    """The notes among ``file_ids`` that have line units (are recalled by their lines)."""
    units = store.line_units_of(file_ids)
    return {file_id for file_id, _ in units}


def _passage_lines(store, ranked: list[Candidate], owners) -> dict[int, list[int]]:
    """Each candidate passage's lines (those with text: blank lines are no unit)."""
    rows = store.chunk_rows([c.chunk for c in ranked])
    out: dict[int, list[int]] = {}
    for c in ranked:
        row = rows.get(c.chunk)
        if row is None:
            out[c.chunk] = []
            continue
        texts = row.text.split("\n")
        if len(texts) != row.end_line - row.start_line + 1:
            out[c.chunk] = []  # a title chunk: not the note's own lines
            continue
        out[c.chunk] = [row.start_line + i for i, text in enumerate(texts) if text.strip()]
    return out


def _context_value(own: float, passage: float, note: float) -> float:
    return (own + LINE_PASSAGE * passage + LINE_NOTE * note) / (1 + LINE_PASSAGE + LINE_NOTE)


def _note_best(ranked: list[Candidate], owners) -> dict[int, float]:
    best: dict[int, float] = {}
    for c in ranked:
        file_id = owners[c.chunk][0]
        best[file_id] = max(best.get(file_id, 0.0), c.fused)
    return best


def _passage_items(ranked: list[Candidate], owners, passages, by_lines: set[int]) -> list[_Item]:
    """Each passage of a note not recalled by lines, whole."""
    note_best = _note_best(ranked, owners)
    items = []
    for c in ranked[:LINE_PASSAGES]:
        file_id = owners[c.chunk][0]
        if file_id in by_lines or not passages[c.chunk]:
            continue
        items.append(_Item(file_id, passages[c.chunk], _context_value(c.fused, c.fused, note_best[file_id])))
    return items


def _line_items(searcher, query, mode, ranked, owners, passages, notes, by_lines, wanted, nearest, places, query_vector) -> list[_Item]:
    """Each candidate line of the notes recalled by lines, valued (see the module's doc)."""
    note_best = _note_best(ranked, owners)
    # Each line's best passage (value and cosine) among the candidates.
    passage_value: dict[tuple[int, int], float] = {}
    passage_cosine: dict[tuple[int, int], float] = {}
    for c in ranked:
        file_id = owners[c.chunk][0]
        if file_id not in by_lines:
            continue
        for line in passages[c.chunk]:
            key = (file_id, line)
            passage_value[key] = max(passage_value.get(key, 0.0), c.fused)
            passage_cosine[key] = max(passage_cosine.get(key, 0.0), c.cosine)
    keys = [(f, line) for f in by_lines for line in sorted(wanted.get(f, ())) if f in notes and notes[f].lines.get(line, "").strip()]
    if not keys:
        return []
    texts = [notes[f].lines[line] for f, line in keys]
    keyword = _line_keywords(searcher.store, query, texts) if mode != "vec" else [0.0] * len(keys)
    cosines = [0.0] * len(keys)
    if mode != "fts":
        units = searcher.store.line_units_of({f for f, _ in keys})
        known = {place: unit for place, unit in units.items()}
        ids = [known[key] for key in keys if key in known]
        measured = dict(nearest)
        missing = [unit for unit in ids if unit not in measured]
        if missing and query_vector is not None:
            measured.update(searcher.store.line_similarities(query_vector, missing))
        for i, key in enumerate(keys):
            unit = known.get(key)
            # A line without a vector yet (still embedding) stands in with its passage's cosine.
            cosines[i] = max(0.0, measured[unit]) if unit is not None and unit in measured else passage_cosine.get(key, 0.0)
    alpha = _keyword_weight(ranked, query)
    items = []
    for i, (file_id, line) in enumerate(keys):
        own = keyword[i] if mode == "fts" else cosines[i] if mode == "vec" else alpha * keyword[i] + (1 - alpha) * cosines[i]
        value = _context_value(own, passage_value.get((file_id, line), 0.0), note_best.get(file_id, 0.0))
        items.append(_Item(file_id, [line], value, line))
    return items


def _keyword_weight(ranked: list[Candidate], query: str) -> float:
    """hybrid's keyword weight for this query, as searcher.fuse_tars takes it."""
    first = ranked[0]
    long = first.length_share
    return (1 - long) * keyword_weight(first.query_coverage) + long * LONG_KEYWORD_WEIGHT


def _line_keywords(store, query: str, texts: list[str]) -> list[float]:
    """Each line's BM25 for the query's words (IDF from the passages), over the best line's: 0..1."""
    wanted = list(dict.fromkeys(token for part in query_parts(query) for token in store.keyword_tokens(part.strip('"*'))))
    if not wanted:
        return [0.0] * len(texts)
    total, frequencies = store.passage_frequencies(wanted)
    idf = {t: math.log(1 + (total - frequencies.get(t, 0) + 0.5) / (frequencies.get(t, 0) + 0.5)) for t in wanted}
    tokens = [[token for _, _, token in store.keyword_token_spans(text)] for text in texts]
    average = sum(map(len, tokens)) / len(tokens) or 1.0
    scores = []
    for line_tokens in tokens:
        length, score = len(line_tokens), 0.0
        for token in wanted:
            count = line_tokens.count(token)
            if count:
                score += idf[token] * count * (BM25_K1 + 1) / (count + BM25_K1 * (1 - BM25_B + BM25_B * length / average))
        scores.append(score)
    best = max(scores)
    return [score / best if best > 0 else 0.0 for score in scores]


def _neighbours(note: NoteLines, line: int) -> list[int]:
    """The line before and after ``line`` that hold text, among the lines read."""
    numbers = sorted(n for n, text in note.lines.items() if text.strip())
    at = numbers.index(line) if line in numbers else -1
    if at < 0:
        return [line]
    return numbers[max(0, at - 1) : at + 2]


def _fill(result: Recalled, items: list[_Item], notes: dict[int, NoteLines], mode: str, max_notes: int) -> None:
    chosen: dict[int, Piece] = {}
    used = 0
    lines_first = 0
    floor = FLOOR_SHARE * items[0].value if items else 0.0
    for item in items:
        if item.value < floor:
            break
        note = notes.get(item.file_id)
        if note is None:
            continue
        lines = item.lines
        if item.line:
            lines_first += 1
            if lines_first <= NEIGHBOUR_TOP:
                lines = _neighbours(note, item.line)
        piece = chosen.get(item.file_id)
        if piece is None and max_notes and len(chosen) >= max_notes:
            continue
        new = [n for n in lines if n in note.lines and (piece is None or n not in piece.lines)]
        if not new:
            continue
        cost = _cost(piece, new, note)
        if used + cost > result.budget:
            if len(new) > 1 and item.line:  # the line alone may still fit without its neighbours
                new = [item.line] if item.line not in (piece.lines if piece else {}) else []
                cost = _cost(piece, new, note) if new else 0
            if not new or used + cost > result.budget:
                continue
        if piece is None:
            when = note.date if note.date is not None else note.mtime
            blank = frozenset(n for n, text in note.lines.items() if not text.strip())
            dated = note.date is not None
            piece = chosen[item.file_id] = Piece(note.path, note.title, note.memory_type, when, dated, item.value, {}, blank)
        for n in new:
            piece.lines[n] = note.lines[n]
        piece.value = max(piece.value, item.value)
        used += cost
    result.pieces = sorted(chosen.values(), key=lambda p: (-p.when, p.path))
    result.chars = used


def _cost(piece: Piece | None, new: list[int], note: NoteLines) -> int:
    """Characters ``new`` lines add to a note's recalled text: their text, line ends, a gap mark where
    they start a range of their own, and the note's header (its path, date and lines) when it is new."""
    have = set(piece.lines) if piece else set()
    cost = 0 if piece is not None else len(note.path) + HEADER_CHARS
    for n in sorted(new):
        cost += len(note.lines[n]) + 1
        if have and not _touches(have, n, note):
            cost += len(GAP) + 1
        have.add(n)
    return cost


def _touches(have: set[int], line: int, note: NoteLines) -> bool:
    """Whether ``line`` continues a range of ``have`` (only blank lines between)."""
    for step in (-1, 1):
        n = line + step
        while n in note.lines and not note.lines[n].strip():
            n += step
        if n in have:
            return True
    return False
