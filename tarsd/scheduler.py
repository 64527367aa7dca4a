"""Scheduled jobs (APScheduler 3.x): the reconcile scan and the watcher health check.

Jobs have explicit ids, replace_existing, coalesce and a generous misfire grace, so a
laptop waking from sleep runs one catch-up instead of a burst.
"""

from __future__ import annotations

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

from .config import DaemonConfig
from .sync_queue import SyncQueue
from .watcher import VaultWatcher

MISFIRE_GRACE_SECONDS = 6 * 3600


def start_scheduler(config: DaemonConfig, queue: SyncQueue, watcher: VaultWatcher) -> AsyncIOScheduler:
    scheduler = AsyncIOScheduler(timezone="UTC")
    common = {"replace_existing": True, "coalesce": True, "max_instances": 1, "misfire_grace_time": MISFIRE_GRACE_SECONDS}

    # Coroutine jobs run on the event loop itself, so they may touch the queue directly.
    async def reconcile() -> None:
        queue.request_reconcile()

    async def check_watcher() -> None:
        watcher.check()

    scheduler.add_job(reconcile, IntervalTrigger(minutes=config.reconcile_minutes), id="reconcile", **common)
    scheduler.add_job(check_watcher, IntervalTrigger(seconds=config.watcher_check_seconds), id="watcher-health", **common)
    scheduler.start()
    return scheduler
