"""The SQLite index: schema, migrations and every SQL statement tars runs.

One database per vault, outside the vault. It is a cache: deleting it and syncing again
rebuilds everything from the notes. Each file's rows (file, chunks, FTS, vectors) change in
one transaction, so the tables never disagree, even after a kill -9.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import apsw

from .chunker import Chunk

log = logging.getLogger(__name__)

SCHEMA_VERSION = 3
COLLECTION = "vault"

_SCHEMA_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE collections (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, root TEXT NOT NULL);
CREATE TABLE files (
    id INTEGER PRIMARY KEY,
    collection_id INTEGER NOT NULL REFERENCES collections(id),
    path TEXT NOT NULL,
    title TEXT NOT NULL DEFAULT '',
    memory_type TEXT NOT NULL DEFAULT 'note',
    content_hash TEXT,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    indexed_at REAL NOT NULL,
    chunker TEXT NOT NULL DEFAULT '',
    tags TEXT NOT NULL DEFAULT '',
    aliases TEXT NOT NULL DEFAULT '',
    conflict INTEGER NOT NULL DEFAULT 0,
    skipped INTEGER NOT NULL DEFAULT 0,  -- 1: not indexed, see problem
    problem TEXT,                          -- why it was skipped, or what was repaired
    UNIQUE (collection_id, path)
);
CREATE TABLE chunks (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    heading_path TEXT NOT NULL,
    text TEXT NOT NULL,
    embed_text TEXT NOT NULL,
    embedded INTEGER NOT NULL DEFAULT 0   -- 1: has a row in chunk_vectors
);
CREATE INDEX chunks_file ON chunks(file_id, seq);
CREATE INDEX chunks_hash ON chunks(content_hash);
CREATE INDEX chunks_pending ON chunks(id) WHERE embedded = 0;
CREATE VIRTUAL TABLE chunks_fts USING fts5(title, headings, body, tokenize = 'porter unicode61');
CREATE TABLE embedding_cache (
    fingerprint TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (fingerprint, content_hash)
) WITHOUT ROWID;
"""

# Version 2: conversations survive a daemon restart.
_SCHEMA_V2 = """
CREATE TABLE conversations (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    summary TEXT NOT NULL DEFAULT '',   -- the model's summary of compacted messages
    context TEXT NOT NULL DEFAULT '',   -- relevant notes found with the opening message
    logged_seq INTEGER NOT NULL DEFAULT 0  -- messages up to this seq are in a session log
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    body BLOB NOT NULL,                 -- a msgspec-JSON ChatMessage
    compacted INTEGER NOT NULL DEFAULT 0,
    UNIQUE (conversation_id, seq)
);
"""

# Version 3: vectors of memory lines for dedup and selective recall (tarsd/memory_vectors.py
# holds its SQL). A table of their own: prune_cache keeps only vectors of chunks in use.
_SCHEMA_MEMORY_VECTORS = """
CREATE TABLE memory_line_vectors (
    fingerprint TEXT NOT NULL,   -- the embedder's
    line_hash TEXT NOT NULL,     -- sha256 of the normalised line (tarsd/facts.py key)
    vector BLOB NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (fingerprint, line_hash)
) WITHOUT ROWID;
"""

MIGRATIONS = {1: _SCHEMA_V1, 2: _SCHEMA_V2, 3: _SCHEMA_MEMORY_VECTORS}

CONNECTION_PRAGMAS = (
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",  # in WAL mode: durable at checkpoints, never corrupt
    "PRAGMA foreign_keys = ON",
    "PRAGMA cache_size = -65536",  # up to 64 MB of pages: FTS merges and searches stay in memory
)  # version -> SQL that brings version-1 up to it


# The vector table's layout; a change rebuilds it from the embedding cache (no re-embedding).
VECTOR_TABLE_LAYOUT = "l2-v2"


def _space(fingerprint: str) -> str:
    return f"{fingerprint}#{VECTOR_TABLE_LAYOUT}"


class StoreError(Exception):
    """The database cannot be used; the message says why and what to do."""


