"""The SQLite index behind one facade, the Store: every SQL statement tars runs on it is in
this package, one module per table family, and callers import all of it from here.

One database per vault, outside the vault. It is a cache: deleting it and syncing again
rebuilds everything from the notes. Each file's rows (file, chunks, FTS, vectors) change in
one transaction, so the tables never disagree, even after a kill -9.

The Store is its Connections (connection.py: connections, transactions, meta) with the table
families composed on them; its methods hand each call to the family that owns the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from tarsd.config.budget import SQLITE_CACHE_MB
from tarsd.markdown.chunker import Chunk
from tarsd.markdown.line_units import LineUnit
from tarsd.store.chunks import ChunkRow, Chunks, NoteLines
from tarsd.store.connection import (
    CONNECTION_PRAGMAS,
    PHRASE_IN_ROW,
    PHRASE_IN_TITLE,
    READER_PRAGMAS,
    WRITER_BUSY_TIMEOUT_MS,
    Batch,
    Connections,
    load_vec_extension,
    make_private,
)
from tarsd.store.errors import StoreError, explain
from tarsd.store.files import FileMeta, Files, FileState
from tarsd.store.filters import NO_FILTER, Filter
from tarsd.store.fts import BM25_WEIGHTS, FTS_TOKENIZER_ARGS, Keywords
from tarsd.store.line_units import LineUnits
from tarsd.store.links import NoteGraph
from tarsd.store.matrix import VectorIndex
from tarsd.store.schema import COLLECTION, MIGRATIONS, SCHEMA_VERSION
from tarsd.store.status import Counts
from tarsd.store.vectors import VECTOR_TABLE_LAYOUT, VECTOR_WRITE_ROWS, Vectors

__all__ = [
    "BM25_WEIGHTS",
    "COLLECTION",
    "CONNECTION_PRAGMAS",
    "FTS_TOKENIZER_ARGS",
    "MIGRATIONS",
    "NO_FILTER",
    "PHRASE_IN_ROW",
    "PHRASE_IN_TITLE",
    "READER_PRAGMAS",
    "SCHEMA_VERSION",
    "VECTOR_TABLE_LAYOUT",
    "VECTOR_WRITE_ROWS",
    "WRITER_BUSY_TIMEOUT_MS",
    "Batch",
    "ChunkRow",
    "FileMeta",
    "FileState",
    "Filter",
    "NoteLines",
    "Store",
    "StoreError",
    "explain",
    "load_vec_extension",
    "make_private",
]


class Store(Connections):
    """All SQL lives behind it. Thread-safe: one writing connection, calls serialised by a lock."""

    def __init__(self, path: Path, cache_mb: int = SQLITE_CACHE_MB):
        super().__init__(path, cache_mb)
        self._lines = LineUnits(self)
        self._vector_tables = Vectors(self, self._lines)
        self._counts = Counts(self, self._vector_tables)
        self._keywords = Keywords(self, self._counts)
        self._chunks = Chunks(self, self._keywords, self._vector_tables, self._lines)
        self._files = Files(self, self._chunks, NoteGraph(self), self._vector_tables)

    # ---- files (files.py) ----

    def file_states(self) -> dict[str, FileState]:
        return self._files.file_states()

    def file_state(self, path: str) -> FileState | None:
        return self._files.file_state(path)

    def uses_other_chunking(self, chunker: str) -> bool:
        return self._files.uses_other_chunking(chunker)

    def touch_file(self, path: str, mtime_ns: int, size: int) -> None:
        self._files.touch_file(path, mtime_ns, size)

    def replace_file(self, meta: FileMeta, chunks: list[Chunk], cached: dict[str, bytes], units: list[LineUnit] = ()) -> int:
        return self._files.replace_file(meta, chunks, cached, units)

    def record_skipped(self, path: str, mtime_ns: int, size: int, content_hash: str | None, problem: str, memory_type: str) -> None:
        self._files.record_skipped(path, mtime_ns, size, content_hash, problem, memory_type)

    def delete_file(self, path: str) -> bool:
        return self._files.delete_file(path)

    def problems(self) -> list[tuple[str, bool, str]]:
        return self._files.problems()

    # ---- vectors (vectors.py) ----

    def vector_index(self) -> VectorIndex:
        return self._vector_tables.vector_index()

    def has_vector_table(self) -> bool:
        return self._vector_tables.has_vector_table()

    def use_vector_space(self, fingerprint: str, dims: int) -> bool:
        return self._vector_tables.use_vector_space(fingerprint, dims)

    def cached_vectors(self, fingerprint: str | None, hashes: Iterable[str]) -> dict[str, bytes]:
        return self._vector_tables.cached_vectors(fingerprint, hashes)

    def pending_batches(self, batch_size: int) -> Iterator[list[tuple[str, str]]]:
        return self._vector_tables.pending_batches(batch_size)

    def has_pending_vectors(self) -> bool:
        return self._vector_tables.has_pending_vectors()

    def pending_count(self) -> int:
        return self._vector_tables.pending_count()

    def prune_cache(self) -> int:
        return self._vector_tables.prune_cache()

    def store_vectors(self, fingerprint: str, vectors: dict[str, bytes]) -> int:
        return self._vector_tables.store_vectors(fingerprint, vectors)

    def attach_cached(self, fingerprint: str) -> int:
        return self._vector_tables.attach_cached(fingerprint)

    def vec_search(self, vector: bytes, limit: int, where: Filter = NO_FILTER) -> list[tuple[int, float]]:
        return self._vector_tables.vec_search(vector, limit, where)

    def similarities(self, vector: bytes, ids: list[int]) -> dict[int, float]:
        return self._vector_tables.similarities(vector, ids)

    # ---- passages (chunks.py) and keywords (fts.py) ----

    def chunk_rows(self, ids: list[int]) -> dict[int, ChunkRow]:
        return self._chunks.chunk_rows(ids)

    def chunk_notes(self, ids: list[int]) -> dict[int, tuple[int, str]]:
        return self._chunks.chunk_notes(ids)

    def note_lines(self, wanted: dict[int, set[int]]) -> dict[int, NoteLines]:
        return self._chunks.note_lines(wanted)

    def note_vector(self, file_id: int) -> bytes | None:
        return self._chunks.note_vector(file_id)

    def nearest_notes(self, vector: bytes, limit: int, skip_file: int) -> list[tuple[int, float]]:
        return self._chunks.nearest_notes(vector, limit, skip_file)

    def fts_search(self, match: str, limit: int, where: Filter = NO_FILTER) -> list[tuple[int, float, bytes]]:
        return self._keywords.fts_search(match, limit, where)

    def keyword_tokens(self, text: str) -> list[str]:
        return self._keywords.keyword_tokens(text)

    def passage_frequencies(self, tokens: list[str]) -> tuple[int, dict[str, int]]:
        return self._keywords.passage_frequencies(tokens)

    def keyword_token_spans(self, text: str) -> list[tuple[int, int, str]]:
        return self._keywords.keyword_token_spans(text)

    # ---- line units (line_units.py) ----

    def line_search(self, vector: bytes, limit: int, where: Filter = NO_FILTER) -> list[tuple[int, float]]:
        return self._lines.search(vector, limit, where)

    def line_similarities(self, vector: bytes, ids: Iterable[int]) -> dict[int, float]:
        return self._lines.similarities(vector, ids)

    def line_places(self, ids: list[int]) -> dict[int, tuple[int, int]]:
        return self._lines.where(ids)

    def line_units_of(self, file_ids: Iterable[int]) -> dict[tuple[int, int], int]:
        return self._lines.of_files(file_ids)

    # ---- status (status.py) ----

    def coverage_counts(self) -> dict[str, int]:
        return self._counts.coverage_counts()

    def counts(self) -> dict[str, int]:
        return self._counts.counts()
