"""The connections to the index and the rules for writing through them: the one writing
connection and its lock, a read connection per searching thread, extra writers for tables
of their own, the write discipline (one write is one transaction, or part of a sync's
Batch), the in-memory vectors kept in step with each commit, and the meta table.

Every table family (files.py, chunks.py, fts.py, vectors.py, links.py, status.py) writes
and reads through one Connections; database.py puts them together as the Store.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw

from tarsd.config.budget import SQLITE_CACHE_MB
from tarsd.store.errors import StoreError, explain
from tarsd.store.matrix import LINES_DROPPED, LINES_PUT, VectorIndex
from tarsd.store.passage_notes import PassageNotes
from tarsd.store.schema import collection_id, migrate

log = logging.getLogger(__name__)

CONNECTION_PRAGMAS = (
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",  # in WAL mode: durable at checkpoints, never corrupt
    "PRAGMA foreign_keys = ON",
    # Checkpoint every ~40 MB of log rather than 4 MB: a cold index syncs the disk 10x less
    # often; the log file is cut back to 64 MB after each checkpoint.
    "PRAGMA wal_autocheckpoint = 10000",
    "PRAGMA journal_size_limit = 67108864",
)
READER_PRAGMAS = ("PRAGMA query_only = ON",)
# Readers (one per thread that searches or answers a status: up to ten) keep a 32nd of the
# writer's cache each (2 MB, 1 under a low memory budget): the OS caches the file for all of them.
# With 8 MB each, four readers held 33 MB of a 100,000-note tarsd after ten searches; with 2 a
# keyword search takes about 0.5 ms more (10,000 notes, bench/search_latency.py: 12.3 ms p50, not 11.8).
READER_CACHE_SHARE = 32

WRITER_BUSY_TIMEOUT_MS = 60_000  # writer_connection(): conversations and pending rules

# What tars_phrases says of each query phrase in a row, one byte per phrase (a blob, so a query
# of any length fits: an integer bitmask ran out at SQLite's 64 bits).
PHRASE_IN_ROW = 1
PHRASE_IN_TITLE = 2


@contextmanager
def writing_first(conn: apsw.Connection, lock: threading.Lock) -> Iterator[None]:
    """One transaction on ``conn`` (a writer connection of its own) that takes the write lock before
    it reads (BEGIN IMMEDIATE), waiting the connection's busy timeout for it. A deferred one that
    reads first pins a snapshot, and when the indexer commits before its write, SQLite refuses the
    write at once (SQLITE_BUSY_SNAPSHOT, "database is locked") without waiting: a proposal or a
    decision right after a start failed so. Rolled back on any exception."""
    with lock:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")


def matched_phrases(api: apsw.FTS5ExtensionApi, *_args: object) -> bytes:
    """FTS5 auxiliary function, given to every read connection as tars_phrases: for each of the
    query's phrases in order, whether this row holds it (PHRASE_IN_ROW) and whether its title
    column does (PHRASE_IN_TITLE). Search turns them into coverage."""
    found = bytearray(api.phrase_count)
    for phrase in range(api.phrase_count):
        columns = api.phrase_columns(phrase)
        if columns:
            found[phrase] = PHRASE_IN_ROW | (PHRASE_IN_TITLE if 0 in columns else 0)
    return bytes(found)


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


class Batch:
    """Commits of a large sync: see Connections.batch."""

    def __init__(self, store: Connections, max_seconds: float):
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


class Connections:
    """The index's connections and transactions. Thread-safe: one writing connection, calls
    serialised by a lock. Its underscored members (_writing, _change, _local) are for
    the table families in this package, not for callers."""

    def __init__(self, path: Path, cache_mb: int = SQLITE_CACHE_MB):
        self.path = path
        # The writing connections' page cache: FTS merges and searches stay in memory. A low memory
        # budget gives less (tarsd/config/budget.py).
        self.cache_mb = cache_mb
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
        self.lock = threading.RLock()
        try:
            with self.lock, self.conn:
                migrate(self.conn, self.path)
            with self.lock, self.conn:
                self.collection_id = collection_id(self.conn)
        except apsw.Error as exc:
            self.conn.close()
            raise StoreError(f"cannot prepare the index: {explain(exc, path)}") from exc
        self._local = threading.local()
        self._readers: list[apsw.Connection] = []
        self._readers_lock = threading.Lock()
        # The vectors and the passages' notes in memory (see matrix.py, passage_notes.py), and the
        # changes writes made to them that wait for the outermost transaction to commit.
        self.vectors = VectorIndex()
        self.line_vectors = VectorIndex(LINES_PUT, LINES_DROPPED)  # the line units' (line_units.py)
        self.notes = PassageNotes()
        self._ops: list[list[tuple[str, object]]] = []
        self._pending: list[tuple[str, object]] = []
        self._batch_open = False  # a Batch holds the transaction: writes join it
        self.next_chunk_id: int | None = None  # chunks.py's id counter; read again after a rollback
        # Commits of this store's writes so far: what is worked out from the index once for every
        # thread (the link resolver, search/graph.py) is worked out again when it moves. tarsd is
        # the index's only writer (a second one is refused at start).
        self.generation = 0

    def _connect(self, read_only: bool = False) -> apsw.Connection:
        try:
            conn = apsw.Connection(str(self.path))
            conn.set_busy_timeout(10_000)
            # One statement per call: apsw stops a multi-statement string at the first row.
            cache_mb = max(1, self.cache_mb // READER_CACHE_SHARE) if read_only else self.cache_mb
            conn.execute(f"PRAGMA cache_size = {-1024 * cache_mb}").fetchall()
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
            conn.register_fts5_function("tars_phrases", matched_phrases)
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

    def _change(self, kind: str, payload: object) -> None:
        """A change this write makes to what is kept in memory (matrix.py, passage_notes.py)."""
        self._ops[-1].append((kind, payload))

    def committed(self) -> None:
        """The outermost transaction committed: show its changes to what is kept in memory."""
        self.generation += 1
        pending, self._pending = self._pending, []
        self.vectors.apply(pending)
        self.line_vectors.apply(pending)
        self.notes.apply(pending)

    def rolled_back(self) -> None:
        self._pending = []
        self.next_chunk_id = None  # read again: ids handed out in the rolled-back part are free

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