def explain(exc: BaseException, db_path: Path) -> str:
    """What a database failure means for the user and what to do, instead of apsw's words."""
    if isinstance(exc, apsw.FullError) or (isinstance(exc, OSError) and exc.errno == errno.ENOSPC):
        try:
            free = f"{shutil.disk_usage(db_path.parent).free / 1e6:.1f} MB free"
        except OSError:
            free = "free space unknown"
        return (
            f"the disk holding the index {db_path} is full ({free}): free some space, or set [index] db_path "
            "to another disk; tars retries on its own"
        )
    if isinstance(exc, (apsw.BusyError, apsw.LockedError)):
        return f"the index {db_path} is locked by another program: close it (an open sqlite3 shell?); tars retries on its own"
    if isinstance(exc, apsw.CantOpenError):
        return f"cannot open the index {db_path} (too many open files, or the folder is gone): {exc}; tars retries on its own"
    if isinstance(exc, apsw.ReadOnlyError):
        return f"the index {db_path} is read-only: make it writable or set [index] db_path elsewhere"
    if isinstance(exc, (apsw.CorruptError, apsw.NotADBError)):
        return f"the index {db_path} is damaged ({exc}): stop tarsd, delete the file and start again (it is rebuilt from the vault)"
    return f"{type(exc).__name__}: {exc}"


