"""Keyword (FTS5 BM25), vector (in-memory cosine) and hybrid search over the index.

Each search takes the same candidates whatever the limit (300 passages from each list, one
best passage per note), measures every signal for each (keyword rank, BM25, how much of the
query's rare words it holds, in its title too; vector rank and cosine; links from the other
top hits), ranks them for the mode, and shows a score on the design's bands (relevant >=
0.75, kinda >= 0.5, maybe >= 0.25, not below):
- ``fts``: BM25's order; its value scales BM25 relative to the best hit by how much of the
  query the best keyword match holds, so a query sharing only common words stays low.
- ``vec``: cosine order.
- ``hybrid``: the fusion described at fuse_tars; a note that both lists rank first leads.
The score is the hit's chance of being relevant (tarsd/search/bands.py) on the bands' scale; in
every mode the note the query names (its file name, title or an alias) leads, as relevant, and
a long query is maybe at most (see rank); --explain says which rule set a score (Candidate.rule),
beside the value, the chance and the score it maps to.
The fusion was chosen by measuring (bench/search_fusion_study.py), the bands' model by
bench/search_bands.py.
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Literal

from tarsctl.protocol import Explain, Hit
from tarsd.embed.embedder import Embedder, EmbedderUnavailable
from tarsd.markdown.tokens import query_phrase
from tarsd.markdown.visible import shown_heading
from tarsd.search import bands
from tarsd.search.graph import NoteGraph
from tarsd.search.snippets import make_snippet, query_phrases
from tarsd.store.database import NO_FILTER, PHRASE_IN_ROW, PHRASE_IN_TITLE, Filter, Store

Mode = Literal["fts", "vec", "hybrid"]
MODES = ("fts", "vec", "hybrid")
BANDS = ((0.75, "relevant"), (0.5, "kinda"), (0.25, "maybe"), (0.0, "not"))
BAND_FLOORS = {name: floor for floor, name in BANDS}
# A paragraph-long query's first this many words are searched for (after stopwords): on the
# paragraph-query set (bench/search_quality.py, ArguAna dev, keywords only) 64 scored nDCG@10
# 0.355 against 0.350 for 48 or 80, 0.343 for all of them and 0.336 for 31.
MAX_QUERY_TERMS = 64
# A hit carries its chunk's text: at most this many characters, so 1,000 hits stay far below
# the socket's 64 MiB reply cap (chunks are bounded; this also bounds any older, larger row).
MAX_HIT_TEXT = 16_000
# A hybrid search answers from keywords rather than wait longer for the query's vector.
VECTOR_TIMEOUT_SECONDS = 5.0
# Passages taken from each list before fusing, whatever the limit (see search()).
CANDIDATE_DEPTH = 300
# Passages a keyword search may score: past this, the query's commonest words are left out of
# the search (see affordable_phrases). About 30 ms of FTS5 work on this project's 2-core box.
KEYWORD_POSTINGS_BUDGET = 20_000
# The same for a query of more than LONG_QUERY_WORDS words. A paragraph states its topic in
# words that are common in its corpus: keeping only its rarest cost the paragraph-query set
# 0.021 nDCG@10 (ArguAna dev, keywords only, 0.336 with no cut against 0.315 at 20,000), while
# no short query of the four sets reached 20,000.
LONG_QUERY_POSTINGS_BUDGET = 100_000
# The keyword hits whose coverage says how well keywords answer the query.
QUERY_COVERAGE_TOP = 10
# A query of at most this many words may be a note's name (see as_name).
NAME_QUERY_WORDS = 8

# Words too common to help a keyword match; dropped unless the query is nothing else.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below between both but by
    can could did do does doing down during each few for from further had has have having he her here hers herself him himself
    his how i if in into is it its itself just me more most my myself no nor not of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them themselves then there these they this
    those through to too under until up very was we were what when where which while who whom why will with would you your
    yours yourself yourselves""".split()
)

_PHRASE = re.compile(r'"([^"]*)"')
_TERM = re.compile(r"\w+\*?")


class SearchError(Exception):
    """The search cannot run as asked; the message says why and what to do."""


