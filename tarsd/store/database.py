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
from dataclasses import dataclass, field
from pathlib import Path

import apsw
import numpy as np

from tarsd.markdown.chunker import Chunk
from tarsd.markdown.links import Link
from tarsd.markdown.tokens import index_text
from tarsd.store.matrix import VectorIndex

log = logging.getLogger(__name__)

SCHEMA_VERSION = 5
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

# Version 3: links, tags and aliases for note-aware search, and a keyword table that folds
# every accent. The keyword rows are rewritten by re-chunking every note at the next sync
# (vectors come back from the embedding cache).
_SCHEMA_V3 = """
CREATE TABLE links (
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    line INTEGER NOT NULL,
    kind TEXT NOT NULL,                 -- wiki | embed | markdown
    target TEXT NOT NULL,               -- as written (markdown links: the vault path they name)
    target_key TEXT NOT NULL,           -- links.link_key(target): what backlinks look up
    label_key TEXT NOT NULL DEFAULT '', -- the label as a target (Dendron writes [[label|note]])
    heading TEXT NOT NULL DEFAULT '',
    label TEXT NOT NULL DEFAULT '',
    exact INTEGER NOT NULL DEFAULT 0    -- 1: a path, not a name to look up
);
CREATE INDEX links_file ON links(file_id);
CREATE INDEX links_key ON links(target_key);
CREATE INDEX links_label_key ON links(label_key) WHERE label_key != '';
CREATE TABLE note_tags (
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    tag TEXT NOT NULL,                  -- lower case, without '#'; nested tags keep their '/'
    PRIMARY KEY (file_id, tag)
) WITHOUT ROWID;
CREATE INDEX note_tags_tag ON note_tags(tag);
CREATE TABLE note_aliases (
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    alias TEXT NOT NULL,
    PRIMARY KEY (file_id, alias)
) WITHOUT ROWID;
DROP TABLE chunks_fts;
CREATE VIRTUAL TABLE chunks_fts USING fts5(title, headings, body, tokenize = 'porter unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE chunks_vocab USING fts5vocab(chunks_fts, 'row');  -- term -> passages holding it, for IDF
INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('automerge', 16);  -- fewer merges while indexing (bench: 18% faster)
UPDATE files SET chunker = '' WHERE skipped = 0;
"""


# Version 4: vectors of memory lines for dedup and selective recall (tarsd/memory/vectors.py
# holds its SQL). A table of their own: prune_cache keeps only vectors of chunks in use.
_SCHEMA_MEMORY_VECTORS = """
CREATE TABLE memory_line_vectors (
    fingerprint TEXT NOT NULL,   -- the embedder's
    line_hash TEXT NOT NULL,     -- sha256 of the normalised line (tarsd/memory/facts.py key)
    vector BLOB NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (fingerprint, line_hash)
) WITHOUT ROWID;
"""

# Version 5: rules the model proposed in a chat, waiting for the user's approval
# (tarsd/memory/pending_rules.py). Here rather than in the vault: a proposal is not a rule yet, so it
# must not be in Procedural.md, nor in any note the index would hand back to the model.
_SCHEMA_PENDING_RULES = """
CREATE TABLE pending_rules (
    id INTEGER PRIMARY KEY,
    rule TEXT NOT NULL,
    rule_key TEXT NOT NULL UNIQUE,   -- tarsd/memory/facts.py key: the same rule proposed twice is one proposal
    conversation TEXT NOT NULL DEFAULT '',
    proposed_at REAL NOT NULL
);
"""

MIGRATIONS = {1: _SCHEMA_V1, 2: _SCHEMA_V2, 3: _SCHEMA_V3, 4: _SCHEMA_MEMORY_VECTORS, 5: _SCHEMA_PENDING_RULES}

CONNECTION_PRAGMAS = (
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",  # in WAL mode: durable at checkpoints, never corrupt
    "PRAGMA foreign_keys = ON",
    "PRAGMA cache_size = -65536",  # up to 64 MB of pages: FTS merges and searches stay in memory
    # Checkpoint every ~40 MB of log rather than 4 MB: a cold index syncs the disk 10x less
    # often; the log file is cut back to 64 MB after each checkpoint.
    "PRAGMA wal_autocheckpoint = 10000",
    "PRAGMA journal_size_limit = 67108864",
)
# Readers (one per thread that searches) keep a smaller cache each: the OS caches the file
# for all of them, and ten 64 MB caches would hold a small vault's index ten times over.
READER_PRAGMAS = ("PRAGMA query_only = ON", "PRAGMA cache_size = -8192")


