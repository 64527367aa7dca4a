"""The daemon's indexing workers and the queue that feeds them.

Watch events arrive per path and are debounced (a save is often several events); explicit
index requests and reconcile scans queue behind them. Two workers run side by side:

- the keyword worker runs sync jobs one at a time in a thread, so SQLite sees one writer
  at a time; a save that becomes due during a long sync is committed between two of its
  files, so keyword search never waits for the end of a reconcile;
- the vector worker embeds pending chunks a small round at a time, newest first, whenever
  the model is ready. Nothing keyword-related ever waits for it.

A failed job (disk full, database locked) is logged with its cause, reported in status and
to the waiting client, and retried after a back-off; neither worker ever dies of it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field

import apsw

from tarsd.config.heap import return_freed_memory
from tarsd.index.indexer import Indexer, Progress, SyncReport
from tarsd.store.database import explain
from tarsd.vault.root import VaultMissing

log = logging.getLogger(__name__)

# A sync this big leaves freed memory worth handing back once idle. Looking alone counts: a
# reconcile that found all 100,000 notes unchanged still read every note's state and filled the
# writer's page cache, and left tarsd about 65 MB bigger (bench/search_scale.py).
TRIM_AFTER_FILES = 50

# Requests leave freed memory too: a status worked out a 24 MB link resolver from 100,000 notes,
# a search frees the arrays of its scan. Handed back once no request has come for this long: a
# 100,000-note tarsd went from 262 to 218 MB before its first search, and from 426 to 410 after
# ten (bench/search_scale.py).
QUIET_TRIM_SECONDS = 2.0

VECTOR_RETRY_SECONDS = 5.0
VECTOR_RETRY_MAX_SECONDS = 300.0
FAILURE_REMINDER_SECONDS = 600.0


class SyncFailed(Exception):
    """A sync job failed; the message says why in the user's terms, and that it is retried."""


@dataclass(slots=True)
class _Job:
    kind: str  # index | reconcile | paths
    paths: list[str] | None  # None: the whole vault
    full: bool = False
    progress: Progress | None = None
    done: asyncio.Future | None = None  # someone waits for the report


@dataclass(slots=True)
class QueuePosition:
    """Where a newly queued index request stands (for the client's "queued" message)."""

    ahead: int
    running: str  # what the keyword worker does now: "", "reconcile", "index", "saves"


@dataclass(slots=True)
class _Retry:
    delay: float = 0.0
    at: float | None = None  # wall clock of the next attempt
    error: str | None = None
    paths: set[str] = field(default_factory=set)
    whole_vault: bool = False