@dataclass(slots=True)
class SearchResponse:
    # The wire's Hit is the engine's result too: every door and the chat tools show the same
    # fields, built once here.
    results: list[Hit] = field(default_factory=list)
    mode: str = "hybrid"  # the mode actually used (hybrid falls back to fts without an embedder)
    warnings: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Candidate:
    """A note (or a passage, with all_chunks) found by either list, with every signal that
    decides its place; ``--explain`` shows them."""

    chunk: int  # the passage shown: the one of the list that ranked the note higher
    path: str
    keyword_rank: int = 0  # 1-based among notes in the keyword list; 0: not in it
    bm25: float = 0.0  # of its best keyword passage; higher is better
    top_bm25: float = 0.0  # the best bm25 of the query
    coverage: float = 0.0  # share of the query's words (weighted by IDF) in its best keyword passage, title included
    title_coverage: float = 0.0  # the same, in its title, aliases, tags and file name only
    query_coverage: float = 0.0  # the best coverage among the top keyword hits: how well keywords answer this query
    found_share: float = 1.0  # the share of the query's words (by IDF) found anywhere in the index: the rest no note can hold
    length_share: float = 0.0  # 0 for a query of up to LONG_FUSION_FROM words, 1 from LONG_FUSION_TO (see fuse_tars)
    vector_rank: int = 0  # 1-based among notes in the vector list; 0: not in it
    cosine: float = 0.0  # of its nearest passage (measured even when the vector top-k missed it)
    linked_from: int = 0  # other top hits that link to it
    named: bool = False  # the query is the note's name: its file name, title or an alias
    keyword_chunk: int = 0
    fused: float = 0.0  # the mode's ranking value
    chance: float = 0.0  # of being relevant, by the mode's model (tarsd/search/bands.py)
    calibrated: float = 0.0  # the chance on the bands' scale
    score: float = 0.0  # what is shown: 0..1 on the bands' scale, calibrated or set by a rule in rank()
    rule: str = ""  # the rule that made score differ from calibrated, in words; "" when none did (see rank)


# ---- how the lists are fused, and what scores mean (chosen by bench/search_fusion_study.py) ----
#
# hybrid = a * coverage * (bm25 / best bm25)^2 + (1 - a) * cosine + title and link boosts.
# The keyword weight a follows query_coverage, how much of the query's rare words the best
# keyword matches hold: KEYWORD_WEIGHT_LOW up to COVERAGE_LOW, rising linearly to
# KEYWORD_WEIGHT_HIGH at COVERAGE_HIGH. A question in the user's own words (a paraphrase:
# "a picture of all my pages as dots joined by lines" for the graph view) shares only its
# common words with any note, and the notes that hold the most of them are rarely the answer;
# a query whose rare words some passage holds (a name, a term, a detail deep in a long note)
# is answered there. Both signals are measured for every candidate, so a note the other list
# ranked low is not counted as unrelated.
#
# The ramp replaced a = 0.4 + 0.2 * query_coverage (0.46 to 0.6 over the same range), which
# let a note sharing a third of a paraphrase's rare words outrank the note that answers it:
# on the help-vault set written for this (bench/golden/foam.jsonl), paraphrased questions'
# MRR@10 was 0.41 / 0.57 in hybrid against 0.70 / 0.76 in vec (dev / held-out halves). With
# the ramp hybrid is at or above vec on every question style of the held-out halves; the
# figures per set, half, length band and style are in docs/benchmarks.md#quality.
#
# A paragraph-long query is never "covered": it holds dozens of rare words and no passage holds
# most of them, so coverage and query_coverage say little, and squaring the BM25 share lets the
# one passage sharing the most words win. From LONG_FUSION_FROM words to LONG_FUSION_TO the
# fusion moves to LONG_KEYWORD_WEIGHT * (bm25 / best bm25) + the rest * cosine: on the
# paragraph-query set's dev half hybrid nDCG@10 went from 0.386 to 0.417 (fts 0.350, vec 0.365),
# and no other set's dev half moved (bench/search_fusion_study.py). The ramp sits between the
# shapes: the longest claim or question of the other three sets has 29 words, the shortest
# argument 45 (ramps starting at 20 or 25 words scored the same on every dev half).
KEYWORD_WEIGHT_LOW = 0.2
KEYWORD_WEIGHT_HIGH = 0.5
COVERAGE_LOW = 0.3
COVERAGE_HIGH = 0.8
LONG_FUSION_FROM = 30
LONG_FUSION_TO = 45
LONG_KEYWORD_WEIGHT = 0.5
TITLE_BOOST = 0.05  # times the share of the query in the note's title, aliases, tags, file name
LINK_BOOST = 0.02  # per other top hit linking to the note (Obsidian links as evidence), at most
LINK_BOOST_CAP = 2
LINK_TOP = 20  # the top hits whose links count
# ---- what scores mean ----
#
# A hit's shown score is its chance of being relevant (tarsd/search/bands.py: a logistic model per
# mode of its value, rank, lead over the next hit and how much of the query it holds, fitted on the
# dev halves of the judged sets by bench/search_bands.py --fit) on the bands' scale: the bands'
# edges are the promise's (not: relevant at most 1 in 10; kinda: at least half the time; relevant:
# at least 9 in 10, for the top three hits; bench/search_bands.py checks it on the held-out halves).
# Two rules set a floor or a cap from evidence the model does not see:
#
# A query of more than LONG_QUERY_WORDS words is shown as maybe for its first LONG_QUERY_TOP hits
# and maybe at most below them: a paragraph shares many words and much meaning with passages that
# do not answer it. On ArguAna's argument queries no value had more than 15% of its hits relevant,
# the highest values least of all (arguments of the same debate), and two lists agreeing on the
# first note was no evidence (0 of 155 such hits relevant); the first three hits were relevant
# 0.11-0.14 of the time (bench/search_bands.py): the best guess there is, not "not".
LONG_QUERY_WORDS = 20
LONG_QUERY_CAP = 0.49
LONG_QUERY_TOP = 3
LONG_QUERY_BAND = 0.3  # maybe
# A query none of whose words any note holds ("zzzxqjkw") is shown maybe at most: the nearest notes by
# meaning are a guess with nothing to back it. The model cannot know such a query: every judged query
# has an answer (bands.py). In the judged sets three questions of the demo vault's were such, and 4 of
# their 9 first hits were relevant: a guess, not "not".
UNKNOWN_WORDS_CAP = 0.49
RELEVANT = BAND_FLOORS["relevant"]
# What each mode's value is called where --explain says how a score was made.
VALUE_NAMES = {"fts": "keyword value", "vec": "cosine", "hybrid": "fused"}


