"""Incremental sync of the vault into the index, by content hash.

Per file: an unchanged (mtime, size) is skipped without reading; a changed one is hashed,
and an unchanged hash only updates the stat. Otherwise the note is re-chunked and written
in one transaction, taking vectors from the embedding cache where the chunk's content hash
is known. Embedding of the rest happens afterwards, in batches, outside any write
transaction, so a slow model never blocks readers or the next file.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tarsd.config.budget import CHUNK_WORKERS
from tarsd.config.settings import Config
from tarsd.embed.embedder import Embedder, EmbedderUnavailable
from tarsd.index.preparing import NOTES_PER_TASK, Preparer, failure_reason, prepare_into, prepare_note
from tarsd.store.database import FileMeta, FileState, Store
from tarsd.vault.files import (
    REDIRECTED,
    VANISHED,
    DiskFile,
    NoteContent,
    display_path,
    is_conflict_copy,
    memory_type,
    read_note,
    stat_note,
    walk,
)
from tarsd.vault.root import require_vault

log = logging.getLogger(__name__)

# 2: chunks bounded in characters too, front matter after a BOM; 3: notes with no body get a title chunk;
# 4: a front-matter title is one of the note's names (links, backlinks, related), as its aliases are;
# 5: session logs' lines are units of their own (markdown/line_units.py), and every note has its date
CHUNKER_VERSION = 5
# Pending chunks per embedding round (the model sees them in config.batch_size batches).
# Small rounds let the daemon slip a freshly saved note in between (under a second each here).
EMBED_ROUND = 8

Progress = Callable[[str, int, int], None]  # (phase, done, total)
# Scan progress at least this often (besides every 200 notes) while notes are being read.
PROGRESS_SECONDS = 0.5
# A note this long takes a noticeable time to chunk (a 5 MB one took 9 s on a busy box): it is
# never chunked inside the open write transaction.
BIG_NOTE_CHARS = 256_000
# Notes prepared ahead of the one being written, during a long sync: four workers' tasks.
PREPARED_WINDOW = 4 * NOTES_PER_TASK
# How long the writer waits for a note still being chunked before it commits what it has. Every
# commit writes the keyword rows held in memory as a segment of their own (merged later): a
# commit per wait made ~800 commits of a cold 10,000-note index, where most waits last only as
# long as one ordinary note's chunking.
READY_WAIT_SECONDS = 0.05


@dataclass(slots=True)
class _Prepared:
    disk: DiskFile
    note: NoteContent
    future: Future  # of a PreparedNote


class UrgentPaths(Protocol):
    """Saves that must not wait for the end of a long sync (the sync queue provides them)."""

    def waiting(self) -> bool:
        """Cheap: may a path be due?"""
        ...

    def take(self) -> list[str]:
        """Paths due now (their debounce passed, or a search is waiting for them)."""
        ...

    def finished(self, paths: list[str]) -> None:
        """The paths are committed: searches see them."""
        ...


@dataclass(slots=True)
class SyncReport:
    scanned: int = 0
    indexed: int = 0  # files (re-)chunked
    unchanged: int = 0
    touched: int = 0  # stat changed, content did not
    deleted: int = 0
    skipped: int = 0  # recorded with a problem and no chunks
    chunks: int = 0  # chunks written
    vectors_from_cache: int = 0
    vectors_embedded: int = 0
    pending_vectors: int = 0
    embedder_error: str | None = None
    problems: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


class Indexer:
    def __init__(self, config: Config, store: Store, embedder: Embedder, chunk_workers: int = CHUNK_WORKERS):
        self.config = config
        self.chunk_workers = chunk_workers  # processes that chunk notes in a long sync (the memory budget's)
        self.root: Path = config.vault_path
        self.store = store
        self.embedder = embedder
        self.max_bytes = int(config.vault.max_file_mb * 1_000_000)
        # Set to stop a sync between two files (each file's transaction always completes).
        self.stop = threading.Event()
        # Progress of the whole-vault scan under way, and the notes the last one found, for
        # the coverage every search reply carries.
        self.scan_done = 0
        self.scan_total: int | None = None
        self.notes_on_disk: int | None = None

    # ---- the embedder's state decides chunk sizes and the vector space ----

    def _prepare_embedder(self) -> bool:
        """True when vectors can be made now (never waits for a model that is loading).
        Switches the vector table to this embedder."""
        if not self.embedder.available():
            return False
        assert self.embedder.fingerprint is not None
        if self.store.use_vector_space(self.embedder.fingerprint, self.embedder.dims):
            # Say what happened: a new database has no cached vectors to re-use, and saying so would mislead.
            cached = self.store.attach_cached(self.embedder.fingerprint)
            if cached:
                log.info("vector space is now %s: %d cached vectors re-used, embedding the rest", self.embedder.fingerprint, cached)
            else:
                log.info("vector space is now %s: embedding every passage", self.embedder.fingerprint)
        return True

    def _chunking(self):
        counter, budget = self.embedder.counter()
        if self.config.index.chunk_tokens > 0:
            budget = min(budget, self.config.index.chunk_tokens)
        fingerprint = f"v{CHUNKER_VERSION}:{counter.fingerprint}:{budget}:{self.config.index.overlap:g}"
        if self.config.vault.episodic != ["sessions/"]:
            # Which notes are recalled by their lines follows [vault] episodic: a change re-chunks them.
            fingerprint += ":lines=" + ",".join(self.config.vault.episodic)
        return counter, budget, fingerprint

    def chunking_fingerprint(self) -> str:
        """Changes when chunks would come out differently (another tokenizer, budget or overlap)."""
        return self._chunking()[2]

    # ---- sync ----

    def sync(
        self,
        paths: list[str] | None = None,
        *,
        full: bool = False,
        embed: bool = True,
        progress: Progress | None = None,
        urgent: UrgentPaths | None = None,
    ) -> SyncReport:
        """Bring the index in line with the vault (or with just ``paths``, relative to it).
        ``full`` re-reads and re-chunks every file, still re-using cached vectors.

        Keyword rows are committed as the sync goes. ``embed`` then makes every missing vector
        before returning, waiting for the model to load: for scripts and benchmarks. The
        daemon passes ``embed=False`` and leaves vectors to its background rounds; it passes
        ``urgent`` so that saves made during a long sync are committed between two files."""
        started = time.perf_counter()
        report = SyncReport()
        if embed and self.embedder.enabled and not self.embedder.wait_ready():
            report.embedder_error = self.embedder.unavailable_reason()
        can_embed = self._prepare_embedder()
        chunking = self._chunking()
        fingerprint = self.embedder.fingerprint if can_embed else None

        whole_vault = paths is None
        if whole_vault:
            require_vault(self.root)
            disk = walk(self.root)
            known = self.store.file_states()
            gone = self._gone([p for p in known if p not in disk])
            todo = list(disk.values())
            self.scan_done, self.scan_total = 0, len(todo)
        else:
            todo, known, gone = self._look_up(paths)

        report.scanned = len(todo)
        to_chunk = self._notes_to_chunk(todo, known, chunking, full)
        preparer = Preparer(chunking[0], chunking[1], self.config.index.overlap, to_chunk, self.chunk_workers)
        window: deque[_Prepared] = deque()  # notes being prepared, written in order
        # Progress from the start, then every few notes or half second: one big note (or --full on a
        # large vault) takes seconds, and a client waiting on it should not see a blank line meanwhile.
        shown_at = time.monotonic()
        if progress:
            progress("scan", 0, len(todo))
        try:
            with self.store.batch() as batch:
                for done, disk_file in enumerate(todo, 1):
                    if self.stop.is_set():
                        break
                    if urgent is not None and urgent.waiting():
                        for path in self._sync_urgent(urgent, batch, chunking, fingerprint):
                            known[path] = self.store.file_state(path)  # the snapshot of this sync is stale for it
                    batch.tick()
                    note = self._examine(disk_file, known.get(disk_file.path), chunking, full, report)
                    if note is not None:
                        if preparer.in_place and len(note.text) >= BIG_NOTE_CHARS:
                            batch.commit()  # chunked right here, for seconds: not while holding the write lock (see _ready)
                        by_lines = self._by_lines(disk_file.path)
                        window.append(_Prepared(disk_file, note, preparer.submit(note.text, disk_file.path, by_lines)))
                    while window and (len(window) >= PREPARED_WINDOW or window[0].future.done()):
                        prepared = self._ready(window.popleft(), batch, preparer)
                        batch.tick()
                        self._write(prepared, chunking, fingerprint, report)
                    if whole_vault:
                        self.scan_done = done
                    if progress and (done % 200 == 0 or done == len(todo) or time.monotonic() - shown_at >= PROGRESS_SECONDS):
                        progress("scan", done, len(todo))
                        shown_at = time.monotonic()
                while window and not self.stop.is_set():
                    prepared = self._ready(window.popleft(), batch, preparer)
                    batch.tick()
                    self._write(prepared, chunking, fingerprint, report)
                for path in gone:
                    if self.stop.is_set():
                        break
                    batch.tick()
                    if self.store.delete_file(path):
                        report.deleted += 1
        finally:
            preparer.close()
            if whole_vault:
                self.scan_total = None
        if whole_vault and not self.stop.is_set():
            self.notes_on_disk = len(todo)
            self.store.prune_cache()

        if embed and self.embedder.enabled:
            self.embed_pending(report, progress)
        if self.embedder.enabled and not self.embedder.ready and report.embedder_error is None:
            report.embedder_error = self.embedder.unavailable_reason()
        report.pending_vectors = self.store.pending_count() if self.embedder.enabled else 0
        report.seconds = time.perf_counter() - started
        return report

    def _look_up(self, paths: list[str]) -> tuple[list[DiskFile], dict[str, FileState], list[str]]:
        """(files to sync, their index states, paths gone from disk) for the given paths."""
        wanted = dict.fromkeys(_relative(self.root, p) for p in paths)  # in order, once each
        disk_files = [(display_path(p)[0], stat_note(self.root, p)) for p in wanted]
        known = {p: s for p, _ in disk_files if (s := self.store.file_state(p)) is not None}
        gone = self._gone([p for p, d in disk_files if d is None and p in known])
        return [d for _, d in disk_files if d is not None], known, gone

    def _gone(self, paths: list[str]) -> list[str]:
        """Notes missing from disk, to delete from the index, if the vault folder is there: a
        vault moved away or on an unmounted drive would otherwise empty the index (VaultMissing)."""
        if paths:
            require_vault(self.root)
        return paths

    def _sync_urgent(self, urgent: UrgentPaths, batch, chunking, fingerprint: str | None) -> list[str]:
        """Commit saves that became due while a long sync runs, so they never wait for its end.
        Returns the paths (as stored) it synced."""
        paths = urgent.take()
        if not paths:
            return []
        report = SyncReport()
        try:
            todo, known, gone = self._look_up(paths)
            batch.commit()  # chunking comes first, outside any transaction (see _ready)
            for disk_file in todo:
                self._sync_file(disk_file, known.get(disk_file.path), chunking, fingerprint, False, report, batch)
            batch.tick()
            for path in gone:
                self.store.delete_file(path)
            batch.commit()
        finally:
            urgent.finished(paths)
        if report.indexed:
            log.info("synced %d saved path(s) during a longer sync", report.indexed)
        return [disk_file.path for disk_file in todo] + gone

    def _sync_file(
        self, disk: DiskFile, state: FileState | None, chunking, fingerprint: str | None, full: bool, report: SyncReport, batch
    ) -> None:
        """One note, start to finish, in place: chunked before the batch's transaction is opened."""
        note = self._examine(disk, state, chunking, full, report)
        if note is not None:
            counter, budget, _ = chunking
            future = prepare_into(Future(), note.text, disk.path, counter, budget, self.config.index.overlap, self._by_lines(disk.path))
            batch.tick()
            self._write(_Prepared(disk, note, future), chunking, fingerprint, report)

    def _by_lines(self, path: str) -> bool:
        """Whether a note is recalled by its lines: the session logs ([vault] episodic)."""
        return memory_type(path, self.config.vault) == "episodic"

    @staticmethod
    def _ready(prepared: _Prepared, batch, preparer: Preparer) -> _Prepared:
        """``prepared`` once its chunks are ready. While a worker still chunks it, the batch is
        committed first: a big note takes seconds (a 5 MB line took 10 s on a busy box), and the
        write lock held meanwhile made a chat's write wait past its busy timeout and fail."""
        if not prepared.future.done():
            preparer.flush()  # it may be held back in a task not yet full
        if not prepared.future.done() and not wait([prepared.future], timeout=READY_WAIT_SECONDS).done:
            batch.commit()
            wait([prepared.future])
        return prepared

    def _notes_to_chunk(self, todo: list[DiskFile], known: dict[str, FileState], chunking, full: bool) -> int:
        """How many of ``todo`` look changed (by stat): decides whether preparing them is worth workers."""
        chunker = chunking[2]
        return sum(
            1
            for d in todo
            if full or (s := known.get(d.path)) is None or (s.mtime_ns, s.size) != (d.mtime_ns, d.size) or s.chunker != chunker
        )

    def _examine(self, disk: DiskFile, state: FileState | None, chunking, full: bool, report: SyncReport) -> NoteContent | None:
        """Settle what needs no chunking (unchanged, touched, skipped, vanished); return the
        note's content when it must be chunked."""
        chunker_fp = chunking[2]
        path = disk.path
        fresh_chunking = state is not None and state.chunker == chunker_fp
        if (
            not full
            and state is not None
            and (state.mtime_ns, state.size) == (disk.mtime_ns, disk.size)
            and (fresh_chunking or state.skipped)
        ):
            report.unchanged += 1
            return None
        kind = memory_type(path, self.config.vault)
        if disk.problem is not None:  # a symlink, a FIFO, an undecodable name: never read
            self.store.record_skipped(path, disk.mtime_ns, disk.size, None, disk.problem, kind)
            report.skipped += 1
            report.problems[path] = disk.problem
            return None
        note = read_note(self.root, path, self.max_bytes)
        if note.text is None:
            if note.problem in (VANISHED, REDIRECTED):
                if self.store.delete_file(path):
                    report.deleted += 1
                return None
            self.store.record_skipped(path, disk.mtime_ns, disk.size, note.content_hash, note.problem or "unreadable", kind)
            report.skipped += 1
            report.problems[path] = note.problem or "unreadable"
            return None
        if not full and state is not None and not state.skipped and fresh_chunking and state.content_hash == note.content_hash:
            self.store.touch_file(path, disk.mtime_ns, disk.size)
            report.touched += 1
            return None
        return note

    def _write(self, prepared: _Prepared, chunking, fingerprint: str | None, report: SyncReport) -> None:
        disk, note = prepared.disk, prepared.note
        path = disk.path
        kind = memory_type(path, self.config.vault)
        try:
            try:
                ready = prepared.future.result()
            except BrokenProcessPool:  # the worker died, not the note's fault: prepare it here
                counter, budget, _ = chunking
                ready = prepare_note(note.text, path, counter, budget, self.config.index.overlap, self._by_lines(path))
        except Exception as exc:  # a note that defeats the chunker must not stop the sync
            reason = failure_reason(exc)
            log.error("cannot chunk %s: %s", path, reason)
            problem = f"could not be chunked: {reason}"
            self.store.record_skipped(path, disk.mtime_ns, disk.size, note.content_hash, problem, kind)
            report.skipped += 1
            report.problems[path] = problem
            return
        cached = self.store.cached_vectors(fingerprint, [*(c.content_hash for c in ready.chunks), *(u.content_hash for u in ready.units)])
        meta = FileMeta(
            path=path,
            title=ready.title,
            memory_type=kind,
            content_hash=note.content_hash,
            mtime_ns=disk.mtime_ns,
            size=disk.size,
            chunker=chunking[2],
            tags=ready.tags,
            aliases=ready.aliases,
            names=ready.names,
            conflict=is_conflict_copy(path),
            problem=note.problem,
            links=ready.links,
            date=ready.date,
        )
        self.store.replace_file(meta, ready.chunks, cached, ready.units)
        report.indexed += 1
        report.chunks += len(ready.chunks)
        report.vectors_from_cache += sum(1 for c in ready.chunks if c.content_hash in cached)
        if note.problem:
            report.problems[path] = note.problem

    def embed_pending(self, report: SyncReport | None = None, progress: Progress | None = None, rounds: int | None = None) -> int:
        """Embed chunks that have no vector yet: all of them, or ``rounds`` batches of
        EMBED_ROUND. Stops (keeping the rest pending) if the embedder fails; the next sync
        tries again."""
        report = report if report is not None else SyncReport()
        if not self._prepare_embedder():
            if report.embedder_error is None:
                report.embedder_error = self.embedder.unavailable_reason()
            return 0
        fingerprint = self.embedder.fingerprint
        total = self.store.pending_count() if progress else 0
        done = 0
        for round_number, batch in enumerate(self.store.pending_batches(EMBED_ROUND)):
            if self.stop.is_set() or (rounds is not None and round_number >= rounds):
                break
            # Chunks written while the model was still loading may have cached vectors.
            cached = self.store.cached_vectors(fingerprint, (h for h, _ in batch))
            if cached:
                done += self.store.store_vectors(fingerprint, cached)
                report.vectors_from_cache += len(cached)
                batch = [(h, text) for h, text in batch if h not in cached]
                if not batch:
                    continue
            try:
                vectors = self.embedder.embed([text for _, text in batch])
            except EmbedderUnavailable as exc:
                report.embedder_error = str(exc)
                break
            except Exception as exc:  # onnxruntime and friends raise their own types
                log.exception("embedding failed")
                self.embedder.mark_failed(f"embedding failed: {exc}")
                report.embedder_error = self.embedder.error
                break
            if len(vectors) != len(batch):
                report.embedder_error = f"the embedder returned {len(vectors)} vectors for {len(batch)} texts"
                break
            attached = self.store.store_vectors(fingerprint, {h: v.tobytes() for (h, _), v in zip(batch, vectors, strict=True)})
            report.vectors_embedded += len(batch)
            done += attached
            if progress:
                progress("embed", min(done, total), total)
        return report.vectors_embedded


def _relative(root: Path, path: str) -> str:
    """A vault-relative, normalised path; a path outside the vault is refused."""
    candidate = Path(os.path.normpath(root / path))  # an absolute path replaces root
    try:
        return candidate.relative_to(root).as_posix()
    except ValueError:
        raise ValueError(f"{path} is not inside the vault {root}") from None
