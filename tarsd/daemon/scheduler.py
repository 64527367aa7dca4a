"""Scheduled jobs (APScheduler 3.x): the reconcile scan and session-log snapshots of idle
conversations. (The watcher checks its own health: VaultWatcher.supervise.)

Jobs have explicit ids, replace_existing, coalesce and a generous misfire grace, so a
laptop waking from sleep runs one catch-up instead of a burst.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

from tarsd.chat.assistant import Assistant
from tarsd.config.settings import Config
from tarsd.index.sync_queue import SyncQueue

MISFIRE_GRACE_SECONDS = 6 * 3600


log = logging.getLogger(__name__)


def start_scheduler(config: Config, queue: SyncQueue, assistant: Assistant, on_tick: Callable[[], None] | None = None) -> AsyncIOScheduler:
    """``on_tick`` runs with each reconcile: a wake-up that is there anyway, so routines' clock can
    see a suspend without a timer of its own."""
    scheduler = AsyncIOScheduler(timezone="UTC")
    common = {"replace_existing": True, "coalesce": True, "max_instances": 1, "misfire_grace_time": MISFIRE_GRACE_SECONDS}

    # Coroutine jobs run on the event loop itself, so they may touch the queue directly.
    async def reconcile() -> None:
        queue.request_reconcile()
        if on_tick is not None:
            on_tick()

    async def snapshot_sessions() -> None:
        try:
            written = await asyncio.to_thread(assistant.snapshot_idle)
        except Exception:  # a failed snapshot is retried at the next run
            log.exception("session snapshot failed")
            return
        for path in written:
            log.info("idle conversation logged to %s", path)

    daemon = config.daemon
    scheduler.add_job(reconcile, IntervalTrigger(minutes=daemon.reconcile_minutes), id="reconcile", **common)
    scheduler.add_job(snapshot_sessions, IntervalTrigger(minutes=config.chat.snapshot_minutes), id="session-snapshots", **common)
    scheduler.start()
    return scheduler