# The vector table's layout; a change rebuilds it from the embedding cache (no re-embedding).
VECTOR_TABLE_LAYOUT = "l2-v2"


def _space(fingerprint: str) -> str:
    return f"{fingerprint}#{VECTOR_TABLE_LAYOUT}"


class StoreError(Exception):
    """The database cannot be used; the message says why and what to do."""


PHRASE_MASK = (1 << 32) - 1


def _matched_phrases(api: apsw.FTS5ExtensionApi, *_args: object) -> int:
    """FTS5 auxiliary function: which of the query's phrases this row matched (bits 0-31), and
    which it matched in the title column (bits 32-63). Search turns them into coverage."""
    anywhere = title = 0
    for phrase in range(min(api.phrase_count, 32)):
        columns = api.phrase_columns(phrase)
        if columns:
            anywhere |= 1 << phrase
            if 0 in columns:
                title |= 1 << phrase
    return anywhere | (title << 32)


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


WRITER_BUSY_TIMEOUT_MS = 60_000  # writer_connection(): conversations and pending rules

# Chunks given their vectors in one transaction by store_vectors: short enough that a chat's
# write never waits long behind it.
VECTOR_WRITE_ROWS = 256


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
                self.store._batch_open = True
            self._open, self._since = True, time.monotonic()

    def commit(self) -> None:
        """Commit now (the next tick opens a new batch)."""
        if not self._open:
            return
        self._open = False
        with self.store.lock:
            conn = self.store.conn
            self.store._batch_open = False
            if not conn.in_transaction:
                self.store.rolled_back()
                return  # SQLite rolled it back itself (disk full, I/O error): nothing to commit
            try:
                conn.execute("COMMIT")
            except apsw.Error:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                self.store.rolled_back()
                raise
            self.store.committed()

    def rollback(self) -> None:
        """Undo what the batch wrote since its last commit (after an error)."""
        if not self._open:
            return
        self._open = False
        with self.store.lock:
            self.store._batch_open = False
            if self.store.conn.in_transaction:
                try:
                    self.store.conn.execute("ROLLBACK")
                except apsw.Error as exc:  # never hide the error that stopped the sync
                    log.warning("could not roll back the last batch: %s", exc)
            self.store.rolled_back()


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


@dataclass(frozen=True, slots=True)
class Filter:
    """Which notes a search may return; applied inside the keyword and vector queries, before
    their top-k cut, so a filter never empties a page that matching notes could fill."""

    memory_types: tuple[str, ...] = ()
    path_prefix: str = ""
    tags: tuple[str, ...] = ()  # lower case, no '#'; all must be present (nested ones count)
    since_ns: int | None = None  # modified at or after (ns since the epoch)
    before_ns: int | None = None  # modified before

    def __bool__(self) -> bool:
        return bool(self.memory_types or self.path_prefix or self.tags) or self.since_ns is not None or self.before_ns is not None


