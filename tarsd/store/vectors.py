"""The vector tables: chunk_vectors (sqlite-vec, one row per embedded passage, in the current
embedder's space), embedding_cache (vectors by content hash, so re-chunking never re-embeds),
the passages (and line units, line_units.py) still waiting for a vector, and vector search over
the in-memory matrix (matrix.py) that mirrors chunk_vectors."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from tarsd.markdown.chunker import embedding_input
from tarsd.store.connection import Connections
from tarsd.store.filters import NO_FILTER, Filter, filter_sql
from tarsd.store.line_units import LineUnits
from tarsd.store.matrix import DROPPED, PUT, RESET, LoadedVectors, VectorIndex

# The vector table's layout; a change rebuilds it from the embedding cache (no re-embedding).
VECTOR_TABLE_LAYOUT = "l2-v2"

# Chunks given their vectors in one transaction by store_vectors: short enough that a chat's
# write never waits long behind it.
VECTOR_WRITE_ROWS = 256


def _space(fingerprint: str) -> str:
    return f"{fingerprint}#{VECTOR_TABLE_LAYOUT}"


class Vectors:
    """chunk_vectors, embedding_cache and the pending passages and line units, over the store's connections."""

    def __init__(self, db: Connections, lines: LineUnits):
        self.db = db
        self.lines = lines
        self._has_vectors: bool | None = None

    def vector_index(self) -> VectorIndex:
        """The in-memory vectors, loaded from the index on first use."""
        vectors = self.db.vectors
        if not vectors.loaded:
            vectors.load_with(self._read_vectors)
        return vectors

    def _read_vectors(self) -> LoadedVectors:
        # Runs holding the matrix's lock, through this thread's reader only: a writer applies its
        # commit to the matrix while holding the store's lock, so taking that lock here (get_meta
        # does) would deadlock the first search against the first vectors written.
        reader = self.db.reader()
        if not reader.execute("SELECT 1 FROM sqlite_master WHERE name = 'chunk_vectors'").fetchall():
            return LoadedVectors(0)
        meta = reader.execute("SELECT value FROM meta WHERE key = 'vector_dims'").fetchall()
        dims = int(meta[0][0]) if meta and meta[0][0] else 0
        # Each row goes straight into a preallocated matrix: read as a list of (id, bytes) first,
        # 400,000 rows held 1.1 GB of Python objects beside the matrix, and glibc kept that
        # memory after they were freed (bench/search_scale.py).
        capacity = reader.execute("SELECT count(*) FROM chunk_vectors").fetchall()[0][0]
        loaded = None
        for rowid, blob in reader.execute("SELECT rowid, embedding FROM chunk_vectors"):
            if loaded is None:
                loaded = LoadedVectors(dims or len(blob) // 4, capacity)
            loaded.append(rowid, blob)
        return loaded if loaded is not None else LoadedVectors(dims)

    def has_vector_table(self) -> bool:
        if self._has_vectors is None:  # asked on every file written: remember the answer
            with self.db.lock:
                self._has_vectors = bool(self.db.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'chunk_vectors'").fetchall())
        return self._has_vectors

    def use_vector_space(self, fingerprint: str, dims: int) -> bool:
        """Make chunk_vectors hold vectors of this embedder. A different embedder means a new,
        empty table and every chunk pending again: vector spaces never mix. Returns True if reset."""
        db = self.db
        with db._writing():
            if db.get_meta("vector_fingerprint") == _space(fingerprint) and self.has_vector_table():
                return False
            db.conn.execute("DROP TABLE IF EXISTS chunk_vectors")
            # Euclidean distance (sqlite-vec's fastest) ranks unit vectors exactly as cosine does.
            db.conn.execute(f"CREATE VIRTUAL TABLE chunk_vectors USING vec0(embedding float[{int(dims)}])")
            self._has_vectors = True
            db.conn.execute("UPDATE chunks SET embedded = 0 WHERE embedded = 1")
            self.lines.reset()
            db.set_meta("vector_fingerprint", _space(fingerprint))
            db.set_meta("vector_dims", str(int(dims)))
            db._change(RESET, int(dims))
            return True

    def add(self, rows: list[tuple[int, bytes]]) -> None:
        """(chunk id, vector) rows of new chunks, inside the caller's write."""
        if rows:
            self.db.conn.executemany("INSERT INTO chunk_vectors(rowid, embedding) VALUES (?, ?)", rows)
            self.db._change(PUT, rows)

    def drop(self, ids: list[int], marks: str) -> None:
        """The vectors of deleted chunks (``marks``: one '?' per id), inside the caller's write."""
        if self.has_vector_table():
            self.db.conn.execute(f"DELETE FROM chunk_vectors WHERE rowid IN ({marks})", ids)
            self.db._change(DROPPED, ids)

    def cached_vectors(self, fingerprint: str | None, hashes: Iterable[str]) -> dict[str, bytes]:
        if fingerprint is None:
            return {}
        found: dict[str, bytes] = {}
        wanted = list(set(hashes))
        with self.db.lock:
            for start in range(0, len(wanted), 500):
                batch = wanted[start : start + 500]
                marks = ",".join("?" * len(batch))
                for content_hash, vector in self.db.conn.execute(
                    f"SELECT content_hash, vector FROM embedding_cache WHERE fingerprint = ? AND content_hash IN ({marks})",
                    (fingerprint, *batch),
                ):
                    found[content_hash] = vector
        return found

    def pending_batches(self, batch_size: int) -> Iterator[list[tuple[str, str]]]:
        """Distinct (content_hash, text the embedder sees) of chunks without a vector, a batch at a time,
        newest chunks first (what was just saved is what the user is about to search for); then the
        line units' (search needs the passages, recall's lines help it).
        The cursor walks ids downwards, so each pending row is read once per pass."""
        seen: set[str] = set()
        yield from self._pending_chunks(batch_size, seen)
        last_id = 1 << 62
        while True:
            rows = self.lines.pending(last_id, batch_size)
            if not rows:
                return
            last_id = rows[-1][0]
            batch = []
            for _, content_hash, text in rows:
                if content_hash not in seen:
                    seen.add(content_hash)
                    batch.append((content_hash, text))
            if batch:
                yield batch

    def _pending_chunks(self, batch_size: int, seen: set[str]) -> Iterator[list[tuple[str, str]]]:
        last_id = None
        while True:
            with self.db.lock:
                rows = self.db.conn.execute(
                    "SELECT id, content_hash, embed_context, text FROM chunks WHERE embedded = 0 AND id < ? ORDER BY id DESC LIMIT ?",
                    (last_id if last_id is not None else 1 << 62, batch_size),
                ).fetchall()
            if not rows:
                return
            last_id = rows[-1][0]
            batch = []
            for _, content_hash, context, text in rows:
                if content_hash not in seen:
                    seen.add(content_hash)
                    batch.append((content_hash, embedding_input(context, text)))
            if batch:
                yield batch

    def has_pending_vectors(self) -> bool:
        reader = self.db.reader()
        return bool(
            reader.execute("SELECT 1 FROM chunks WHERE embedded = 0 LIMIT 1").fetchall()
            or reader.execute("SELECT 1 FROM line_units WHERE embedded = 0 LIMIT 1").fetchall()
        )

    def pending_count(self) -> int:
        """Passages and line units waiting for a vector."""
        return self.db.reader().execute("SELECT count(*) FROM chunks WHERE embedded = 0").fetchall()[0][0] + self.lines.pending_count()

    def prune_cache(self) -> int:
        """Forget cached vectors no chunk or line unit uses any more (old edits of notes)."""
        with self.db._writing():
            self.db.conn.execute(
                """DELETE FROM embedding_cache WHERE content_hash NOT IN (SELECT content_hash FROM chunks)
                   AND content_hash NOT IN (SELECT content_hash FROM line_units)"""
            )
            return self.db.conn.changes()

    def store_vectors(self, fingerprint: str, vectors: dict[str, bytes]) -> int:
        """Cache vectors by content hash and attach them to every pending chunk with that hash.
        A chunk deleted or re-chunked meanwhile simply has no pending row any more.

        At most VECTOR_WRITE_ROWS chunks per transaction: one text repeated thousands of times
        (a 5 MB line of one word) held the write lock for seconds, and a chat's write waiting on
        it failed with "database is locked" on a busy box. A chunk and its vector always go together."""
        db = self.db
        attached = 0
        for content_hash, vector in vectors.items():
            while True:
                with db._writing():
                    if db.get_meta("vector_fingerprint") != _space(fingerprint):
                        return attached  # the embedder changed while this batch was embedding
                    db.conn.execute(
                        "INSERT OR REPLACE INTO embedding_cache(fingerprint, content_hash, vector) VALUES (?, ?, ?)",
                        (fingerprint, content_hash, vector),
                    )
                    ids = [
                        r[0]
                        for r in db.conn.execute(
                            "SELECT id FROM chunks WHERE content_hash = ? AND embedded = 0 LIMIT ?", (content_hash, VECTOR_WRITE_ROWS)
                        )
                    ]
                    for chunk_id in ids:
                        db.conn.execute("INSERT INTO chunk_vectors(rowid, embedding) VALUES (?, ?)", (chunk_id, vector))
                        db.conn.execute("UPDATE chunks SET embedded = 1 WHERE id = ?", (chunk_id,))
                    db._change(PUT, [(chunk_id, vector) for chunk_id in ids])
                    units = self.lines.attach(content_hash, vector, VECTOR_WRITE_ROWS - len(ids)) if len(ids) < VECTOR_WRITE_ROWS else []
                attached += len(ids) + len(units)
                if len(ids) + len(units) < VECTOR_WRITE_ROWS:
                    break
        return attached

    def attach_cached(self, fingerprint: str) -> int:
        """Attach cached vectors to pending chunks (after an embedder switch back, say)."""
        db = self.db
        with db._writing():
            rows = db.conn.execute(
                """SELECT c.id, e.vector FROM chunks c
                   JOIN embedding_cache e ON e.fingerprint = ? AND e.content_hash = c.content_hash
                   WHERE c.embedded = 0""",
                (fingerprint,),
            ).fetchall()
            for chunk_id, vector in rows:
                db.conn.execute("INSERT INTO chunk_vectors(rowid, embedding) VALUES (?, ?)", (chunk_id, vector))
                db.conn.execute("UPDATE chunks SET embedded = 1 WHERE id = ?", (chunk_id,))
            db._change(PUT, rows)
            return len(rows) + self.lines.attach_cached(fingerprint)

    def vec_search(self, vector: bytes, limit: int, where: Filter = NO_FILTER) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) nearest first; filters apply before the top-k cut."""
        allowed = None
        if where:
            clauses, params = filter_sql(where, self.db.collection_id)
            sql = f"SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.embedded = 1 AND {clauses}"
            allowed = {row[0] for row in self.db.reader().execute(sql, params)}
        return self.vector_index().search(np.frombuffer(vector, dtype=np.float32), limit, allowed)

    def similarities(self, vector: bytes, ids: list[int]) -> dict[int, float]:
        """The exact cosine of each passage in ``ids`` that has a vector."""
        return self.vector_index().similarities(np.frombuffer(vector, dtype=np.float32), ids)
