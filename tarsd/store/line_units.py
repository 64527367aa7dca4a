"""The line units: each line of a note recalled by its lines (a session log: one turn a line,
markdown/line_units.py) with a vector of its own, beside the passages that hold it.

Tables line_units (the note's file, the line, the text the embedder sees and its content hash)
and line_vectors (one vector per embedded unit, in the passages' vector space, which the
embedding cache shares by content hash). Their vectors are held in memory as the passages' are
(matrix.py), in an index of their own: a search for passages never meets a line, and recall
(tarsd/search/recall.py) finds turns by their own meaning. No keyword rows: recall scores a
line's words itself, with the passages' keyword statistics.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from tarsd.markdown.line_units import LineUnit
from tarsd.store.connection import Connections
from tarsd.store.filters import NO_FILTER, Filter, filter_sql
from tarsd.store.matrix import LINES_DROPPED, LINES_PUT, LoadedVectors, VectorIndex


class LineUnits:
    """line_units and line_vectors, over the store's connections."""

    def __init__(self, db: Connections):
        self.db = db

    def vector_index(self) -> VectorIndex:
        """The line vectors in memory, loaded from the index on first use."""
        vectors = self.db.line_vectors
        if not vectors.loaded:
            vectors.load_with(self._read_vectors)
        return vectors

    def _read_vectors(self) -> LoadedVectors:
        # As vectors.py reads the passages': this thread's reader only, straight into the matrix.
        reader = self.db.reader()
        meta = reader.execute("SELECT value FROM meta WHERE key = 'vector_dims'").fetchall()
        dims = int(meta[0][0]) if meta and meta[0][0] else 0
        capacity = reader.execute("SELECT count(*) FROM line_vectors").fetchall()[0][0]
        loaded = None
        for rowid, blob in reader.execute("SELECT id, vector FROM line_vectors"):
            if loaded is None:
                loaded = LoadedVectors(dims or len(blob) // 4, capacity)
            loaded.append(rowid, blob)
        return loaded if loaded is not None else LoadedVectors(dims)

    # ---- writes (inside the caller's transaction) ----

    def insert(self, file_id: int, units: list[LineUnit], cached: dict[str, bytes], has_vectors: bool) -> int:
        """A note's units, with the vectors ``cached`` holds for them. Returns the number left pending."""
        if not units:
            return 0
        conn = self.db.conn
        first = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM line_units").fetchall()[0][0]
        vectors = [cached.get(unit.content_hash) if has_vectors else None for unit in units]
        conn.executemany(
            "INSERT INTO line_units(id, file_id, line, content_hash, text, embedded) VALUES (?, ?, ?, ?, ?, ?)",
            [(first + i, file_id, u.line, u.content_hash, u.text, int(vectors[i] is not None)) for i, u in enumerate(units)],
        )
        found = [(first + i, vector) for i, vector in enumerate(vectors) if vector is not None]
        if found:
            conn.executemany("INSERT INTO line_vectors(id, vector) VALUES (?, ?)", found)
            self.db._change(LINES_PUT, found)
        return len(units) - len(found)

    def delete(self, file_id: int) -> None:
        conn = self.db.conn
        ids = [r[0] for r in conn.execute("SELECT id FROM line_units WHERE file_id = ?", (file_id,))]
        if not ids:
            return
        marks = ",".join("?" * len(ids))
        conn.execute(f"DELETE FROM line_vectors WHERE id IN ({marks})", ids)
        conn.execute("DELETE FROM line_units WHERE file_id = ?", (file_id,))
        self.db._change(LINES_DROPPED, ids)

    def attach(self, content_hash: str, vector: bytes, limit: int) -> list[int]:
        """Give up to ``limit`` pending units with this hash their vector; their ids."""
        conn = self.db.conn
        ids = [
            r[0] for r in conn.execute("SELECT id FROM line_units WHERE content_hash = ? AND embedded = 0 LIMIT ?", (content_hash, limit))
        ]
        for unit in ids:
            conn.execute("INSERT OR REPLACE INTO line_vectors(id, vector) VALUES (?, ?)", (unit, vector))
            conn.execute("UPDATE line_units SET embedded = 1 WHERE id = ?", (unit,))
        if ids:
            self.db._change(LINES_PUT, [(unit, vector) for unit in ids])
        return ids

    def attach_cached(self, fingerprint: str) -> int:
        conn = self.db.conn
        rows = conn.execute(
            """SELECT l.id, e.vector FROM line_units l
               JOIN embedding_cache e ON e.fingerprint = ? AND e.content_hash = l.content_hash WHERE l.embedded = 0""",
            (fingerprint,),
        ).fetchall()
        for unit, vector in rows:
            conn.execute("INSERT OR REPLACE INTO line_vectors(id, vector) VALUES (?, ?)", (unit, vector))
            conn.execute("UPDATE line_units SET embedded = 1 WHERE id = ?", (unit,))
        if rows:
            self.db._change(LINES_PUT, rows)
        return len(rows)

    def reset(self) -> None:
        """A new vector space: every unit waits for a vector again (the caller records "reset")."""
        self.db.conn.execute("DELETE FROM line_vectors")
        self.db.conn.execute("UPDATE line_units SET embedded = 0 WHERE embedded = 1")

    # ---- reads ----

    def pending(self, before_id: int, limit: int) -> list[tuple[int, str, str]]:
        """(id, content hash, text) of units without a vector, ids below ``before_id``, newest first."""
        with self.db.lock:
            return self.db.conn.execute(
                "SELECT id, content_hash, text FROM line_units WHERE embedded = 0 AND id < ? ORDER BY id DESC LIMIT ?", (before_id, limit)
            ).fetchall()

    def pending_count(self) -> int:
        return self.db.reader().execute("SELECT count(*) FROM line_units WHERE embedded = 0").fetchall()[0][0]

    def search(self, vector: bytes, limit: int, where: Filter = NO_FILTER) -> list[tuple[int, float]]:
        """(unit id, cosine) of the units nearest ``vector``, nearest first; filters apply before the cut."""
        allowed = None
        if where:
            clauses, params = filter_sql(where, self.db.collection_id)
            sql = f"SELECT l.id FROM line_units l JOIN files f ON f.id = l.file_id WHERE l.embedded = 1 AND {clauses}"
            allowed = {row[0] for row in self.db.reader().execute(sql, params)}
        return self.vector_index().search(np.frombuffer(vector, dtype=np.float32), limit, allowed)

    def similarities(self, vector: bytes, ids: Iterable[int]) -> dict[int, float]:
        return self.vector_index().similarities(np.frombuffer(vector, dtype=np.float32), ids)

    def where(self, ids: list[int]) -> dict[int, tuple[int, int]]:
        """unit id -> (file id, line) of each unit that exists."""
        found: dict[int, tuple[int, int]] = {}
        reader = self.db.reader()
        for start in range(0, len(ids), 500):
            batch = ids[start : start + 500]
            marks = ",".join("?" * len(batch))
            for unit, file_id, line in reader.execute(f"SELECT id, file_id, line FROM line_units WHERE id IN ({marks})", batch):
                found[unit] = (file_id, line)
        return found

    def of_files(self, file_ids: Iterable[int]) -> dict[tuple[int, int], int]:
        """(file id, line) -> unit id, for every unit of the given notes."""
        wanted = sorted(set(file_ids))
        found: dict[tuple[int, int], int] = {}
        reader = self.db.reader()
        for batch in _batched(wanted, 500):
            marks = ",".join("?" * len(batch))
            for unit, file_id, line in reader.execute(f"SELECT id, file_id, line FROM line_units WHERE file_id IN ({marks})", batch):
                found[(file_id, line)] = unit
        return found


def _batched(items: list[int], size: int):
    for start in range(0, len(items), size):
        yield tuple(items[start : start + size])