def make_private(db_path: Path) -> None:
    """The index holds the whole vault's text: its folder is created 0700 and its files are
    0600 (SQLite gives the -wal and -shm files the database file's mode). Folders that
    already existed are left as they are."""
    if not db_path.parent.exists():
        db_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(db_path.parent, 0o700)  # mkdir's mode is masked by the umask
    os.close(os.open(db_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
    for file in (db_path, Path(f"{db_path}-wal"), Path(f"{db_path}-shm")):
        try:
            if file.stat().st_uid == os.getuid() and file.stat().st_mode & 0o077:
                os.chmod(file, 0o600)  # made by an older tars
        except FileNotFoundError:
            pass


class Batch:
    """Commits of a large sync: see Store.batch."""

    def __init__(self, store: Store, max_seconds: float):
        self.store = store
        self.max_seconds = max_seconds
        self._open = False
        self._since = 0.0

    def tick(self) -> None:
        """Call before each file: commits when the batch is old enough, then opens one."""
        if self._open and time.monotonic() - self._since >= self.max_seconds:
            self.commit()
        if not self._open:
            with self.store.lock:
                self.store.conn.execute("BEGIN IMMEDIATE")
            self._open, self._since = True, time.monotonic()

    def commit(self) -> None:
        """Commit now (the next tick opens a new batch)."""
        if not self._open:
            return
        self._open = False
        with self.store.lock:
            conn = self.store.conn
            if not conn.in_transaction:
                return  # SQLite rolled it back itself (disk full, I/O error): nothing to commit
            try:
                conn.execute("COMMIT")
            except apsw.Error:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise


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


@dataclass(frozen=True, slots=True)
class ChunkRow:
    id: int
    path: str
    title: str
    memory_type: str
    heading_path: str
    start_line: int
    end_line: int
    text: str


def load_vec_extension(conn: apsw.Connection) -> str:
    try:
        import sqlite_vec

        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        conn.enable_load_extension(False)
        return str(conn.execute("SELECT vec_version()").fetchall()[0][0])
    except (ImportError, apsw.Error, AttributeError) as exc:
        raise StoreError(
            f"cannot load the sqlite-vec extension ({exc}); reinstall it with `pip install --force-reinstall sqlite-vec apsw` "
            "(tars needs apsw because this Python's sqlite3 cannot load extensions)"
        ) from exc


class Store:
    """All SQL lives here. Thread-safe: one connection, calls serialised by a lock."""

    def __init__(self, path: Path):
        self.path = path
        try:
            make_private(path)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise StoreError(f"cannot create the index: {explain(exc, path)}") from exc
            raise StoreError(f"cannot create {path} for the index: {exc.strerror or exc}; set [index] db_path to a writable place") from exc
        # One writer connection, used under ``lock``; searches use a read connection per
        # thread, so they neither wait for each other nor hold up indexing (WAL readers
        # never block the writer).
        self.conn = self._connect()
        self.vec_version = load_vec_extension(self.conn)
        self._has_vectors: bool | None = None
        self.lock = threading.RLock()
        try:
            self._migrate()
            self.collection_id = self._collection()
        except apsw.Error as exc:
            self.conn.close()
            raise StoreError(f"cannot prepare the index: {explain(exc, path)}") from exc
        self._local = threading.local()
        self._readers: list[apsw.Connection] = []
        self._readers_lock = threading.Lock()

    def _connect(self, read_only: bool = False) -> apsw.Connection:
        try:
            conn = apsw.Connection(str(self.path))
            conn.set_busy_timeout(10_000)
            # One statement per call: apsw stops a multi-statement string at the first row.
            for pragma in CONNECTION_PRAGMAS + (("PRAGMA query_only = ON",) if read_only else ()):
                conn.execute(pragma).fetchall()
        except apsw.Error as exc:
            if isinstance(exc, apsw.FullError):
                raise StoreError(f"cannot open the index: {explain(exc, self.path)}") from exc
            raise StoreError(
                f"cannot open the index database {self.path}: {exc}; check the directory is writable or set [index] db_path"
            ) from exc
        return conn

    def reader(self) -> apsw.Connection:
        """This thread's read connection (snapshots of committed data)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect(read_only=True)
            load_vec_extension(conn)
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def close(self) -> None:
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
        with self.lock:
            self.conn.close()

    # ---- schema ----

    def _migrate(self) -> None:
        with self.lock, self.conn:
            version = self.conn.execute("PRAGMA user_version").fetchall()[0][0]
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"the index {self.path} has schema version {version}, newer than this tars ({SCHEMA_VERSION}); "
                    "upgrade tars, or delete the file (it is rebuilt from the vault)"
                )
            for target in range(version + 1, SCHEMA_VERSION + 1):
                self.conn.execute(MIGRATIONS[target])
                self.conn.execute(f"PRAGMA user_version = {target}")

    def _collection(self) -> int:
        with self.lock, self.conn:
            self.conn.execute("INSERT OR IGNORE INTO collections(name, root) VALUES (?, '')", (COLLECTION,))
            return self.conn.execute("SELECT id FROM collections WHERE name = ?", (COLLECTION,)).fetchall()[0][0]

    def get_meta(self, key: str) -> str | None:
        with self.lock:
            rows = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchall()
        return rows[0][0] if rows else None

    def set_meta(self, key: str, value: str) -> None:
        with self.lock, self.conn:
            self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def has_vector_table(self) -> bool:
        if self._has_vectors is None:  # asked on every file written: remember the answer
            with self.lock:
                self._has_vectors = bool(self.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'chunk_vectors'").fetchall())
        return self._has_vectors

    def use_vector_space(self, fingerprint: str, dims: int) -> bool:
        """Make chunk_vectors hold vectors of this embedder. A different embedder means a new,
        empty table and every chunk pending again: vector spaces never mix. Returns True if reset."""
        with self.lock, self.conn:
            if self.get_meta("vector_fingerprint") == _space(fingerprint) and self.has_vector_table():
                return False
            self.conn.execute("DROP TABLE IF EXISTS chunk_vectors")
            # Euclidean distance (sqlite-vec's fastest) ranks unit vectors exactly as cosine does.
            self.conn.execute(f"CREATE VIRTUAL TABLE chunk_vectors USING vec0(embedding float[{int(dims)}])")
            self._has_vectors = True
            self.conn.execute("UPDATE chunks SET embedded = 0 WHERE embedded = 1")
            self.set_meta("vector_fingerprint", _space(fingerprint))
            return True

    @contextmanager
    def batch(self, max_seconds: float = 0.2) -> Iterator[Batch]:
        """Group many files' writes into fewer commits during a large sync.

        Each file's writes stay a savepoint of their own, so the tables agree after every
        commit; a commit happens whenever ``max_seconds`` have passed (call ``tick`` between
        files), on ``commit``, and at the end. A kill loses at most the last batch, which the
        next reconcile redoes."""
        batch = Batch(self, max_seconds)
        try:
            yield batch
        except BaseException:
            # Keep what earlier files wrote (other writers on this connection, a chat message
            # saved meanwhile, must not be rolled back), but never let a failing COMMIT hide
            # the error that stopped the sync.
            try:
                batch.commit()
            except apsw.Error as exc:
                log.warning("could not commit the last batch after an error: %s", exc)
            raise
        batch.commit()

    # ---- files ----

    def file_states(self) -> dict[str, FileState]:
        with self.lock:
            rows = self.conn.execute(
                "SELECT path, id, mtime_ns, size, content_hash, chunker, skipped FROM files WHERE collection_id = ?", (self.collection_id,)
            ).fetchall()
        return {r[0]: FileState(r[1], r[2], r[3], r[4], r[5], bool(r[6])) for r in rows}

    def file_state(self, path: str) -> FileState | None:
        with self.lock:
            rows = self.conn.execute(
                "SELECT id, mtime_ns, size, content_hash, chunker, skipped FROM files WHERE collection_id = ? AND path = ?",
                (self.collection_id, path),
            ).fetchall()
        return FileState(rows[0][0], rows[0][1], rows[0][2], rows[0][3], rows[0][4], bool(rows[0][5])) if rows else None

    def uses_other_chunking(self, chunker: str) -> bool:
        """True if some indexed note was chunked another way (it is re-chunked at the next sync)."""
        sql = "SELECT 1 FROM files WHERE skipped = 0 AND chunker != ? LIMIT 1"
        return bool(self.reader().execute(sql, (chunker,)).fetchall())

    def touch_file(self, path: str, mtime_ns: int, size: int) -> None:
        """Same content, new stat (a touch, or a copy preserving bytes): no re-chunking."""
        with self.lock, self.conn:
            self.conn.execute(
                "UPDATE files SET mtime_ns = ?, size = ? WHERE collection_id = ? AND path = ?", (mtime_ns, size, self.collection_id, path)
            )

    def _delete_chunks(self, file_id: int) -> None:
        ids = [r[0] for r in self.conn.execute("SELECT id FROM chunks WHERE file_id = ?", (file_id,))]
        if not ids:
            return
        marks = ",".join("?" * len(ids))
        self.conn.execute(f"DELETE FROM chunks_fts WHERE rowid IN ({marks})", ids)
        if self.has_vector_table():
            self.conn.execute(f"DELETE FROM chunk_vectors WHERE rowid IN ({marks})", ids)
        self.conn.execute("DELETE FROM chunks WHERE file_id = ?", (file_id,))

    def replace_file(self, meta: FileMeta, chunks: list[Chunk], cached: dict[str, bytes], replacing: bool = True) -> int:
        """Write a file's new chunks in one transaction. Chunks whose vectors are in
        ``cached`` (by content hash) get them at once; the rest are left pending.
        ``replacing=False`` says the file had no rows yet. Returns the number left pending."""
        indexed_at = time.time()
        with self.lock, self.conn:
            has_vectors = self.has_vector_table()
            file_id = self.conn.execute(
                """INSERT INTO files(collection_id, path, title, memory_type, content_hash, mtime_ns, size, indexed_at,
                                     chunker, tags, aliases, conflict, skipped, problem)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT (collection_id, path) DO UPDATE SET
                     title = excluded.title, memory_type = excluded.memory_type, content_hash = excluded.content_hash,
                     mtime_ns = excluded.mtime_ns, size = excluded.size, indexed_at = excluded.indexed_at,
                     chunker = excluded.chunker, tags = excluded.tags, aliases = excluded.aliases,
                     conflict = excluded.conflict, skipped = excluded.skipped, problem = excluded.problem
                   RETURNING id""",
                (
                    self.collection_id,
                    meta.path,
                    meta.title,
                    meta.memory_type,
                    meta.content_hash,
                    meta.mtime_ns,
                    meta.size,
                    indexed_at,
                    meta.chunker,
                    " ".join(meta.tags),
                    " ".join(meta.aliases),
                    int(meta.conflict),
                    0,
                    meta.problem,
                ),
            ).fetchall()[0][0]
            if replacing:
                self._delete_chunks(file_id)
            title_terms = " ".join([meta.title, *meta.aliases, *meta.tags, meta.path.rsplit("/", 1)[-1].removesuffix(".md")])
            first_id = self.conn.execute("SELECT coalesce(max(id), 0) + 1 FROM chunks").fetchall()[0][0]
            vectors = [cached.get(chunk.content_hash) if has_vectors else None for chunk in chunks]
            self.conn.executemany(
                """INSERT INTO chunks(id, file_id, seq, content_hash, start_line, end_line, heading_path, text, embed_text, embedded)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                [
                    (
                        first_id + i,
                        file_id,
                        c.seq,
                        c.content_hash,
                        c.start_line,
                        c.end_line,
                        c.heading_path,
                        c.text,
                        c.embed_text,
                        int(vectors[i] is not None),
                    )
                    for i, c in enumerate(chunks)
                ],
            )
            self.conn.executemany(
                "INSERT INTO chunks_fts(rowid, title, headings, body) VALUES (?, ?, ?, ?)",
                [(first_id + i, title_terms, c.heading_path, c.text) for i, c in enumerate(chunks)],
            )
            found = [(first_id + i, vector) for i, vector in enumerate(vectors) if vector is not None]
            if found:
                self.conn.executemany("INSERT INTO chunk_vectors(rowid, embedding) VALUES (?, ?)", found)
        return len(chunks) - len(found)

    def record_skipped(self, path: str, mtime_ns: int, size: int, content_hash: str | None, problem: str, memory_type: str) -> None:
        """A file that could not be indexed: no chunks, but a row saying why."""
        with self.lock, self.conn:
            state = self.file_state(path)
            if state is not None:
                self._delete_chunks(state.id)
            self.conn.execute(
                """INSERT INTO files(collection_id, path, memory_type, content_hash, mtime_ns, size, indexed_at, skipped, problem)
                   VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?)
                   ON CONFLICT (collection_id, path) DO UPDATE SET
                     content_hash = excluded.content_hash, mtime_ns = excluded.mtime_ns, size = excluded.size,
                     indexed_at = excluded.indexed_at, skipped = 1, problem = excluded.problem, title = '', chunker = ''""",
                (self.collection_id, path, memory_type, content_hash, mtime_ns, size, time.time(), problem),
            )

    def delete_file(self, path: str) -> bool:
        with self.lock, self.conn:
            state = self.file_state(path)
            if state is None:
                return False
            self._delete_chunks(state.id)
            self.conn.execute("DELETE FROM files WHERE id = ?", (state.id,))
            return True

    # ---- embeddings ----

    def cached_vectors(self, fingerprint: str | None, hashes: Iterable[str]) -> dict[str, bytes]:
        if fingerprint is None:
            return {}
        found: dict[str, bytes] = {}
        wanted = list(set(hashes))
        with self.lock:
            for start in range(0, len(wanted), 500):
                batch = wanted[start : start + 500]
                marks = ",".join("?" * len(batch))
                for content_hash, vector in self.conn.execute(
                    f"SELECT content_hash, vector FROM embedding_cache WHERE fingerprint = ? AND content_hash IN ({marks})",
                    (fingerprint, *batch),
                ):
                    found[content_hash] = vector
        return found

    def pending_batches(self, batch_size: int) -> Iterator[list[tuple[str, str]]]:
        """Distinct (content_hash, embed_text) of chunks without a vector, a batch at a time,
        newest chunks first (what was just saved is what the user is about to search for).
        The cursor walks ids downwards, so each pending row is read once per pass."""
        last_id, seen = None, set()
        while True:
            with self.lock:
                rows = self.conn.execute(
                    "SELECT id, content_hash, embed_text FROM chunks WHERE embedded = 0 AND id < ? ORDER BY id DESC LIMIT ?",
                    (last_id if last_id is not None else 1 << 62, batch_size),
                ).fetchall()
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

    def has_pending_vectors(self) -> bool:
        return bool(self.reader().execute("SELECT 1 FROM chunks WHERE embedded = 0 LIMIT 1").fetchall())

    def pending_count(self) -> int:
        return self.reader().execute("SELECT count(*) FROM chunks WHERE embedded = 0").fetchall()[0][0]

    def prune_cache(self) -> int:
        """Forget cached vectors no chunk uses any more (old edits of notes)."""
        with self.lock, self.conn:
            self.conn.execute("DELETE FROM embedding_cache WHERE content_hash NOT IN (SELECT content_hash FROM chunks)")
            return self.conn.changes()

    def store_vectors(self, fingerprint: str, vectors: dict[str, bytes]) -> int:
        """Cache vectors by content hash and attach them to every pending chunk with that hash.
        A chunk deleted or re-chunked meanwhile simply has no pending row any more."""
        attached = 0
        with self.lock, self.conn:
            if self.get_meta("vector_fingerprint") != _space(fingerprint):
                return 0  # the embedder changed while this batch was embedding
            for content_hash, vector in vectors.items():
                self.conn.execute(
                    "INSERT OR REPLACE INTO embedding_cache(fingerprint, content_hash, vector) VALUES (?, ?, ?)",
                    (fingerprint, content_hash, vector),
                )
                ids = [r[0] for r in self.conn.execute("SELECT id FROM chunks WHERE content_hash = ? AND embedded = 0", (content_hash,))]
                for chunk_id in ids:
                    self.conn.execute("INSERT INTO chunk_vectors(rowid, embedding) VALUES (?, ?)", (chunk_id, vector))
                    self.conn.execute("UPDATE chunks SET embedded = 1 WHERE id = ?", (chunk_id,))
                attached += len(ids)
        return attached

    def attach_cached(self, fingerprint: str) -> int:
        """Attach cached vectors to pending chunks (after an embedder switch back, say)."""
        with self.lock, self.conn:
            rows = self.conn.execute(
                """SELECT c.id, e.vector FROM chunks c
                   JOIN embedding_cache e ON e.fingerprint = ? AND e.content_hash = c.content_hash
                   WHERE c.embedded = 0""",
                (fingerprint,),
            ).fetchall()
            for chunk_id, vector in rows:
                self.conn.execute("INSERT INTO chunk_vectors(rowid, embedding) VALUES (?, ?)", (chunk_id, vector))
                self.conn.execute("UPDATE chunks SET embedded = 1 WHERE id = ?", (chunk_id,))
        return len(rows)

    # ---- search ----

    def _filter_sql(self, memory_types: list[str] | None, path_prefix: str | None) -> tuple[str, list[object]]:
        clauses, params = ["f.collection_id = ?"], [self.collection_id]
        if memory_types:
            clauses.append(f"f.memory_type IN ({','.join('?' * len(memory_types))})")
            params.extend(memory_types)
        if path_prefix:
            # Compare a prefix exactly: LIKE would treat % and _ in paths as wildcards.
            clauses.append("substr(f.path, 1, ?) = ?")
            params.extend([len(path_prefix), path_prefix])
        return " AND ".join(clauses), params

    def fts_search(self, match: str, limit: int, memory_types: list[str] | None, path_prefix: str | None) -> list[tuple[int, float]]:
        """(chunk id, bm25) best first. bm25 is negative; more negative is better."""
        if not memory_types and not path_prefix:
            # One collection per database: without filters the joins only cost time (2x).
            sql = "SELECT rowid, bm25(chunks_fts, 4.0, 2.0, 1.0) AS score FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY score LIMIT ?"
            return [(r[0], r[1]) for r in self.reader().execute(sql, (match, limit))]
        where, params = self._filter_sql(memory_types, path_prefix)
        sql = f"""SELECT chunks_fts.rowid, bm25(chunks_fts, 4.0, 2.0, 1.0) AS score
                  FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid JOIN files f ON f.id = c.file_id
                  WHERE chunks_fts MATCH ? AND {where} ORDER BY score LIMIT ?"""
        return [(r[0], r[1]) for r in self.reader().execute(sql, (match, *params, limit))]

    def vec_search(self, vector: bytes, limit: int, memory_types: list[str] | None, path_prefix: str | None) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) nearest first."""
        conn = self.reader()
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'chunk_vectors'").fetchall():
            return []
        if memory_types or path_prefix:
            where, params = self._filter_sql(memory_types, path_prefix)
            sql = f"""SELECT rowid, distance FROM chunk_vectors WHERE embedding MATCH ? AND k = ?
                      AND rowid IN (SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id WHERE {where})"""
            rows = conn.execute(sql, (vector, limit, *params))
        else:
            rows = conn.execute("SELECT rowid, distance FROM chunk_vectors WHERE embedding MATCH ? AND k = ?", (vector, limit))
        # For unit vectors, |a - b|^2 = 2 - 2 cos(a, b).
        return [(r[0], 1.0 - r[1] * r[1] / 2.0) for r in rows]

    def chunk_rows(self, ids: list[int]) -> dict[int, ChunkRow]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = (
            self.reader()
            .execute(
                f"""SELECT c.id, f.path, f.title, f.memory_type, c.heading_path, c.start_line, c.end_line, c.text
                FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.id IN ({marks})""",
                ids,
            )
            .fetchall()
        )
        return {r[0]: ChunkRow(*r) for r in rows}

    def chunk_files(self, ids: list[int]) -> dict[int, int]:
        """chunk id -> file id, for collapsing results to one per file."""
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        return dict(self.reader().execute(f"SELECT id, file_id FROM chunks WHERE id IN ({marks})", ids).fetchall())

    def snippets(self, match: str, ids: list[int], open_mark: str, close_mark: str, tokens: int) -> dict[int, str]:
        """FTS5 snippets (matched terms marked, stemming-aware) for chunks that match."""
        if not ids or not match:
            return {}
        marks = ",".join("?" * len(ids))
        return dict(
            self.reader()
            .execute(
                f"SELECT rowid, snippet(chunks_fts, 2, ?, ?, '…', ?) FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid IN ({marks})",
                (open_mark, close_mark, tokens, match, *ids),
            )
            .fetchall()
        )

    # ---- status ----

    def coverage_counts(self) -> dict[str, int]:
        """notes, skipped, chunks, pending (vectors): cheap enough for every search reply.
        Counted again only after a commit: PRAGMA data_version on this thread's read
        connection changes exactly when the writer has committed something."""
        reader = self.reader()
        version = reader.execute("PRAGMA data_version").fetchall()[0][0]
        cached = getattr(self._local, "coverage", None)
        if cached is not None and cached[0] == version:
            return cached[1]
        one = lambda sql: reader.execute(sql).fetchall()[0][0]  # noqa: E731
        counts = {
            "notes": one("SELECT count(*) FROM files WHERE skipped = 0"),
            "skipped": one("SELECT count(*) FROM files WHERE skipped = 1"),
            "chunks": one("SELECT count(*) FROM chunks"),
            "pending": one("SELECT count(*) FROM chunks WHERE embedded = 0"),
        }
        self._local.coverage = (version, counts)
        return counts

    def counts(self) -> dict[str, int]:
        with self.lock:
            one = lambda sql: self.conn.execute(sql).fetchall()[0][0]  # noqa: E731
            return {
                "files": one("SELECT count(*) FROM files WHERE skipped = 0"),
                "skipped": one("SELECT count(*) FROM files WHERE skipped = 1"),
                "chunks": one("SELECT count(*) FROM chunks"),
                "fts_rows": one("SELECT count(*) FROM chunks_fts"),
                "vectors": one("SELECT count(*) FROM chunk_vectors") if self.has_vector_table() else 0,
                "pending_vectors": one("SELECT count(*) FROM chunks WHERE embedded = 0"),
                "cached_vectors": one("SELECT count(*) FROM embedding_cache"),
                "conflicts": one("SELECT count(*) FROM files WHERE conflict = 1"),
            }

    def problems(self) -> list[tuple[str, bool, str]]:
        """(path, skipped, problem) for files that were skipped or repaired."""
        with self.lock:
            return [
                (r[0], bool(r[1]), r[2])
                for r in self.conn.execute("SELECT path, skipped, problem FROM files WHERE problem IS NOT NULL ORDER BY path")
            ]
