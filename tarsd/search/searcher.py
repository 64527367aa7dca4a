"""Keyword (FTS5 BM25), vector (in-memory cosine) and hybrid search over the index.

Each search takes the same candidates whatever the limit (300 passages from each list, one
best passage per note), measures every signal for each (keyword rank, BM25, how much of the
query's rare words it holds, in its title too; vector rank and cosine; links from the other
top hits), ranks them for the mode, and shows a score on the design's bands (relevant >=
0.75, kinda >= 0.5, maybe >= 0.25, not below):
- ``fts``: BM25's order; the score scales BM25 relative to the best hit by how much of the
  query the best keyword match holds, so a query sharing only common words stays low.
- ``vec``: cosine order; the score maps cosine onto the bands (see ANCHORS).
- ``hybrid``: the fusion described at fuse_tars, its value mapped onto the bands; for a
  query of up to 20 words, a note that both lists rank first is at least relevant, and a
  nonsense query (no keyword match, only distant vectors) stays in not/maybe.
In every mode the note the query names (its file name, title or an alias) leads, as relevant;
a few more rules set a floor or a cap on the shown score (see rank), and --explain says which
(Candidate.rule), beside the value and the score it maps to.
The fusion and the anchors were chosen by measuring: bench/search_fusion_study.py prints the table.
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
    length_share: float = 0.0  # 0 for a query of up to LONG_FUSION_FROM words, 1 from LONG_FUSION_TO (see fuse_tars)
    vector_rank: int = 0  # 1-based among notes in the vector list; 0: not in it
    cosine: float = 0.0  # of its nearest passage (measured even when the vector top-k missed it)
    linked_from: int = 0  # other top hits that link to it
    named: bool = False  # the query is the note's name: its file name, title or an alias
    sole: bool = False  # the only note the keyword search found: every query word found anywhere is in it alone
    whole: bool = False  # its best keyword passage holds every query phrase found in the index (those found nowhere aside)
    holders: int = 0  # notes whose best keyword passage is whole, when it is one of them; 0 otherwise
    keyword_chunk: int = 0
    fused: float = 0.0  # the mode's ranking value
    calibrated: float = 0.0  # fused mapped onto the bands' scale (see shown_score)
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
# A hit's shown score is its mode's value (fts: keyword_value; vec: the cosine; hybrid: the
# fused value) mapped onto the bands, piecewise-linearly, with anchors where the bands begin.
# They were fitted on the dev half of five judged sets (bench/search_fusion_study.py --fit;
# bench/search_quality.py prints the reliability on the held-out half): a hit banded relevant
# was relevant at least 80% of the time, one banded not at most 10%. The vec and hybrid maybe
# anchors moved from 0.58 and 0.55 to 0.50 with the help-vault set: in its small vault a
# paraphrased question's answer often has a cosine of 0.35 to 0.5 (11-13% of the vec hits
# banded not were relevant), and vec's relevant anchor from 0.81 to 0.83 (SciFact's vec hits
# banded relevant were 5 of 7 relevant at 0.81, 3 of 3 at 0.83 on each half).
#
# A query of more than LONG_QUERY_WORDS words is shown at most as maybe: a paragraph shares
# many words and much meaning with passages that do not answer it. On ArguAna's argument
# queries no value had more than 15% of its hits relevant, the highest values least of all
# (arguments of the same debate), and two lists agreeing on the first note was no evidence
# (0 of 155 such hits relevant); below the short queries' maybe anchors, 3-7% were.
LONG_QUERY_WORDS = 20
LONG_QUERY_CAP = 0.49
# Per mode: the value where maybe begins, where kinda begins, where relevant begins.
ANCHORS = {"fts": (0.60, 0.86, 0.98), "vec": (0.50, 0.70, 0.83), "hybrid": (0.50, 0.70, 0.86)}
RELEVANT = BAND_FLOORS["relevant"]
# In fts and vec a hit is shown as relevant only when it also stands out from the next hit of
# its list: its BM25 at least this share above the next one's (fts), its cosine at least this
# much above (vec). A top hit among near-equals is one of several close answers, and was
# relevant 74% of the time on SQuAD's dev half (fts) and 76% on SciFact's (vec); with the lead,
# 95% and 85% (bench/search_fusion_study.py --fit).
LEADS = {"fts": 0.2, "vec": 0.03}
# A vec hit within this of the query's best cosine is the best guess by meaning there is, shown
# as maybe at worst, never as not: the answer to a paraphrased question in a small vault may
# have a low cosine, and the first hits of such a list were the 11% of vec hits banded not that
# were relevant on the help-vault set (7% with this floor; every other set 1.5-3.3%).
NEAR_BEST_COSINE = 0.02
MAYBE = BAND_FLOORS["maybe"]
# In fts and hybrid, the only note the keyword search finds, holding every query word that occurs
# anywhere in the (searched part of the) vault, is kinda at least: a rare word, a name or a
# made-up term in one note and nowhere else points at that note whatever its BM25 share. Words
# found nowhere say nothing about which note is meant, so "sourdough oven temperature" in a vault
# whose one sourdough note never says "oven" leads there as kinda, not as "not". On the judged sets
# such hits are few (a big vault rarely holds a query's words in one note only); the bench counts
# them and how many were relevant (bench/search_quality.py: "top-10 hits whose score a rule set").
KINDA = BAND_FLOORS["kinda"]
# In fts and hybrid, a hit holding every query word found in the vault, when at most this many
# notes do, is maybe at least: in a small vault the second and third notes about "Raspberry Pi"
# have a BM25 far below the note with it in its title, yet each holds the whole query. In a big
# vault many notes hold a short query's words and the rule stays out of the way.
FEW_HOLDERS = 3
# What each mode's value is called where --explain says how a score was made.
VALUE_NAMES = {"fts": "keyword value", "vec": "cosine", "hybrid": "fused"}


def leads(c: Candidate, below: Candidate | None, mode: str) -> bool:
    """Whether ``c`` stands out from ``below``, the next hit of its list (see LEADS)."""
    if below is None:
        return True
    if mode == "fts":
        return c.bm25 > 0 and 1 - below.bm25 / c.bm25 >= LEADS["fts"]
    return c.cosine - below.cosine >= LEADS["vec"]


def shown_score(value: float, mode: str) -> float:
    """The mode's value on the bands' 0..1 scale: 0.25 where maybe begins, 0.5 kinda, 0.75 relevant
    (a long query's cap and the other rules come after, in Searcher.rank)."""
    maybe, kinda, relevant = ANCHORS[mode]
    return calibrate(value, ((0.0, 0.0), (maybe, 0.25), (kinda, 0.5), (relevant, 0.75), (1.0, 1.0)))


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
        scale=f"{VALUE_NAMES[mode]} on {scale_text(mode)}",
        rule=c.rule,
    )