class SyncQueue:
    def __init__(self, indexer: Indexer, debounce_seconds: float, retry_seconds: float = 2.0, retry_max_seconds: float = 60.0):
        self.indexer = indexer
        self.debounce = debounce_seconds
        self.retry_seconds = retry_seconds
        self.retry_max_seconds = retry_max_seconds
        self.loop = asyncio.get_running_loop()
        # _due and _in_flight are read by the keyword worker's thread in the middle of a sync.
        self._lock = threading.Lock()
        self._due: dict[str, float] = {}  # path -> monotonic time its debounce ends
        self._in_flight: set[str] = set()  # taken by the worker, not committed yet
        # Per path: how many times the worker took it, and which take was last finished. A
        # wait for a commit waits for the take it needs, not for saves that come after it.
        self._taken: dict[str, int] = {}
        self._finished: dict[str, int] = {}
        self._retrying: set[str] = set()  # failed: back in _due after a back-off
        self._urgent = threading.Event()  # some path in _due may be due: the sync thread checks it
        self._jobs: deque[_Job] = deque()
        self._reconcile = False
        self._wake = asyncio.Event()
        self._vectors_wake = asyncio.Event()
        self._settled = asyncio.Condition()
        self._stopping = False
        self._retry = _Retry()
        self._vector_retry = 0.0
        self._trim_when_idle = False  # the backlog ran since the heap was last trimmed
        self._answered_at = 0.0  # monotonic time of the last request answered
        self._quiet_trim: asyncio.Task | None = None
        self.memory_returned = 0  # times freed memory went back to the system (for tests)
        self.running = ""  # what the keyword worker is doing: reconcile | index | saves | ""
        self.reconciled = False  # a whole-vault scan has completed since start
        self.reconciled_from: float | None = None  # wall clock at the start of the last whole-vault scan completed
        self.vectors_busy = False
        self.last_report: SyncReport | None = None
        self.last_sync_at: float | None = None
        self.last_error: str | None = None
        self.vector_error: str | None = None
        self.failures = 0
        self._logged_failure_at = float("-inf")
        indexer.embedder.on_change(self._embedder_changed)

    # ---- producers (touch and request_reconcile are safe from any thread) ----

    def touch(self, path: str) -> None:
        self.loop.call_soon_threadsafe(self._touch, path, self.debounce)

    def touch_now(self, path: str) -> None:
        """Index a path as soon as the worker can, without waiting for it (a file tars just
        wrote; a search meanwhile settles on it)."""
        self.loop.call_soon_threadsafe(self._touch, path, 0.0)

    def _touch(self, path: str, delay: float) -> None:
        now = time.monotonic()
        deadline = now + delay
        with self._lock:
            # A path already due (a search or tars's own write asked for it) is not put off
            # by the event of that very save arriving a moment later.
            if self._due.get(path, deadline) > now:
                self._due[path] = deadline
        self.loop.call_at(self.loop.time() + delay, self._deadline_passed)

    def _deadline_passed(self) -> None:
        self._urgent.set()
        self._wake.set()

    def request_reconcile(self) -> None:
        self.loop.call_soon_threadsafe(self._request_reconcile)

    def _request_reconcile(self) -> None:
        self._reconcile = True
        self._wake.set()

    def enqueue(
        self, paths: list[str] | None, full: bool = False, progress: Progress | None = None
    ) -> tuple[asyncio.Future, QueuePosition]:
        """Queue an index request; the future gets its SyncReport (keyword rows committed;
        vectors follow in the background). Also says what is ahead of it."""
        job = _Job("index", paths, full=full, progress=progress, done=self.loop.create_future())
        position = QueuePosition(ahead=len(self._jobs) + int(self._reconcile), running=self.running)
        self._jobs.append(job)
        self.indexer.embedder.retry_now()  # an explicit index is the user's "try the model again"
        self._wake.set()
        return job.done, position

    async def index(self, paths: list[str] | None, full: bool = False, progress: Progress | None = None) -> SyncReport:
        done, _ = self.enqueue(paths, full, progress)
        return await done

    async def settle(self, timeout: float) -> bool:
        """Commit the saves already queued (still in their debounce, or being written) before a
        search answers, waiting at most ``timeout``. False if that was not enough."""
        return await self._commit_now(None, timeout)

    async def refresh(self, paths: list[str], timeout: float) -> bool:
        """Index these paths now, between two files of any long sync (a file tars just wrote)."""
        return await self._commit_now(paths, timeout)

    async def _commit_now(self, paths: list[str] | None, timeout: float) -> bool:
        with self._lock:
            if paths is not None:
                self._due.update(dict.fromkeys(paths, 0.0))
            # The take that commits each path: the next one for a due path, the running one otherwise.
            needed = {p: self._taken.get(p, 0) + 1 for p in self._due}
            needed.update({p: self._taken.get(p, 0) for p in self._in_flight if p not in needed})
            if not needed:
                return True
            for path in self._due:
                self._due[path] = 0.0  # due now
        self._urgent.set()
        self._wake.set()

        def committed() -> bool:
            with self._lock:
                return all(self._finished.get(p, 0) >= take and p not in self._retrying for p, take in needed.items())

        try:
            async with self._settled:
                await asyncio.wait_for(self._settled.wait_for(committed), timeout)
        except TimeoutError:
            return False
        return True

    @property
    def depth(self) -> int:
        with self._lock:
            due = len(self._due)
        return due + len(self._jobs) + int(self._reconcile)

    def queued_paths(self) -> set[str]:
        with self._lock:
            return set(self._due) | self._in_flight

    @property
    def busy(self) -> bool:
        return bool(self.running) or self.vectors_busy

    def describe_retry(self) -> dict[str, object]:
        return {"error": self._retry.error or "", "next_attempt_at": self._retry.at}

    # ---- the keyword worker ----

    async def run(self) -> None:
        while not self._stopping:
            self._wake.clear()  # before looking, so a wake-up after the look is never lost
            job = self._next_job()
            if job is None:
                await self._wake.wait()
                continue
            await self._run_job(job)

    def waiting(self) -> bool:
        """Cheap: may a path be due? (The sync thread asks between every two files.)"""
        return self._urgent.is_set()

    def take(self) -> list[str]:
        """Paths whose debounce has passed, marked in flight (called from the sync thread too)."""
        self._urgent.clear()
        now = time.monotonic()
        with self._lock:
            ready = [path for path, deadline in self._due.items() if deadline <= now]
            for path in ready:
                del self._due[path]
                self._taken[path] = self._taken.get(path, 0) + 1
            self._in_flight.update(ready)
            self._retrying.difference_update(ready)
        return ready

    def finished(self, paths: list[str]) -> None:
        """Paths committed (called from the sync thread): wake searches waiting to settle."""
        with self._lock:
            self._in_flight.difference_update(paths)
            self._finished.update({p: self._taken.get(p, 0) for p in paths})
        self.loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._notify_settled()))

    async def _notify_settled(self) -> None:
        async with self._settled:
            self._settled.notify_all()

    def _next_job(self) -> _Job | None:
        # Fresh saves first: they are small, and they are what the user searches for next.
        ready = self.take()
        if ready:
            return _Job("paths", ready)
        if self._jobs:
            return self._jobs.popleft()
        if self._reconcile:
            self._reconcile = False
            return _Job("reconcile", None)
        return None

    async def _run_job(self, job: _Job) -> None:
        self.running = {"paths": "saves"}.get(job.kind, job.kind)
        urgent = self if job.paths is None or len(job.paths) > 1 else None
        started = time.time()
        try:
            report = await asyncio.to_thread(self.indexer.sync, job.paths, full=job.full, embed=False, progress=job.progress, urgent=urgent)
        except VaultMissing as exc:
            # Not a failure to retry: the watcher rescans the vault when its folder is back.
            log.info("sync put off: %s", exc)
            if job.done is not None and not job.done.done():
                job.done.set_exception(exc)
            return
        except Exception as exc:  # the worker must survive anything one sync throws
            self._failed(job, exc)
            return
        finally:
            self.running = ""
            if job.kind == "paths":
                self.finished(job.paths or [])
        if self.indexer.stop.is_set():
            if job.done is not None and not job.done.done():
                job.done.cancel()
            return
        self._succeeded(job, report, started)

    def _succeeded(self, job: _Job, report: SyncReport, started: float) -> None:
        if job.paths is None:
            self.reconciled, self.reconciled_from = True, started
        self.last_report, self.last_sync_at = report, time.time()
        if self.last_error is not None:
            log.info("indexing works again")
        self.last_error, self.failures = None, 0
        self._retry = _Retry()
        if report.indexed or report.deleted or report.skipped:
            log.info(
                "synced %s: %d indexed, %d deleted, %d skipped in %.2fs",
                "vault" if job.paths is None else f"{len(job.paths)} path(s)",
                report.indexed,
                report.deleted,
                report.skipped,
                report.seconds,
            )
        if max(report.scanned, report.indexed + report.deleted) >= TRIM_AFTER_FILES:
            self._trim_when_idle = True
        self._vectors_wake.set()
        if job.done is not None and not job.done.done():
            job.done.set_result(report)

    def _failed(self, job: _Job, exc: Exception) -> None:
        """Log the real cause, tell the waiting client, and retry the same work later."""
        reason = explain(exc, self.indexer.store.path)
        self.failures += 1
        now = time.monotonic()
        # The same failure again (every retry of a full disk) is logged once, then as a reminder.
        if reason != self.last_error or now - self._logged_failure_at >= FAILURE_REMINDER_SECONDS:
            self._logged_failure_at = now
            again = f" ({self.failures} attempts so far)" if reason == self.last_error else ""
            if reason.startswith(type(exc).__name__):  # nothing known about it: keep the traceback
                log.error("sync failed%s: %s", again, reason, exc_info=exc)
            else:
                log.error("sync failed%s: %s", again, reason)
        self.last_error = reason
        retry = self._retry
        retry.delay = self.retry_seconds if retry.delay == 0 else min(self.retry_max_seconds, retry.delay * 2)
        retry.at, retry.error = time.time() + retry.delay, reason
        if job.paths is None:
            self.loop.call_later(retry.delay, self._request_reconcile)
        else:
            with self._lock:
                self._retrying.update(job.paths)
            for path in job.paths:
                self._touch(path, retry.delay)
        self._vectors_wake.set()
        if job.done is not None and not job.done.done():
            job.done.set_exception(SyncFailed(f"{reason} (next attempt in {retry.delay:.0f} s)"))

    # ---- the vector worker ----

    def _embedder_changed(self) -> None:
        """From the embedder's loader thread after each load attempt."""
        self.loop.call_soon_threadsafe(self._vectors_wake.set)
        if self.indexer.embedder.ready and self._chunking_changed():
            # The model brought its own tokenizer: notes chunked by the estimate are redone.
            self.request_reconcile()

    def _chunking_changed(self) -> bool:
        return self.indexer.store.uses_other_chunking(self.indexer.chunking_fingerprint())

    async def run_vectors(self) -> None:
        embedder, store = self.indexer.embedder, self.indexer.store
        while not self._stopping:
            self._vectors_wake.clear()  # before looking, so a wake-up after the look is never lost
            pending = embedder.enabled and await asyncio.to_thread(store.has_pending_vectors)
            if pending and embedder.available():
                await self._embed_round()
                self._trim_when_idle = True
                continue
            if pending and embedder.state == "unavailable" and embedder.next_retry_at is not None:
                # Sleep until the model's back-off ends; available() then starts the retry,
                # whose end wakes this loop again.
                await self._sleep(max(0.1, embedder.next_retry_at - time.time()))
                continue
            if self._trim_when_idle:
                self._trim_when_idle = False
                await asyncio.to_thread(self._release_memory)
            await self._vectors_wake.wait()

    def answered(self) -> None:
        """A request was answered (on the event loop): freed memory goes back once tarsd is quiet."""
        self._answered_at = time.monotonic()
        if self._quiet_trim is None or self._quiet_trim.done():
            self._quiet_trim = self.loop.create_task(self._trim_when_quiet(), name="quiet-trim")

    async def _trim_when_quiet(self) -> None:
        while (left := self._answered_at + QUIET_TRIM_SECONDS - time.monotonic()) > 0:
            await asyncio.sleep(left)
        if not self._stopping and not self.busy:  # a sync or an embedding round trims at its own end
            await asyncio.to_thread(self._release_memory)

    def _release_memory(self) -> None:
        try:
            self.indexer.store.shrink_caches()
        except apsw.Error as exc:  # a closed or busy connection: the memory goes back next time
            log.debug("could not shrink the page caches: %s", exc)
        return_freed_memory()
        self.memory_returned += 1

    async def _embed_round(self) -> None:
        store = self.indexer.store
        report = SyncReport()
        self.vectors_busy = True
        try:
            await asyncio.to_thread(self.indexer.embed_pending, report, None, 1)
        except Exception as exc:  # a full disk, a locked database: back off and retry
            reason = explain(exc, store.path)
            self._vector_retry = min(VECTOR_RETRY_MAX_SECONDS, max(VECTOR_RETRY_SECONDS, self._vector_retry * 2))
            if reason != self.vector_error:
                log.error("embedding round failed: %s; retrying with back-off", reason)
            self.vector_error = reason
            await self._sleep(self._vector_retry)
            return
        finally:
            self.vectors_busy = False
        if self.vector_error is not None and report.embedder_error is None:
            log.info("embedding works again")
        self.vector_error, self._vector_retry = report.embedder_error, 0.0

    async def _sleep(self, seconds: float) -> None:
        """Wait, unless woken (new work, a stop) first."""
        try:
            await asyncio.wait_for(self._vectors_wake.wait(), seconds)
        except TimeoutError:
            pass

    async def stop(self) -> None:
        """Stop after the file being written now; its transaction always completes."""
        self._stopping = True
        if self._quiet_trim is not None:
            self._quiet_trim.cancel()
        self.indexer.stop.set()
        self._wake.set()
        self._vectors_wake.set()
        for job in self._jobs:
            if job.done is not None and not job.done.done():
                job.done.cancel()