def keyword_weight(query_coverage: float) -> float:
    """The hybrid keyword weight of a query of up to LONG_FUSION_FROM words (see above)."""
    rise = min(1.0, max(0.0, (query_coverage - COVERAGE_LOW) / (COVERAGE_HIGH - COVERAGE_LOW)))
    return KEYWORD_WEIGHT_LOW + (KEYWORD_WEIGHT_HIGH - KEYWORD_WEIGHT_LOW) * rise


def fuse_tars(c: Candidate, weight: Callable[[float], float] = keyword_weight) -> float:
    """The hybrid ranking value (see above); ``weight`` maps query coverage to the keyword
    weight (bench/search_fusion_study.py passes the weights it compares)."""
    relative = c.bm25 / c.top_bm25 if c.top_bm25 else 0.0
    long = c.length_share
    alpha = (1 - long) * weight(c.query_coverage) + long * LONG_KEYWORD_WEIGHT
    keyword = (1 - long) * relative * relative * c.coverage + long * relative
    return alpha * keyword + (1 - alpha) * c.cosine + TITLE_BOOST * c.title_coverage + LINK_BOOST * min(c.linked_from, LINK_BOOST_CAP)


def length_share(query: str) -> float:
    """How far the query is into the long-query fusion: 0 up to LONG_FUSION_FROM words, 1 from LONG_FUSION_TO."""
    words = query_words(query)
    return min(1.0, max(0.0, (words - LONG_FUSION_FROM) / (LONG_FUSION_TO - LONG_FUSION_FROM)))


def signals(c: Candidate, mode: str) -> Explain:
    """What ``--explain`` shows of a candidate: its signals, rounded, and the boosts they gave."""
    return Explain(
        keyword_rank=c.keyword_rank,
        bm25=round(c.bm25, 4),
        coverage=round(c.coverage, 4),
        title_coverage=round(c.title_coverage, 4),
        vector_rank=c.vector_rank,
        cosine=round(c.cosine, 4),
        title_boost=round(TITLE_BOOST * c.title_coverage, 4),
        link_boost=round(LINK_BOOST * min(c.linked_from, LINK_BOOST_CAP), 4),
        linked_from=c.linked_from,
        fused=round(c.fused, 4),
        named=c.named,
        calibrated=round(c.calibrated, 4),
        scale=f"{VALUE_NAMES[mode]} on {scale_text(mode, c.chance)}",
        rule=c.rule,
    )