def scale_text(mode: str) -> str:
    """Where the bands begin on a mode's value, as --explain says it."""
    maybe, kinda, relevant = ANCHORS[mode]
    return f"{mode}'s scale: maybe from {maybe:.2f}, kinda {kinda:.2f}, relevant {relevant:.2f}"


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


def calibrate(value: float, anchors: tuple[tuple[float, float], ...]) -> float:
    """Piecewise-linear and monotone, clamped to 0..1."""
    if value <= anchors[0][0]:
        return anchors[0][1]
    for (x0, y0), (x1, y1) in zip(anchors, anchors[1:], strict=False):
        if value <= x1:
            return y0 + (y1 - y0) * (value - x0) / (x1 - x0)
    return anchors[-1][1]


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
        by_rank = sorted(pool, key=lambda c: order[id(c)])
        next_in_list = {id(c): below for c, below in zip(by_rank, [*by_rank[1:], None], strict=False)}
        best_cosine = max((c.cosine for c in pool), default=0.0) if mode == "vec" else 0.0
        for c in ordered:
            c.calibrated = c.score = shown_score(c.fused, mode)
            c.rule = ""
            if long_query and c.score > LONG_QUERY_CAP:
                c.score = LONG_QUERY_CAP
                c.rule = f"maybe at most: a query of more than {LONG_QUERY_WORDS} words"
            if mode in LEADS and c.score >= RELEVANT and not leads(c, next_in_list[id(c)], mode):
                c.score = RELEVANT - 0.01
                c.rule = "kinda at most: it does not stand out from the next hit"
            if mode == "vec" and c.cosine >= best_cosine - NEAR_BEST_COSINE and c.score < MAYBE:
                c.score = MAYBE
                c.rule = f"maybe at least: within {NEAR_BEST_COSINE} of the best cosine"
            if 0 < c.holders <= FEW_HOLDERS and mode != "vec" and c.score < MAYBE:
                c.score = MAYBE
                holding = "the only note" if c.holders == 1 else f"one of {c.holders} notes"
                c.rule = f"maybe at least: {holding} holding every query word found in the vault"
            if c.sole and mode != "vec" and c.score < KINDA:
                c.score = KINDA
                c.rule = "kinda at least: the only note holding the query's words"
            if (c.named or agreed(c)) and c.score < RELEVANT:
                c.score = RELEVANT
                c.rule = "relevant: the query is its name" if c.named else "relevant: both lists put it first"
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
        cut = False
        if parts and "fts" in lists:
            total, frequencies = self._phrase_frequencies(parts)
            kept = affordable_phrases(frequencies, LONG_QUERY_POSTINGS_BUDGET if is_long(query) else KEYWORD_POSTINGS_BUDGET)
            cut = len(kept) < len(parts)
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
        # Every passage holding a query word is in fts_hits (fewer than depth, no phrase cut): one owner is the sole note.
        found_notes = {owners[chunk][0] for chunk, _, _ in fts_hits if chunk in owners}
        sole_note = next(iter(found_notes)) if len(found_notes) == 1 and len(fts_hits) < depth and not cut else None
        keyword_rank = 0
        for chunk, bm25, matched in fts_hits:
            c = candidate(chunk)
            if c is not None and not c.keyword_rank:
                keyword_rank += 1
                c.keyword_rank, c.bm25, c.chunk, c.keyword_chunk = keyword_rank, -bm25, chunk, chunk
                c.sole = owners[chunk][0] == sole_note
                c.whole = all(found & PHRASE_IN_ROW for frequency, found in zip(frequencies, matched, strict=False) if frequency)
                # zip stops at the shorter: the phrases FTS5 parsed are the ones weighed.
                c.coverage = sum(w for w, found in zip(weights, matched, strict=False) if found & PHRASE_IN_ROW)
                c.title_coverage = sum(w for w, found in zip(weights, matched, strict=False) if found & PHRASE_IN_TITLE)
        top_bm25 = max((c.bm25 for c in found.values()), default=0.0)
        whole = [c for c in found.values() if c.whole]
        if len(fts_hits) < depth and not cut:  # otherwise more notes may hold them than were counted
            for c in whole:
                c.holders = len(whole)
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
