"""The files table: one row per vault file, with what the indexer compares to the disk
(FileState) and what it writes (FileMeta); replacing a note's rows (file, chunks, keyword
rows, vectors, note graph) in one write, recording a file that was skipped, and deleting one."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tarsd.markdown.chunker import Chunk
from tarsd.markdown.line_units import LineUnit
from tarsd.markdown.links import Link
from tarsd.store.chunks import Chunks
from tarsd.store.connection import Connections
from tarsd.store.fts import title_terms
from tarsd.store.links import NoteGraph
from tarsd.store.passage_notes import NOTE_DROPPED
from tarsd.store.vectors import Vectors


@dataclass(frozen=True, slots=True)
class FileState:
    id: int
    mtime_ns: int
    size: int
    content_hash: str | None
    chunker: str
    skipped: bool


@dataclass(frozen=True, slots=True)
class FileMeta:
    path: str
    title: str
    memory_type: str
    content_hash: str | None
    mtime_ns: int
    size: int
    chunker: str
    tags: list[str]
    aliases: list[str]
    conflict: bool
    problem: str | None = None
    links: list[Link] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # front-matter title and aliases: what links may call the note
    date: float | None = None  # when the note took place, when it says (markdown/note_dates.py)


class Files:
    """The files table, and a note's rows in every other table written with it."""

    def __init__(self, db: Connections, chunks: Chunks, graph: NoteGraph, vectors: Vectors):
        self.db = db
        self.chunks = chunks
        self.graph = graph
        self.vectors = vectors

    def file_states(self) -> dict[str, FileState]:
        # Row by row, not fetchall(), and one string for each way of chunking: at 100,000 notes
        # the rows were 11 MB more at once, and the chunkers' copies 10 MB. Each sync holds these
        # while it runs; what else tarsd makes meanwhile is what keeps freed memory afterwards.
        chunkers: dict[str, str] = {}
        with self.db.lock:
            sql = "SELECT path, id, mtime_ns, size, content_hash, chunker, skipped FROM files WHERE collection_id = ?"
            return {
                r[0]: FileState(r[1], r[2], r[3], r[4], chunkers.setdefault(r[5], r[5]), bool(r[6]))
                for r in self.db.conn.execute(sql, (self.db.collection_id,))
            }

    def file_state(self, path: str) -> FileState | None:
        with self.db.lock:
            rows = self.db.conn.execute(
                "SELECT id, mtime_ns, size, content_hash, chunker, skipped FROM files WHERE collection_id = ? AND path = ?",
                (self.db.collection_id, path),
            ).fetchall()
        return FileState(rows[0][0], rows[0][1], rows[0][2], rows[0][3], rows[0][4], bool(rows[0][5])) if rows else None

    def uses_other_chunking(self, chunker: str) -> bool:
        """True if some indexed note was chunked another way (it is re-chunked at the next sync)."""
        sql = "SELECT 1 FROM files WHERE skipped = 0 AND chunker != ? LIMIT 1"
        return bool(self.db.reader().execute(sql, (chunker,)).fetchall())

    def touch_file(self, path: str, mtime_ns: int, size: int) -> None:
        """Same content, new stat (a touch, or a copy preserving bytes): no re-chunking."""
        with self.db._writing():
            sql = "UPDATE files SET mtime_ns = ?, size = ? WHERE collection_id = ? AND path = ?"
            self.db.conn.execute(sql, (mtime_ns, size, self.db.collection_id, path))

    def replace_file(self, meta: FileMeta, chunks: list[Chunk], cached: dict[str, bytes], units: list[LineUnit] = ()) -> int:
        """Write a file's new chunks (and line units) in one transaction. Those whose vectors are in
        ``cached`` (by content hash) get them at once; the rest are left pending.
        Any rows the file had are replaced. Returns the number left pending."""
        values = (
            meta.title,
            meta.memory_type,
            meta.content_hash,
            meta.mtime_ns,
            meta.size,
            time.time(),
            meta.chunker,
            " ".join(meta.tags),
            " ".join(meta.aliases),
            int(meta.conflict),
            meta.problem,
            meta.date,
        )
        conn = self.db.conn
        with self.db._writing():
            has_vectors = self.vectors.has_vector_table()
            # Looked up here, not taken from the caller: its snapshot may be stale (a save
            # committed in the middle of a long sync). A new file has nothing to delete.
            sql = "SELECT id FROM files WHERE collection_id = ? AND path = ?"
            found_id = conn.execute(sql, (self.db.collection_id, meta.path)).fetchall()
            if found_id:
                file_id = found_id[0][0]
                conn.execute(
                    """UPDATE files SET title = ?, memory_type = ?, content_hash = ?, mtime_ns = ?, size = ?, indexed_at = ?,
                         chunker = ?, tags = ?, aliases = ?, conflict = ?, problem = ?, note_date = ?, skipped = 0 WHERE id = ?""",
                    (*values, file_id),
                )
                self.chunks.delete(file_id)
                self.graph.delete(file_id)
            else:
                # No RETURNING: SQLite runs such a statement in a statement savepoint, and
                # at every savepoint FTS5 writes the keyword rows it holds in memory as a new
                # segment. That made a segment per note and merging them half of a cold index
                # (bench/index_cost.py: 1,900 notes/s with it, 2,200 without and fewer commits).
                conn.execute(
                    """INSERT INTO files(title, memory_type, content_hash, mtime_ns, size, indexed_at, chunker, tags, aliases,
                                         conflict, problem, note_date, skipped, collection_id, path)
                       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)""",
                    (*values, self.db.collection_id, meta.path),
                )
                file_id = conn.last_insert_rowid()
            self.graph.insert(file_id, meta.links, meta.tags, meta.names)
            titles = title_terms(meta.title, meta.aliases, meta.tags, meta.path)
            return self.chunks.insert(file_id, meta.path, titles, chunks, cached, has_vectors, units)

    def record_skipped(self, path: str, mtime_ns: int, size: int, content_hash: str | None, problem: str, memory_type: str) -> None:
        """A file that could not be indexed: no chunks, but a row saying why."""
        with self.db._writing():
            state = self.file_state(path)
            if state is not None:
                self.chunks.delete(state.id)
                self.graph.delete(state.id)
            self.db.conn.execute(
                """INSERT INTO files(collection_id, path, memory_type, content_hash, mtime_ns, size, indexed_at, skipped, problem)
                   VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?)
                   ON CONFLICT (collection_id, path) DO UPDATE SET
                     content_hash = excluded.content_hash, mtime_ns = excluded.mtime_ns, size = excluded.size,
                     indexed_at = excluded.indexed_at, skipped = 1, problem = excluded.problem, title = '', chunker = ''""",
                (self.db.collection_id, path, memory_type, content_hash, mtime_ns, size, time.time(), problem),
            )

    def delete_file(self, path: str) -> bool:
        with self.db._writing():
            state = self.file_state(path)
            if state is None:
                return False
            self.chunks.delete(state.id)
            self.db.conn.execute("DELETE FROM files WHERE id = ?", (state.id,))
            self.db._change(NOTE_DROPPED, state.id)
            return True

    def problems(self) -> list[tuple[str, bool, str]]:
        """(path, skipped, problem) for files that were skipped or repaired. Every status asks: on
        this thread's read connection, whose page cache is small (on the writer's, each status
        filled 30 MB of it at 100,000 notes, and an idle tarsd kept it)."""
        rows = self.db.reader().execute("SELECT path, skipped, problem FROM files WHERE problem IS NOT NULL ORDER BY path")
        return [(r[0], bool(r[1]), r[2]) for r in rows]