NO_FILTER = Filter()
# The keyword table's tokenizer (porter over unicode61), as in the schema.
FTS_TOKENIZER_ARGS = ("unicode61", "remove_diacritics", "2")
# bm25() weights of the keyword columns: a title (with aliases, tags and file name) match
# counts four times a body match, a heading match twice.
BM25_WEIGHTS = "4.0, 2.0, 1.0"


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
        # The vectors in memory (see vectors.py), and the changes writes made to them that wait
        # for the outermost transaction to commit.
        self.vectors = VectorIndex()
        self._vectors_loading = threading.Lock()
        self._ops: list[list[tuple[str, object]]] = []
        self._pending: list[tuple[str, object]] = []
        self._batch_open = False  # a Batch holds the transaction: writes join it
        self._next_chunk_id: int | None = None

    def _connect(self, read_only: bool = False) -> apsw.Connection:
        try:
            conn = apsw.Connection(str(self.path))
            conn.set_busy_timeout(10_000)
            # One statement per call: apsw stops a multi-statement string at the first row.
            for pragma in CONNECTION_PRAGMAS + (READER_PRAGMAS if read_only else ()):
                conn.execute(pragma).fetchall()
        except apsw.Error as exc:
            if isinstance(exc, apsw.FullError):
                raise StoreError(f"cannot open the index: {explain(exc, self.path)}") from exc
            raise StoreError(
                f"cannot open the index database {self.path}: {exc}; check the directory is writable or set [index] db_path"
            ) from exc
        return conn

    def writer_connection(self) -> apsw.Connection:
        """Another writing connection to the index, for tables of their own (conversations);
        SQLite serialises it with the indexer's. Closed with the store.

        It waits up to a minute for the write lock, not the indexer's 10 s: one note's write (the
        chunks of a 5 MB note into FTS5) can take longer than 10 s on a busy Pi, and a chat's
        message must wait for it, never fail with "database is locked"."""
        conn = self._connect()
        conn.set_busy_timeout(WRITER_BUSY_TIMEOUT_MS)
        with self._readers_lock:
            self._readers.append(conn)
        return conn

    def reader(self) -> apsw.Connection:
        """This thread's read connection (snapshots of committed data)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect(read_only=True)
            load_vec_extension(conn)
            conn.register_fts5_function("tars_phrases", _matched_phrases)
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def shrink_caches(self) -> None:
        """Drop every connection's page cache (the daemon is idle; the OS still caches the
        file): after a sync the writer's cache holds up to 64 MB of pages no search needs."""
        with self.lock:
            self.conn.execute("PRAGMA shrink_memory").fetchall()
        with self._readers_lock:
            readers = list(self._readers)
        for conn in readers:
            conn.execute("PRAGMA shrink_memory").fetchall()

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
        with self._writing():
            self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """One write, atomic: a transaction of its own, or part of the open batch (which commits
        or rolls back as a whole). Its changes to vectors reach the in-memory index only once
        the outermost transaction has committed."""
        with self.lock:
            ops: list[tuple[str, object]] = []
            self._ops.append(ops)
            try:
                if self._batch_open:
                    # No savepoint per write: FTS5 would flush its pending terms into a new
                    # segment at each one (60% slower indexing); a failure rolls the batch back.
                    yield
                else:
                    with self.conn:
                        yield
            finally:
                self._ops.pop()
            (self._ops[-1] if self._ops else self._pending).extend(ops)  # reached only when the write succeeded
            if not self._ops and not self.conn.in_transaction:
                self.committed()

    def _vector_change(self, kind: str, payload: object) -> None:
        self._ops[-1].append((kind, payload))

    def committed(self) -> None:
        """The outermost transaction committed: show its vector changes."""
        pending, self._pending = self._pending, []
        self.vectors.apply(pending)

    def rolled_back(self) -> None:
        self._pending = []
        self._next_chunk_id = None  # read again: ids handed out in the rolled-back part are free

    def vector_index(self) -> VectorIndex:
        """The in-memory vectors, loaded from the index on first use."""
        if not self.vectors.loaded:
            with self._vectors_loading:
                if not self.vectors.loaded:
                    self.vectors.load_with(self._read_vectors)
        return self.vectors

    def _read_vectors(self) -> tuple[list[tuple[int, bytes]], int]:
        reader = self.reader()
        if not reader.execute("SELECT 1 FROM sqlite_master WHERE name = 'chunk_vectors'").fetchall():
            return [], 0
        rows = reader.execute("SELECT rowid, embedding FROM chunk_vectors").fetchall()
        dims = len(rows[0][1]) // 4 if rows else int(self.get_meta("vector_dims") or 0)
        return rows, dims

    def has_vector_table(self) -> bool:
        if self._has_vectors is None:  # asked on every file written: remember the answer
            with self.lock:
                self._has_vectors = bool(self.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'chunk_vectors'").fetchall())
        return self._has_vectors

    def use_vector_space(self, fingerprint: str, dims: int) -> bool:
        """Make chunk_vectors hold vectors of this embedder. A different embedder means a new,
        empty table and every chunk pending again: vector spaces never mix. Returns True if reset."""
        with self._writing():
            if self.get_meta("vector_fingerprint") == _space(fingerprint) and self.has_vector_table():
                return False
            self.conn.execute("DROP TABLE IF EXISTS chunk_vectors")
            # Euclidean distance (sqlite-vec's fastest) ranks unit vectors exactly as cosine does.
            self.conn.execute(f"CREATE VIRTUAL TABLE chunk_vectors USING vec0(embedding float[{int(dims)}])")
            self._has_vectors = True
            self.conn.execute("UPDATE chunks SET embedded = 0 WHERE embedded = 1")
            self.set_meta("vector_fingerprint", _space(fingerprint))
            self.set_meta("vector_dims", str(int(dims)))
            self._vector_change("reset", int(dims))
            return True

    @contextmanager
    def batch(self, max_seconds: float = 0.2) -> Iterator[Batch]:
        """Group many files' writes into fewer transactions during a large sync.

        A commit happens whenever ``max_seconds`` have passed (call ``tick`` between files,
        where the tables agree), on ``commit``, and at the end. An error rolls back what the
        batch wrote since its last commit, so no file is ever half written; the sync that
        failed is retried. A kill loses at most the last batch, which the next reconcile redoes."""
        batch = Batch(self, max_seconds)
        try:
            yield batch
        except BaseException:
            batch.rollback()
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
        with self._writing():
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
            self._vector_change("drop", ids)
        self.conn.execute("DELETE FROM chunks WHERE file_id = ?", (file_id,))

    def _delete_note_graph(self, file_id: int) -> None:
        for table in ("links", "note_tags", "note_aliases"):
            self.conn.execute(f"DELETE FROM {table} WHERE file_id = ?", (file_id,))

    def _insert_note_graph(self, file_id: int, meta: FileMeta) -> None:
        """A note's links, tags and aliases: what link resolution, backlinks and tag filters use."""
        if not meta.links and not meta.tags and not meta.aliases:
            return
        self.conn.executemany(
            """INSERT INTO links(file_id, line, kind, target, target_key, label_key, heading, label, exact)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            [(file_id, k.line, k.kind, k.target, k.key, k.label_key, k.heading, k.label, int(k.exact)) for k in meta.links],
        )
        self.conn.executemany(
            "INSERT OR IGNORE INTO note_tags(file_id, tag) VALUES (?, ?)", [(file_id, tag.lower()) for tag in meta.tags if tag]
        )
        self.conn.executemany(
            "INSERT OR IGNORE INTO note_aliases(file_id, alias) VALUES (?, ?)", [(file_id, a) for a in meta.aliases if a.strip()]
        )

    def replace_file(self, meta: FileMeta, chunks: list[Chunk], cached: dict[str, bytes]) -> int:
        """Write a file's new chunks in one transaction. Chunks whose vectors are in
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
        )
        with self._writing():
            has_vectors = self.has_vector_table()
            # Looked up here, not taken from the caller: its snapshot may be stale (a save
            # committed in the middle of a long sync). A new file has nothing to delete.
            found_id = self.conn.execute(
                "SELECT id FROM files WHERE collection_id = ? AND path = ?", (self.collection_id, meta.path)
            ).fetchall()
            if found_id:
                file_id = found_id[0][0]
                self.conn.execute(
                    """UPDATE files SET title = ?, memory_type = ?, content_hash = ?, mtime_ns = ?, size = ?, indexed_at = ?,
                         chunker = ?, tags = ?, aliases = ?, conflict = ?, problem = ?, skipped = 0 WHERE id = ?""",
                    (*values, file_id),
                )
                self._delete_chunks(file_id)
                self._delete_note_graph(file_id)
            else:
                file_id = self.conn.execute(
                    """INSERT INTO files(title, memory_type, content_hash, mtime_ns, size, indexed_at, chunker, tags, aliases,
                                         conflict, problem, skipped, collection_id, path)
                       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?) RETURNING id""",
                    (*values, self.collection_id, meta.path),
                ).fetchall()[0][0]
            self._insert_note_graph(file_id, meta)
            title_terms = index_text(" ".join([meta.title, *meta.aliases, *meta.tags, meta.path.rsplit("/", 1)[-1].removesuffix(".md")]))
            first_id = self._take_chunk_ids(len(chunks))
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
                [(first_id + i, title_terms, index_text(c.heading_path), index_text(c.text)) for i, c in enumerate(chunks)],
            )
            found = [(first_id + i, vector) for i, vector in enumerate(vectors) if vector is not None]
            if found:
                self.conn.executemany("INSERT INTO chunk_vectors(rowid, embedding) VALUES (?, ?)", found)
                self._vector_change("put", found)
        return len(chunks) - len(found)

    def _take_chunk_ids(self, count: int) -> int:
        """The first of ``count`` new chunk ids, above every id used so far (embedding goes
        newest first, by id). Counted here rather than asked of SQLite for every file."""
        if self._next_chunk_id is None:
            self._next_chunk_id = self.conn.execute("SELECT coalesce(max(id), 0) + 1 FROM chunks").fetchall()[0][0]
        first = self._next_chunk_id
        self._next_chunk_id += count
        return first

    def record_skipped(self, path: str, mtime_ns: int, size: int, content_hash: str | None, problem: str, memory_type: str) -> None:
        """A file that could not be indexed: no chunks, but a row saying why."""
        with self._writing():
            state = self.file_state(path)
            if state is not None:
                self._delete_chunks(state.id)
                self._delete_note_graph(state.id)
            self.conn.execute(
                """INSERT INTO files(collection_id, path, memory_type, content_hash, mtime_ns, size, indexed_at, skipped, problem)
                   VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?)
                   ON CONFLICT (collection_id, path) DO UPDATE SET
                     content_hash = excluded.content_hash, mtime_ns = excluded.mtime_ns, size = excluded.size,
                     indexed_at = excluded.indexed_at, skipped = 1, problem = excluded.problem, title = '', chunker = ''""",
                (self.collection_id, path, memory_type, content_hash, mtime_ns, size, time.time(), problem),
            )

    def delete_file(self, path: str) -> bool:
        with self._writing():
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
        with self._writing():
            self.conn.execute("DELETE FROM embedding_cache WHERE content_hash NOT IN (SELECT content_hash FROM chunks)")
            return self.conn.changes()

    def store_vectors(self, fingerprint: str, vectors: dict[str, bytes]) -> int:
        """Cache vectors by content hash and attach them to every pending chunk with that hash.
        A chunk deleted or re-chunked meanwhile simply has no pending row any more.

        At most VECTOR_WRITE_ROWS chunks per transaction: one text repeated thousands of times
        (a 5 MB line of one word) held the write lock for seconds, and a chat's write waiting on
        it failed with "database is locked" on a busy box. A chunk and its vector always go together."""
        attached = 0
        for content_hash, vector in vectors.items():
            while True:
                with self._writing():
                    if self.get_meta("vector_fingerprint") != _space(fingerprint):
                        return attached  # the embedder changed while this batch was embedding
                    self.conn.execute(
                        "INSERT OR REPLACE INTO embedding_cache(fingerprint, content_hash, vector) VALUES (?, ?, ?)",
                        (fingerprint, content_hash, vector),
                    )
                    ids = [
                        r[0]
                        for r in self.conn.execute(
                            "SELECT id FROM chunks WHERE content_hash = ? AND embedded = 0 LIMIT ?", (content_hash, VECTOR_WRITE_ROWS)
                        )
                    ]
                    for chunk_id in ids:
                        self.conn.execute("INSERT INTO chunk_vectors(rowid, embedding) VALUES (?, ?)", (chunk_id, vector))
                        self.conn.execute("UPDATE chunks SET embedded = 1 WHERE id = ?", (chunk_id,))
                    self._vector_change("put", [(chunk_id, vector) for chunk_id in ids])
                attached += len(ids)
                if len(ids) < VECTOR_WRITE_ROWS:
                    break
        return attached

    def attach_cached(self, fingerprint: str) -> int:
        """Attach cached vectors to pending chunks (after an embedder switch back, say)."""
        with self._writing():
            rows = self.conn.execute(
                """SELECT c.id, e.vector FROM chunks c
                   JOIN embedding_cache e ON e.fingerprint = ? AND e.content_hash = c.content_hash
                   WHERE c.embedded = 0""",
                (fingerprint,),
            ).fetchall()
            for chunk_id, vector in rows:
                self.conn.execute("INSERT INTO chunk_vectors(rowid, embedding) VALUES (?, ?)", (chunk_id, vector))
                self.conn.execute("UPDATE chunks SET embedded = 1 WHERE id = ?", (chunk_id,))
            self._vector_change("put", rows)
        return len(rows)

    # ---- search ----

    def _filter_sql(self, where: Filter) -> tuple[str, list[object]]:
        clauses, params = ["f.collection_id = ?"], [self.collection_id]
        if where.memory_types:
            clauses.append(f"f.memory_type IN ({','.join('?' * len(where.memory_types))})")
            params.extend(where.memory_types)
        if where.path_prefix:
            # Compare a prefix exactly: LIKE would treat % and _ in paths as wildcards.
            clauses.append("substr(f.path, 1, ?) = ?")
            params.extend([len(where.path_prefix), where.path_prefix])
        for tag in where.tags:  # every tag asked for; a tag also matches the tags nested under it
            clauses.append("f.id IN (SELECT file_id FROM note_tags WHERE tag = ? OR substr(tag, 1, ?) = ?)")
            params.extend([tag, len(tag) + 1, tag + "/"])
        if where.since_ns is not None:
            clauses.append("f.mtime_ns >= ?")
            params.append(where.since_ns)
        if where.before_ns is not None:
            clauses.append("f.mtime_ns < ?")
            params.append(where.before_ns)
        return " AND ".join(clauses), params

    def fts_search(self, match: str, limit: int, where: Filter = NO_FILTER) -> list[tuple[int, float, int, int]]:
        """(chunk id, bm25, phrases matched, phrases matched in the title) best first. bm25 is
        negative, more negative is better; the phrase sets are bitmasks over the query's
        phrases in order (see _matched_phrases)."""
        if not where:
            # FTS5 sorts "ORDER BY rank" itself, so tars_phrases runs only for the rows returned,
            # not for every match; and one collection per database makes the joins unneeded.
            sql = f"""SELECT rowid, rank, tars_phrases(chunks_fts) FROM chunks_fts
                      WHERE chunks_fts MATCH ? AND rank MATCH 'bm25({BM25_WEIGHTS})' ORDER BY rank LIMIT ?"""
            rows = self.reader().execute(sql, (match, limit))
        else:
            clauses, params = self._filter_sql(where)
            sql = f"""SELECT chunks_fts.rowid, bm25(chunks_fts, {BM25_WEIGHTS}) AS score, tars_phrases(chunks_fts)
                      FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid JOIN files f ON f.id = c.file_id
                      WHERE chunks_fts MATCH ? AND {clauses} ORDER BY score LIMIT ?"""
            rows = self.reader().execute(sql, (match, *params, limit))
        return [(r[0], r[1], r[2] & PHRASE_MASK, r[2] >> 32) for r in rows]

    def vec_search(self, vector: bytes, limit: int, where: Filter = NO_FILTER) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) nearest first; filters apply before the top-k cut."""
        allowed = None
        if where:
            clauses, params = self._filter_sql(where)
            sql = f"SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.embedded = 1 AND {clauses}"
            allowed = {row[0] for row in self.reader().execute(sql, params)}
        return self.vector_index().search(np.frombuffer(vector, dtype=np.float32), limit, allowed)

    def similarities(self, vector: bytes, ids: list[int]) -> dict[int, float]:
        """The exact cosine of each passage in ``ids`` that has a vector."""
        return self.vector_index().similarities(np.frombuffer(vector, dtype=np.float32), ids)

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

    def chunk_notes(self, ids: list[int]) -> dict[int, tuple[int, str]]:
        """chunk id -> (file id, path), for collapsing results to one per note."""
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self.reader().execute(
            f"SELECT c.id, c.file_id, f.path FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.id IN ({marks})", ids
        )
        return {r[0]: (r[1], r[2]) for r in rows}

    def keyword_tokens(self, text: str) -> list[str]:
        """``text`` cut into keyword tokens exactly as the index cuts it (stemmed, folded)."""
        tokenizer = getattr(self._local, "tokenizer", None)
        if tokenizer is None:
            tokenizer = self._local.tokenizer = self.reader().fts5_tokenizer("porter", list(FTS_TOKENIZER_ARGS))
        return tokenizer(text.encode("utf-8"), apsw.FTS5_TOKENIZE_QUERY, None, include_offsets=False, include_colocated=False)

    def passage_frequencies(self, tokens: list[str]) -> tuple[int, dict[str, int]]:
        """(passages in the index, passages holding each token): what IDF is made of."""
        reader = self.reader()
        total = self.coverage_counts()["chunks"]  # counted again only after a commit
        if not tokens:
            return total, {}
        marks = ",".join("?" * len(tokens))
        return total, dict(reader.execute(f"SELECT term, doc FROM chunks_vocab WHERE term IN ({marks})", tokens).fetchall())

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
