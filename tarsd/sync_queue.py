"""The daemon's single indexing worker and the queue that feeds it.

Watch events arrive per path and are debounced (a save is often several events); explicit
index requests and reconcile scans queue behind them. One worker runs the jobs in a thread,
one at a time, so SQLite sees a single writer. Between jobs it embeds pending chunks a small
round at a time, so a freshly saved note is searchable by keyword at once and never waits
behind a long embedding backlog.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from .indexer import Indexer, Progress, SyncReport

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Job:
    paths: list[str] | None  # None: the whole vault
    full: bool = False
    embed: bool = True
    progress: Progress | None = None
    done: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class SyncQueue:
    def __init__(self, indexer: Indexer, debounce_seconds: float):
        self.indexer = indexer
        self.debounce = debounce_seconds
        self.loop = asyncio.get_running_loop()
        self._due: dict[str, float] = {}  # path -> loop time when its debounce ends
        self._jobs: list[_Job] = []
        self._reconcile = False
        self._wake = asyncio.Event()
        self._stopping = False
        self.busy = False
        self.last_report: SyncReport | None = None
        self.last_sync_at: float | None = None
        self.last_error: str | None = None

    # ---- producers (touch and request_reconcile are safe from any thread) ----

    def touch(self, path: str) -> None:
        self.loop.call_soon_threadsafe(self._touch, path)

    def _touch(self, path: str) -> None:
        deadline = self.loop.time() + self.debounce
        self._due[path] = deadline
        self.loop.call_at(deadline, self._wake.set)

    def request_reconcile(self) -> None:
        self.loop.call_soon_threadsafe(self._request_reconcile)

    def _request_reconcile(self) -> None:
        self._reconcile = True
        self._wake.set()

    async def index(self, paths: list[str] | None, full: bool = False, embed: bool = True, progress: Progress | None = None) -> SyncReport:
        """Queue an index request and wait for its report. Without ``embed`` the new chunks'
        vectors are made afterwards, in the background rounds."""
        job = _Job(paths, full=full, embed=embed, progress=progress)
        self._jobs.append(job)
        self._wake.set()
        return await job.done

    @property
    def depth(self) -> int:
        return len(self._due) + len(self._jobs) + int(self._reconcile)

    # ---- the worker ----

    async def run(self) -> None:
        while not self._stopping:
            job = self._next_job()
            if job is None:
                if await self._embed_round():
                    continue
                self._wake.clear()
                if self._next_job_ready():
                    continue
                await self._wake.wait()
                continue
            await self._run_job(job)

    def _next_job_ready(self) -> bool:
        now = self.loop.time()
        return bool(self._jobs) or self._reconcile or any(t <= now for t in self._due.values())

    def _next_job(self) -> _Job | None:
        if self._jobs:
            return self._jobs.pop(0)
        if self._reconcile:
            self._reconcile = False
            self._due.clear()  # the scan covers them
            return _Job(None, embed=False)
        now = self.loop.time()
        ready = [path for path, deadline in self._due.items() if deadline <= now]
        for path in ready:
            del self._due[path]
        return _Job(ready, embed=False) if ready else None

    async def _run_job(self, job: _Job) -> None:
        self.busy = True
        try:
            report = await asyncio.to_thread(self.indexer.sync, job.paths, full=job.full, embed=job.embed, progress=job.progress)
        except Exception as exc:  # the worker must survive anything one sync throws
            log.exception("sync failed")
            self.last_error = f"{type(exc).__name__}: {exc}"
            if not job.done.done():
                job.done.set_exception(exc)
            return
        finally:
            self.busy = False
        self.last_report, self.last_sync_at, self.last_error = report, time.time(), None
        if report.indexed or report.deleted or report.skipped:
            log.info(
                "synced %s: %d indexed, %d deleted, %d skipped in %.2fs",
                "vault" if job.paths is None else f"{len(job.paths)} path(s)",
                report.indexed,
                report.deleted,
                report.skipped,
                report.seconds,
            )
        if not job.done.done():
            job.done.set_result(report)

    async def _embed_round(self) -> bool:
        """Embed one round of pending chunks; False when there is nothing (or no embedder)."""
        embedder = self.indexer.embedder
        if not embedder.enabled or not self.indexer.store.has_pending_vectors() or not embedder.available():
            return False
        self.busy = True
        try:
            report = SyncReport()
            await asyncio.to_thread(self.indexer.embed_pending, report, None, 1)
        finally:
            self.busy = False
        return report.vectors_embedded > 0 and report.embedder_error is None

    async def stop(self) -> None:
        """Stop after the file being written now; its transaction always completes."""
        self._stopping = True
        self.indexer.stop.set()
        self._wake.set()
        for job in self._jobs:
            if not job.done.done():
                job.done.cancel()
