"""When routines are due. The clock never runs one itself: it claims the occurrence in the ledger
(so none runs twice, across restarts too) and hands it to ``fire``, which runs it as a task and
records how it ended (``Ledger.finish``).

One timer (``loop.call_at``) for the earliest routine due, never a periodic poll: an idle tarsd
with routines wakes only when one is due. Due times are wall-clock (unix) times, turned into the
loop's monotonic time when the timer is armed. A machine that slept (the loop's clock stands
still meanwhile) is noticed by ``check``, which other periodic jobs and requests call: the wall
clock moved further than the loop's, so whatever came due is run now, late.

Missed occurrences are coalesced: of those since the last one taken, only the latest counts. Within
its grace it runs (late); older, it is recorded skipped and listed. The earlier ones are recorded
nowhere: ten missed hourly runs are one catch-up run, not ten.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from tarsd.routines.book import Book, Routine
from tarsd.routines.ledger import Ledger
from tarsd.routines.schedule import Schedule, ScheduleError, parse_schedule

log = logging.getLogger(__name__)

Fire = Callable[[Routine, datetime, bool], Awaitable[None]]  # (routine, scheduled time, late)
# A run that starts this long after its time is late (the loop was busy, the machine asleep).
LATE_AFTER_SECONDS = 60.0
# check(): the wall clock and the loop's clock may drift apart by this much before it counts as a jump.
JUMP_SECONDS = 2.0
STILL_GOING = "the previous run was still going"


def _hours_or_minutes(seconds: float) -> str:
    if seconds >= 5400:
        return f"{seconds / 3600:.0f} h"
    return f"{max(1, round(seconds / 60))} min"


class RoutineClock:
    def __init__(
        self,
        book: Book,
        ledger: Ledger,
        tz: ZoneInfo,
        fire: Fire,
        reminder_grace: timedelta,
        routine_grace: timedelta,
        now: Callable[[], float] = time.time,
    ):
        self.book = book
        self.ledger = ledger
        self.tz = tz
        self.fire = fire
        self.reminder_grace = reminder_grace
        self.routine_grace = routine_grace
        self.now = now
        self.timer: asyncio.TimerHandle | None = None
        self.armed_count = 0  # how often a timer was armed (an idle clock arms none)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._due: dict[str, float] = {}  # routine -> its next occurrence (unix time)
        self._routines: dict[str, Routine] = {}
        self._schedules: dict[str, Schedule] = {}  # by schedule text
        self._running: dict[str, asyncio.Task] = {}
        self._armed_wall = 0.0
        self._armed_loop = 0.0
        self._book_version = -1
        self._stopped = False

    async def start(self) -> list[str]:
        """Catch up on what was missed while tarsd was not running, then arm the timer. For each
        routine (not paused) the occurrences since the last one taken (or its creation) are
        coalesced into the latest: within its grace it fires once, late; older, it is recorded
        skipped and a line says so (returned, for the log and status)."""
        self._loop = asyncio.get_running_loop()
        self._stopped = False
        lines = self._catch_up(start=True)
        self.rearm()
        return lines

    def rearm(self) -> None:
        """Recompute when each routine is next due (the book changed, the clock jumped) and arm one
        timer for the earliest. One query and a stat when nothing changed."""
        if self._loop is None or self._stopped:
            return
        routines = self.book.load()
        self._book_version = self.book.version
        self._routines = {r.name: r for r in routines}
        taken = self.ledger.last_scheduled_all()
        self._due = {}
        for routine in routines:
            series = self._series(routine, taken)
            if series is None:
                continue
            schedule, since, anchor = series
            upcoming = schedule.next_after(since, anchor)
            if upcoming is not None:
                self._due[routine.name] = upcoming.timestamp()
        self._arm()

    def check(self) -> None:
        """Cheap; called by periodic jobs and on requests. When the wall clock moved more than the
        loop's since the timer was armed (the machine slept), or the routines file changed, what is
        due now runs (late if past) and the timer is armed again."""
        if self._loop is None or self._stopped:
            return
        wall = self.now() - self._armed_wall
        steady = self._loop.time() - self._armed_loop
        self.book.load()
        if abs(wall - steady) > JUMP_SECONDS or self.book.version != self._book_version:
            self._on_timer()

    def next_run(self, name: str) -> datetime | None:
        due = self._due.get(name)
        return datetime.fromtimestamp(due, self.tz) if due is not None else None

    async def stop(self) -> None:
        """No more fires; runs still going are cancelled (their fire() sees CancelledError and may
        record them; one that does not is marked interrupted at the next start)."""
        self._stopped = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        tasks = [task for task in self._running.values() if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._running.clear()

    # Inside

    def _series(self, routine: Routine, taken: dict[str, float]) -> tuple[Schedule, datetime, datetime] | None:
        """(its schedule, the time its next occurrence comes after, the anchor of an `every` series);
        None for a routine that never comes due (paused, or a schedule that cannot be read). ``taken``:
        the latest occurrence taken of each routine (Ledger.last_scheduled_all)."""
        if routine.paused:
            return None
        schedule = self._schedule(routine)
        if schedule is None:
            return None
        since = max(taken.get(routine.name, routine.created), routine.created)
        return schedule, datetime.fromtimestamp(since, UTC), datetime.fromtimestamp(routine.created, UTC)

    def _schedule(self, routine: Routine) -> Schedule | None:
        schedule = self._schedules.get(routine.schedule)
        if schedule is None:
            try:
                # now = the epoch: a one-shot that has passed is still read (the ledger knows whether it ran).
                schedule = parse_schedule(routine.schedule, self.tz, datetime.fromtimestamp(0, UTC))
            except ScheduleError as exc:  # the book checks schedules; a time zone change could still refuse one
                log.warning("routine %s: %s", routine.name, exc)
                return None
            self._schedules[routine.schedule] = schedule
        return schedule

    def _arm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        assert self._loop is not None
        self._armed_wall = self.now()
        self._armed_loop = self._loop.time()
        if not self._due:
            return
        earliest = min(self._due.values())
        delay = max(0.0, earliest - self._armed_wall)
        self.timer = self._loop.call_at(self._armed_loop + delay, self._on_timer)
        self.armed_count += 1

    def _on_timer(self) -> None:
        self.timer = None
        if self._stopped:
            return
        try:
            self._catch_up(start=False)
        except Exception:  # a database error must not stop the clock for good: the next check re-arms
            log.exception("routines: checking what is due failed")
        self.rearm()

    def _catch_up(self, start: bool) -> list[str]:
        """Each routine with an occurrence due by now: its latest one fires (within grace) or is
        skipped (older, or its previous run still going)."""
        now = self.now()
        now_at = datetime.fromtimestamp(now, UTC)
        routines = self.book.load()
        taken = self.ledger.last_scheduled_all()
        lines: list[str] = []
        for routine in routines:
            series = self._series(routine, taken)
            if series is None:
                continue
            schedule, since, anchor = series
            latest = schedule.latest_between(since, now_at, anchor)
            if latest is None:
                continue
            occurrence = latest.timestamp()
            missed_by = now - occurrence
            grace = routine.grace(self.reminder_grace, self.routine_grace)
            running = self._running.get(routine.name)
            if running is not None and not running.done():
                self.ledger.skipped(routine.name, occurrence, STILL_GOING)
                lines.append(f"{routine.name}: the run of {self._shown(latest)} was skipped ({STILL_GOING})")
            elif missed_by > grace.total_seconds():
                detail = f"missed by {_hours_or_minutes(missed_by)}, grace {_hours_or_minutes(grace.total_seconds())}"
                if self.ledger.skipped(routine.name, occurrence, detail) is not None:
                    what = "reminder" if routine.is_reminder else "run"
                    lines.append(f"{routine.name}: the {what} of {self._shown(latest)} was skipped ({detail})")
            else:
                late = start or missed_by > LATE_AFTER_SECONDS
                if self.ledger.claim(routine.name, occurrence, late) is None:
                    continue  # taken already (another clock, a restart that ran it)
                self._start_fire(routine, latest, late)
        for line in lines:
            log.info("routines: %s", line)
        return lines

    def _shown(self, when: datetime) -> str:
        local = when.astimezone(self.tz)
        today = datetime.fromtimestamp(self.now(), self.tz).date()
        return f"{local:%H:%M}" if local.date() == today else f"{local:%Y-%m-%d %H:%M}"

    def _start_fire(self, routine: Routine, when: datetime, late: bool) -> None:
        assert self._loop is not None
        task = self._loop.create_task(self._fire(routine, when, late), name=f"routine {routine.name}")
        self._running[routine.name] = task

    async def _fire(self, routine: Routine, when: datetime, late: bool) -> None:
        try:
            await self.fire(routine, when.astimezone(self.tz), late)
        except asyncio.CancelledError:
            raise
        except Exception:  # fire() records its own failures; one it did not is logged, the clock goes on
            log.exception("routine %s: the run of %s failed", routine.name, when.isoformat())
        finally:
            if self._running.get(routine.name) is asyncio.current_task():
                del self._running[routine.name]
