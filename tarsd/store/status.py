"""How much the index holds: the counts a search reply and `tarsctl status` show."""

from __future__ import annotations

from tarsd.store.connection import Connections
from tarsd.store.vectors import Vectors


class Counts:
    """Row counts across the table families."""

    def __init__(self, db: Connections, vectors: Vectors):
        self.db = db
        self.vectors = vectors

    def coverage_counts(self) -> dict[str, int]:
        """notes, skipped, chunks, pending (vectors): cheap enough for every search reply.
        Counted again only after a commit: PRAGMA data_version on this thread's read
        connection changes exactly when the writer has committed something."""
        reader = self.db.reader()
        version = reader.execute("PRAGMA data_version").fetchall()[0][0]
        cached = getattr(self.db._local, "coverage", None)
        if cached is not None and cached[0] == version:
            return cached[1]
        one = lambda sql: reader.execute(sql).fetchall()[0][0]  # noqa: E731
        counts = {
            "notes": one("SELECT count(*) FROM files WHERE skipped = 0"),
            "skipped": one("SELECT count(*) FROM files WHERE skipped = 1"),
            "chunks": one("SELECT count(*) FROM chunks"),
            "pending": one("SELECT count(*) FROM chunks WHERE embedded = 0"),
        }
        self.db._local.coverage = (version, counts)
        return counts

    def counts(self) -> dict[str, int]:
        """Every table's rows, for `tarsctl status`: on this thread's read connection, so a status
        never fills the writer's 64 MB page cache (at 100,000 notes it did, and an idle tarsd kept
        it). The keyword and vector tables are counted in their shadow tables, one small row per
        passage: counting them directly read every passage's text (200 ms) and vector (90 ms)."""
        reader = self.db.reader()
        one = lambda sql: reader.execute(sql).fetchall()[0][0]  # noqa: E731
        named = "SELECT name FROM sqlite_master WHERE name IN ('chunk_vectors', 'chunk_vectors_rowids')"
        tables = {row[0] for row in reader.execute(named)}
        if "chunk_vectors_rowids" in tables:  # sqlite-vec's own list of the table's rows
            vectors = one("SELECT count(*) FROM chunk_vectors_rowids")
        else:
            vectors = one("SELECT count(*) FROM chunk_vectors") if "chunk_vectors" in tables else 0
        return {
            "files": one("SELECT count(*) FROM files WHERE skipped = 0"),
            "skipped": one("SELECT count(*) FROM files WHERE skipped = 1"),
            "chunks": one("SELECT count(*) FROM chunks"),
            "fts_rows": one("SELECT count(*) FROM chunks_fts_docsize"),  # FTS5's row per passage: its column sizes
            "vectors": vectors,
            "pending_vectors": one("SELECT count(*) FROM chunks WHERE embedded = 0"),
            "line_units": one("SELECT count(*) FROM line_units"),  # session logs' lines, recalled one by one (line_units.py)
            "pending_line_vectors": one("SELECT count(*) FROM line_units WHERE embedded = 0"),
            "cached_vectors": one("SELECT count(*) FROM embedding_cache"),
            "conflicts": one("SELECT count(*) FROM files WHERE conflict = 1"),
        }