def scale_text(mode: str, chance: float) -> str:
    """How the score was read, as --explain says it: the chance the hit is relevant, and where the bands begin."""
    return f"{mode}'s model: chance relevant {chance:.2f} (maybe from 0.10, kinda 0.50, relevant 0.90)"


def phrase_weights(total: int, frequencies: list[int]) -> list[float]:
    """Each query phrase's share of the query, by IDF: holding "all the rare words of the
    question" is 1.0 however long or short the vault. A phrase found in no passage weighs most:
    a question whose words the notes never use is not answered by the notes sharing its others
    (the hybrid keyword weight drops)."""
    weights = [math.log(1 + (total - frequency + 0.5) / (frequency + 0.5)) for frequency in frequencies]
    whole = sum(weights) or 1.0
    return [w / whole for w in weights]


def affordable_phrases(frequencies: list[int], budget: int = KEYWORD_POSTINGS_BUDGET) -> list[int]:
    """The phrases (indices, in query order) the keyword search looks for: all of them, unless
    together they appear in more than ``budget`` passages; then the rarest that fit
    (at least one). FTS5 scores every passage holding any of an OR's words, so in a big vault a
    question's common words ("methods", "lack") cost hundreds of milliseconds while moving
    almost nothing: their IDF is near zero (bench/search_scale.py)."""
    if sum(frequencies) <= budget:
        return list(range(len(frequencies)))
    kept, used = [], 0
    for i in sorted(range(len(frequencies)), key=lambda i: frequencies[i]):
        if kept and used + frequencies[i] > budget:
            break
        kept.append(i)
        used += frequencies[i]
    return sorted(kept)


def keyword_value(c: Candidate) -> float:
    """fts mode: BM25's order, scaled by how much of the query the best keyword match holds."""
    return (c.bm25 / c.top_bm25 if c.top_bm25 else 0.0) * c.query_coverage


def band(score: float) -> str:
    return next(name for floor, name in BANDS if score >= floor)


def query_parts(text: str) -> list[str]:
    """Free text as FTS5 phrases that cannot fail to parse: every word quoted (so AND, NOT,
    colons, parentheses and * lose their syntax), "quoted phrases" kept, a trailing * on a
    word kept as a prefix search, stopwords dropped unless nothing else is left, CJK words
    as the phrase of their characters (see tokens.py)."""
    parts: list[str] = []
    for phrase in _PHRASE.findall(text):
        words = [query_phrase(w) for w in re.findall(r"\w+", phrase)]
        if words:
            parts.append('"' + " ".join(words) + '"')
    rest = _PHRASE.sub(" ", text)
    terms: list[tuple[str, bool]] = []
    seen: set[str] = set()
    for match in _TERM.findall(rest):
        word, prefix = match.rstrip("*"), match.endswith("*")
        key = word.lower()
        if key not in seen:
            seen.add(key)
            terms.append((word, prefix))
    useful = [t for t in terms if t[0].lower() not in STOPWORDS] or terms
    for word, prefix in useful:
        parts.append(f'"{query_phrase(word)}"*' if prefix else f'"{query_phrase(word)}"')
    # A paragraph-long query's first words: they state its topic. Its rarest ones instead (names,
    # numbers, asides) lost a third of the keyword figure on ArguAna (nDCG@10 0.324 -> 0.235).
    return parts[:MAX_QUERY_TERMS]


def fts_query(text: str) -> str:
    """The parts OR-ed: a natural question finds notes that share only some of its words;
    BM25 ranks those sharing more, and rarer, words first. Empty: nothing to search."""
    return " OR ".join(query_parts(text))


def query_words(query: str) -> int:
    return len(re.findall(r"\w+", query))


def is_long(query: str) -> bool:
    return query_words(query) > LONG_QUERY_WORDS


def as_name(query: str) -> str:
    """The query as a note's name, if it can be one: at most NAME_QUERY_WORDS words, without the
    marks around it (a question mark, quotes, brackets); "" otherwise."""
    name = re.sub(r"^\W+|\W+$", "", query)
    return name if 0 < len(name.split()) <= NAME_QUERY_WORDS else ""


