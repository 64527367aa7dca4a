"""Keyword (FTS5 BM25), vector (sqlite-vec KNN) and hybrid (RRF) search over the index.

Scores are 0..1 in every mode and carry the design's bands:
- ``hybrid``: Reciprocal Rank Fusion, ``sum 1 / (k + rank)`` over both lists with k = 60,
  divided by its maximum ``2 / (k + 1)``: first in both lists scores 1.0, first in only one 0.5.
- ``fts``: the same rank score over the one BM25 list (``(k + 1) / (k + rank)``), as the
  original plan does: raw BM25 values depend on the size of the vault (with a handful of
  notes every IDF is near zero), ranks do not. Every fts result shares a word with the query.
- ``vec``: cosine similarity (negative clamped to 0), which means the same in any vault.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Literal

from .embed import Embedder, EmbedderUnavailable
from .store import ChunkRow, Store

Mode = Literal["fts", "vec", "hybrid"]
MODES = ("fts", "vec", "hybrid")
RRF_K = 60
BANDS = ((0.75, "relevant"), (0.5, "kinda"), (0.25, "maybe"), (0.0, "not"))
MAX_QUERY_TERMS = 32
SNIPPET_TOKENS = 24
SNIPPET_CHARS = 240
# A hybrid search answers from keywords rather than wait longer for the query's vector.
VECTOR_TIMEOUT_SECONDS = 5.0

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


@dataclass(frozen=True, slots=True)
class SearchResult:
    path: str
    title: str
    heading_path: str
    start_line: int
    end_line: int
    snippet: str
    score: float
    band: str
    memory_type: str
    text: str
    chunk_id: int


@dataclass(slots=True)
class SearchResponse:
    results: list[SearchResult] = field(default_factory=list)
    mode: str = "hybrid"  # the mode actually used (hybrid falls back to fts without an embedder)
    warnings: list[str] = field(default_factory=list)


def band(score: float) -> str:
    return next(name for floor, name in BANDS if score >= floor)


def fts_query(text: str) -> str:
    """Turn free text into an FTS5 query that cannot fail to parse.

    Every term is quoted (so AND, NOT, colons, parentheses and * lose their syntax), "quoted
    phrases" stay phrases, a trailing * on a word keeps prefix search, and terms are OR-ed so
    a natural-language question finds notes that share only some of its words; BM25 ranks
    the notes sharing more, and rarer, words first. Empty string: nothing to search.
    """
    parts: list[str] = []
    for phrase in _PHRASE.findall(text):
        words = re.findall(r"\w+", phrase)
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
    for word, prefix in useful[:MAX_QUERY_TERMS]:
        parts.append(f'"{word}"*' if prefix else f'"{word}"')
    return " OR ".join(parts)


def _query_terms(text: str) -> list[str]:
    return [w for w in re.findall(r"\w+", text.lower()) if w not in STOPWORDS] or re.findall(r"\w+", text.lower())


class Searcher:
    def __init__(self, store: Store, embedder: Embedder):
        self.store = store
        self.embedder = embedder
        self._query_vectors: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self._query_vectors_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="vec-search")

    def search(
        self,
        query: str,
        mode: str = "hybrid",
        limit: int = 10,
        min_score: float = 0.0,
        memory_types: list[str] | None = None,
        path_prefix: str | None = None,
        per_file: bool = True,
        marks: tuple[str, str] = ("**", "**"),
    ) -> SearchResponse:
        if mode not in MODES:
            raise SearchError(f"unknown search mode {mode!r}: use one of {', '.join(MODES)}")
        if mode == "hybrid" and not self.embedder.enabled:
            mode = "fts"  # keywords only by the user's choice ([embedder] kind = "none"): nothing to warn about
        response = SearchResponse(mode=mode)
        query = query.strip()
        if not query or limit <= 0:
            return response
        # Over-fetch chunks so that collapsing to one per file and fusing still fills the limit.
        depth = max(limit * 4, 40)
        match = fts_query(query)

        # The two searches run side by side: SQLite and onnxruntime release the GIL.
        vec_future = self._pool.submit(self._vec_search, query, depth, memory_types, path_prefix) if mode != "fts" else None
        fts_hits = self.store.fts_search(match, depth, memory_types, path_prefix) if match and mode != "vec" else []
        vec_hits: list[tuple[int, float]] = []
        if vec_future is not None:
            try:
                vec_hits = vec_future.result(timeout=VECTOR_TIMEOUT_SECONDS)
            except (EmbedderUnavailable, FutureTimeout) as exc:
                reason = str(exc) if isinstance(exc, EmbedderUnavailable) else self._slow_reason()
                if mode == "vec":
                    raise SearchError(f"vector search is unavailable: {reason}") from exc
                response.mode = "fts"
                response.warnings.append(f"vector search unavailable, showing keyword results only: {reason}")

        # Results are per note (the best chunk of each) or per chunk.
        owner = self.store.chunk_files([chunk for chunk, _ in fts_hits + vec_hits]) if per_file else {}
        key: Callable[[int], int] = (lambda chunk: owner.get(chunk, -chunk)) if per_file else (lambda chunk: chunk)
        if response.mode == "fts":
            ranked = fuse([collapse(fts_hits, key)], key)
        elif response.mode == "vec":
            ranked = collapse([(chunk, max(0.0, similarity)) for chunk, similarity in vec_hits], key)
        else:
            ranked = fuse([collapse(fts_hits, key), collapse(vec_hits, key)], key)

        ranked = [(chunk, score) for chunk, score in ranked if score >= min_score][:limit]
        rows = self.store.chunk_rows([chunk for chunk, _ in ranked])
        snippets = self.store.snippets(match, list(rows), marks[0], marks[1], SNIPPET_TOKENS)
        terms = _query_terms(query)
        for chunk, score in ranked:
            row = rows.get(chunk)
            if row is None:  # deleted between the two queries
                continue
            snippet = " ".join((snippets.get(chunk) or _fallback_snippet(row, terms, marks)).split())
            response.results.append(
                SearchResult(
                    path=row.path,
                    title=row.title,
                    heading_path=row.heading_path,
                    start_line=row.start_line,
                    end_line=row.end_line,
                    snippet=snippet,
                    score=round(score, 4),
                    band=band(score),
                    memory_type=row.memory_type,
                    text=row.text,
                    chunk_id=row.id,
                )
            )
        return response

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _vec_search(self, query: str, depth: int, memory_types: list[str] | None, path_prefix: str | None) -> list[tuple[int, float]]:
        return self.store.vec_search(self._query_vector(query), depth, memory_types, path_prefix)

    def _slow_reason(self) -> str:
        model = f"{self.embedder.kind} {self.embedder.config.model}"
        return f"the embedder did not answer within {VECTOR_TIMEOUT_SECONDS:g} s ({model} is busy or stuck)"

    def _query_vector(self, query: str) -> bytes:
        if not self.embedder.available():  # never waits for a model that is loading
            raise EmbedderUnavailable(self.embedder.unavailable_reason())
        key = (self.embedder.fingerprint or "", query)
        with self._query_vectors_lock:
            vector = self._query_vectors.get(key)
        if vector is None:
            vector = self.embedder.embed([query])[0].tobytes()
            with self._query_vectors_lock:
                self._query_vectors[key] = vector
                if len(self._query_vectors) > 256:
                    self._query_vectors.popitem(last=False)
        return vector


def collapse(hits: list[tuple[int, float]], key: Callable[[int], int]) -> list[tuple[int, float]]:
    """Keep hits in order, only the first for each key (a note, or the chunk itself)."""
    seen: set[int] = set()
    kept = []
    for chunk, score in hits:
        if key(chunk) not in seen:
            seen.add(key(chunk))
            kept.append((chunk, score))
    return kept


def fuse(lists: list[list[tuple[int, float]]], key: Callable[[int], int] = lambda chunk: chunk) -> list[tuple[int, float]]:
    """Reciprocal Rank Fusion by key, normalised so first in every list scores 1.0. The
    chunk shown for a key is the one from the list that ranked it highest."""
    scores: dict[int, float] = {}
    best: dict[int, tuple[int, int]] = {}  # key -> (rank, chunk)
    for hits in lists:
        for rank, (chunk, _) in enumerate(hits, 1):
            k = key(chunk)
            scores[k] = scores.get(k, 0.0) + 1.0 / (RRF_K + rank)
            if k not in best or rank < best[k][0]:
                best[k] = (rank, chunk)
    ceiling = len(lists) / (RRF_K + 1)
    return [(best[k][1], score / ceiling) for k, score in sorted(scores.items(), key=lambda item: -item[1])]


def _fallback_snippet(row: ChunkRow, terms: list[str], marks: tuple[str, str]) -> str:
    """For chunks found by meaning alone: the start of the passage around the first query word."""
    text = " ".join(row.text.split())
    lowered = text.lower()
    positions = [lowered.find(t) for t in terms if lowered.find(t) >= 0]
    start = max(0, min(positions) - 60) if positions else 0
    excerpt = text[start : start + SNIPPET_CHARS]
    if terms:
        pattern = re.compile(r"\b(" + "|".join(re.escape(t) for t in terms) + r")\w*", re.IGNORECASE)
        excerpt = pattern.sub(lambda m: f"{marks[0]}{m.group(0)}{marks[1]}", excerpt)
    prefix = "…" if start > 0 else ""
    suffix = "…" if start + SNIPPET_CHARS < len(text) else ""
    return prefix + excerpt + suffix