class Searcher:
    def __init__(self, store: Store, embedder: Embedder, graph: NoteGraph | None = None):
        self.store = store
        self.embedder = embedder
        self.graph = graph
        self._query_vectors: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self._query_vectors_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="vec-search")

    def search(
        self,
        query: str,
        mode: str = "hybrid",
        limit: int = 10,
        min_score: float = 0.0,
        where: Filter = NO_FILTER,
        per_file: bool = True,
        marks: tuple[str, str] = ("**", "**"),
        explain: bool = False,
    ) -> SearchResponse:
        if mode not in MODES:
            raise SearchError(f"unknown search mode {mode!r}: use one of {', '.join(MODES)}")
        if mode == "hybrid" and not self.embedder.enabled:
            mode = "fts"  # keywords only by the user's choice ([embedder] kind = "none"): nothing to warn about
        response = SearchResponse(mode=mode)
        query = query.strip()
        if not query or limit <= 0:
            return response
        # The same candidates whatever the limit, so the first N hits never depend on it.
        depth = max(CANDIDATE_DEPTH, limit)
        lists = {"fts": ("fts",), "vec": ("vec",), "hybrid": ("fts", "vec")}[mode]
        found, vector_error = self.candidates(query, depth, where, per_file, lists)
        if vector_error is not None:
            if mode == "vec":
                raise SearchError(f"vector search is unavailable: {vector_error}")
            response.mode = "fts"
            response.warnings.append(f"vector search unavailable, showing keyword results only: {vector_error}")
        ranked_candidates = self.rank(found, response.mode, is_long(query))
        ranked = [(c.chunk, c.score) for c in ranked_candidates if c.score >= min_score][:limit]
        explained = {c.chunk: c for c in ranked_candidates}
        phrases = query_phrases(query_parts(query), self.store.keyword_tokens)

        rows = self.store.chunk_rows([chunk for chunk, _ in ranked])
        for chunk, score in ranked:
            row = rows.get(chunk)
            if row is None:  # deleted between the two queries
                continue
            snippet = make_snippet(row.text, phrases, self.store.keyword_token_spans, marks)
            response.results.append(
                Hit(
                    path=row.path,
                    title=row.title,
                    heading_path=row.heading_path,
                    heading=shown_heading(row.title, row.heading_path),
                    start_line=row.start_line,
                    end_line=row.end_line,
                    snippet=snippet,
                    score=round(score, 4),
                    band=band(score),
                    memory_type=row.memory_type,
                    text=row.text[:MAX_HIT_TEXT],
                    explain=signals(explained[chunk], response.mode) if explain else None,
                )
            )
        return response

    def rank(self, found: list[Candidate], mode: str, long_query: bool = False) -> list[Candidate]:
        """Order candidates for ``mode`` and give each its shown score.

        Two kinds of hit lead whatever the values say, and are relevant by any measure: the note
        the query names (its file name, title or an alias: the user asked for it), then, in
        hybrid, the note both searches put first (two independent judgements agree;
        bench/search_fusion_study.py: better MRR, nothing lost)."""
        if mode == "fts":
            pool = [c for c in found if c.keyword_rank]
            for c in pool:
                c.fused = keyword_value(c)
            order = {id(c): c.keyword_rank for c in pool}
        elif mode == "vec":
            pool = [c for c in found if c.vector_rank]
            for c in pool:
                c.fused = c.cosine
            order = {id(c): c.vector_rank for c in pool}
        else:
            pool = found
            for c in pool:
                c.fused = fuse_tars(c)
            if self.graph is not None:
                top = sorted(pool, key=lambda c: (-c.fused, c.path))[:LINK_TOP]
                self._count_links(top)
                for c in top:  # the only ones links were counted for
                    c.fused = fuse_tars(c)
            by_value = sorted(pool, key=lambda c: (-c.fused, c.path))
            order = {id(c): rank for rank, c in enumerate(by_value, 1)}

        def agreed(c: Candidate) -> bool:
            return mode == "hybrid" and not long_query and c.keyword_rank == 1 and c.vector_rank == 1

        ordered = sorted(pool, key=lambda c: (not c.named, not agreed(c), order[id(c)]))
        notes = self.store.coverage_counts()["notes"] if self.store is not None else 0
        for rank, c in enumerate(ordered, 1):
            c.chance = bands.chance(bands.features(c, ordered, rank, mode, notes), mode)
            c.calibrated = c.score = bands.shown(c.chance)
            c.rule = ""
            if long_query and rank <= LONG_QUERY_TOP and c.score != LONG_QUERY_BAND:
                c.score = LONG_QUERY_BAND
                c.rule = f"maybe: one of the first {LONG_QUERY_TOP} hits of a query of more than {LONG_QUERY_WORDS} words"
            elif long_query and c.score > LONG_QUERY_CAP:
                c.score = LONG_QUERY_CAP
                c.rule = f"maybe at most: a query of more than {LONG_QUERY_WORDS} words"
            if c.found_share == 0 and c.score > UNKNOWN_WORDS_CAP:
                c.score = UNKNOWN_WORDS_CAP
                c.rule = "maybe at most: none of the query's words is in the vault"
            if c.named and c.score < RELEVANT:
                c.score = RELEVANT
                c.rule = "relevant: the query is its name"
        for above, below in zip(reversed(ordered[:-1]), reversed(ordered[1:]), strict=True):
            if below.score > above.score:  # a hit never shows more than the one above it
                above.score = below.score
                above.rule = "raised to the next hit's score: scores never rise down the list"
        return ordered

    def _count_links(self, top: list[Candidate]) -> None:
        """How many of the other top hits link to each: notes the best results point to."""
        pairs = self.graph.linked_pairs([c.path for c in top])
        for c in top:
            c.linked_from = sum(1 for _, target in pairs if target == c.path)

    def candidates(
        self, query: str, depth: int, where: Filter = NO_FILTER, per_file: bool = True, lists: tuple[str, ...] = ("fts", "vec")
    ) -> tuple[list[Candidate], str | None]:
        """Up to ``depth`` passages from each list, one per note (or every passage), with their
        signals; and why there is no vector list, when there is none."""
        parts = query_parts(query)
        # The two searches run side by side: SQLite, onnxruntime and the matrix product release
        # the GIL. A vector search whose query vector is known needs no model: alone, it runs
        # here, without a thread's hop.
        vector_future = None
        if "vec" in lists:
            known = self._known_query_vector(query)
            if known is not None and "fts" not in lists:
                vector_future = Future()
                vector_future.set_result((known, self.store.vec_search(known, depth, where)))
            else:
                vector_future = self._pool.submit(self._vec_search, query, depth, where)
        fts_hits = []
        found_share = 1.0
        if parts:
            # Which of the query's words the index holds at all (a vocabulary lookup, in every mode): a word
            # found nowhere cannot point at any note, and a query of such words finds nothing (bands.py).
            total, frequencies = self._phrase_frequencies(parts)
            found_share = sum(w for w, frequency in zip(phrase_weights(total, frequencies), frequencies, strict=True) if frequency)
        if parts and "fts" in lists:
            kept = affordable_phrases(frequencies, LONG_QUERY_POSTINGS_BUDGET if is_long(query) else KEYWORD_POSTINGS_BUDGET)
            parts, frequencies = [parts[i] for i in kept], [frequencies[i] for i in kept]
            fts_hits = self.store.fts_search(" OR ".join(parts), depth, where)
        vec_hits: list[tuple[int, float]] = []
        query_vector: bytes | None = None
        vector_error = None
        if vector_future is not None:
            try:
                query_vector, vec_hits = vector_future.result(timeout=VECTOR_TIMEOUT_SECONDS)
            except (EmbedderUnavailable, FutureTimeout) as exc:
                vector_error = str(exc) if isinstance(exc, EmbedderUnavailable) else self._slow_reason()

        owners = self.store.chunk_notes([hit[0] for hit in fts_hits] + [chunk for chunk, _ in vec_hits])
        found: dict[int, Candidate] = {}

        def candidate(chunk: int) -> Candidate | None:
            owner = owners.get(chunk)
            if owner is None:
                return None  # deleted between the queries
            key = owner[0] if per_file else -chunk
            if key not in found:
                found[key] = Candidate(chunk=chunk, path=owner[1])
            return found[key]

        weights = phrase_weights(total, frequencies) if fts_hits else []
        keyword_rank = 0
        for chunk, bm25, matched in fts_hits:
            c = candidate(chunk)
            if c is not None and not c.keyword_rank:
                keyword_rank += 1
                c.keyword_rank, c.bm25, c.chunk, c.keyword_chunk = keyword_rank, -bm25, chunk, chunk
                # zip stops at the shorter: the phrases FTS5 parsed are the ones weighed.
                c.coverage = sum(w for w, found in zip(weights, matched, strict=False) if found & PHRASE_IN_ROW)
                c.title_coverage = sum(w for w, found in zip(weights, matched, strict=False) if found & PHRASE_IN_TITLE)
        top_bm25 = max((c.bm25 for c in found.values()), default=0.0)
        vector_rank = 0
        for chunk, cosine in vec_hits:
            c = candidate(chunk)
            if c is None or c.vector_rank:
                continue
            vector_rank += 1
            c.vector_rank, c.cosine = vector_rank, max(0.0, cosine)
            if not c.keyword_rank or vector_rank < c.keyword_rank:
                c.chunk = chunk
        share = length_share(query)
        for c in found.values():
            c.top_bm25, c.length_share = top_bm25, share
        if query_vector is not None:
            # A keyword hit the vector top-k missed is not unrelated: measure how near it is.
            missing = [c for c in found.values() if not c.vector_rank]
            exact = self.store.similarities(query_vector, [c.keyword_chunk for c in missing])
            for c in missing:
                c.cosine = max(0.0, exact.get(c.keyword_chunk, 0.0))
        if fts_hits:
            best = max((c.coverage for c in found.values() if 0 < c.keyword_rank <= QUERY_COVERAGE_TOP), default=0.0)
            for c in found.values():
                c.query_coverage = best
        for c in found.values():
            c.found_share = found_share
        name = as_name(query)
        if name and self.graph is not None:
            # The note a link [[name]] from the vault root would lead to, as `tarsctl links` finds it;
            # else the one candidate whose shown title is the query (a "# heading" title no link uses).
            named = self.graph.find_note(name) or self.graph.titled(name, sorted({c.path for c in found.values()}))
            for c in found.values():
                c.named = c.path == named
        return list(found.values()), vector_error

    def _phrase_frequencies(self, parts: list[str]) -> tuple[int, list[int]]:
        """(passages in the index, passages that may hold each phrase: its rarest word's count)."""
        tokens = [self.store.keyword_tokens(part) for part in parts]
        total, frequencies = self.store.passage_frequencies(sorted({t for ts in tokens for t in ts}))
        return total, [min((frequencies.get(t, 0) for t in phrase_tokens), default=0) for phrase_tokens in tokens]

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _slow_reason(self) -> str:
        model = f"{self.embedder.kind} {self.embedder.config.model}"
        return f"the embedder did not answer within {VECTOR_TIMEOUT_SECONDS:g} s ({model} is busy or stuck)"

    def _vec_search(self, query: str, depth: int, where: Filter) -> tuple[bytes, list[tuple[int, float]]]:
        vector = self._query_vector(query)
        return vector, self.store.vec_search(vector, depth, where)

    def known_query_vector(self, query: str) -> bytes | None:
        """The query's vector if a search made it lately (recall's line search re-uses it)."""
        return self._known_query_vector(query)

    def _known_query_vector(self, query: str) -> bytes | None:
        """The query's vector if it was made lately by the model loaded now; None otherwise."""
        if not self.embedder.available():
            return None
        with self._query_vectors_lock:
            return self._query_vectors.get(self._cache_key(query))

    def _cache_key(self, query: str) -> tuple[str, str]:
        """A query's vector is kept for the model that made it."""
        return (self.embedder.fingerprint or "", query)

    def _query_vector(self, query: str) -> bytes:
        if not self.embedder.available():  # never waits for a model that is loading
            raise EmbedderUnavailable(self.embedder.unavailable_reason())
        key = self._cache_key(query)
        with self._query_vectors_lock:
            vector = self._query_vectors.get(key)
        if vector is None:
            vector = self.embedder.embed([query])[0].tobytes()
            with self._query_vectors_lock:
                self._query_vectors[key] = vector
                if len(self._query_vectors) > 256:
                    self._query_vectors.popitem(last=False)
        return vector
