"""When routines are due. The clock never runs one itself: it claims the occurrence in the ledger
(so none runs twice, across restarts too) and hands it to ``fire``, which runs it as a task and
records how it ended (``Ledger.finish``).

One timer (``loop.call_at``) for the earliest routine due, never a periodic poll: an idle tarsd
with routines wakes only when one is due. The next due time of every routine is kept in a heap, so
a fire costs O(log n) on the event loop whatever the number of routines: only the routine that is
due has its next time computed and pushed back. The routines file is read again, and the times of
the routines it changed computed, only when it changed, and then in a worker thread; every write
tars makes through the book (a command, the web page, a reminder the model set, an approved
proposal) tells the clock at once (``Book.on_written``). Due times are wall-clock (unix) times,
turned into the loop's monotonic time when the timer is armed. A machine that slept (the loop's
clock stands still meanwhile) is noticed by ``check``, which other periodic jobs and requests call:
the wall clock moved further than the loop's, so whatever came due is run now, late.

Missed occurrences are coalesced: of those since the last one taken, only the latest counts. Within
its grace it runs (late); older, it is recorded skipped and listed. The earlier ones are recorded
nowhere: ten missed hourly runs are one catch-up run, not ten. A routine resumed, or given a new
schedule, starts from now: what it missed meanwhile is not run.

One routine's error never stops the others: a routine whose times cannot be computed (a schedule
so far off that its next time is past the calendar's end, a creation time out of range) is set
aside with its error, named by ``problems`` (status, `tarsctl routines`, doctor), until the file
changes; the others keep firing, and tarsd starts.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from tarsd.routines.book import Book, Routine
from tarsd.routines.ledger import Ledger
from tarsd.routines.schedule import Schedule, parse_schedule

log = logging.getLogger(__name__)

Fire = Callable[[Routine, datetime, bool], Awaitable[None]]  # (routine, scheduled time, late)
# A run that starts this long after its time is late (the loop was busy, the machine asleep).
LATE_AFTER_SECONDS = 60.0
# check(): the wall clock and the loop's clock may drift apart by this much before it counts as a jump.
JUMP_SECONDS = 2.0
STILL_GOING = "the previous run was still going"
# Routines handled in one turn of the loop when many are due at once (a machine waking after a
# day): the rest in the next turns, so requests are served in between.
BATCH = 100
# Past this many routines to compute at once (the start), the latest occurrences taken come from one
# pass over the runs, and the heap is rebuilt whole, rather than one lookup and one push each.
BULK_LOOKUPS = 200


def _hours_or_minutes(seconds: float) -> str:
    if seconds >= 5400:
        return f"{seconds / 3600:.0f} h"
    return f"{max(1, round(seconds / 60))} min"


@dataclass
class _Slot:
    """One routine as the clock keeps it: when its next occurrence is due (None: never, it is paused
    or done or set aside), and the latest occurrence taken, which catching up starts after."""

    routine: Routine
    schedule: Schedule | None
    since: float  # the latest occurrence taken, or the routine's creation (or the moment it was resumed)
    due: float | None
    error: str = ""  # why it is set aside
    generation: int = 0  # heap entries of an older generation are stale
    caught_up: datetime | None = None  # computed off the loop: its latest occurrence due by now, to handle first


@dataclass
class _Plan:
    """What a change of the routines file means for the clock, worked out off the loop."""

    version: int  # the book's version it was made from
    removed: list[str] = field(default_factory=list)
    replaced: dict[str, Routine] = field(default_factory=dict)  # new definitions, the same times
    fresh: dict[str, _Slot] = field(default_factory=dict)  # added, or their times changed


def _same_timing(a: Routine, b: Routine) -> bool:
    return (a.schedule, a.paused, a.created) == (b.schedule, b.paused, b.created)


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
        self._slots: dict[str, _Slot] = {}
        self._heap: list[tuple[float, int, str]] = []  # (due, generation, name)
        self._generations = itertools.count(1)
        self._schedules: dict[str, Schedule] = {}  # by schedule text
        self._running: dict[str, asyncio.Task] = {}
        self._writes: set[asyncio.Task] = set()  # ledger writes of skipped occurrences, in flight
        self._refreshing: asyncio.Lock | None = None
        self._refresh_task: asyncio.Task | None = None
        self._refresh_again = False
        self.trouble = ""  # why the routines could not be read at all (a database error), until the next try works
        self._armed_wall = 0.0
        self._armed_loop = 0.0
        self._book_version = -1
        self._stopped = False
        self._skipped_lines: list[str] | None = None  # collects the lines of the start's catch-up

    # ---- what tarsd calls ----

    async def start(self) -> list[str]:
        """Catch up on what was missed while tarsd was not running, then arm the timer. For each
        routine (not paused) the occurrences since the last one taken (or its creation) are
        coalesced into the latest: within its grace it fires once, late; older, it is recorded
        skipped and a line says so (returned, for the log and status)."""
        self._loop = asyncio.get_running_loop()
        self._stopped = False
        self._refreshing = asyncio.Lock()
        self.book.on_written(self._written)
        self._skipped_lines = []
        try:
            await self.refresh(start=True)
            if self._writes:
                await asyncio.gather(*self._writes, return_exceptions=True)
            return self._skipped_lines
        finally:
            self._skipped_lines = None

    async def refresh(self, start: bool = False) -> None:
        """Read the routines file again when it changed (in a worker thread: a stat when it did not),
        compute the times of the routines it added or changed, and re-arm. Returns once done, so a
        reply made after it shows the new next runs."""
        if self._loop is None or self._stopped or self._refreshing is None:
            return
        async with self._refreshing:
            try:
                plan = await asyncio.to_thread(self._plan, self.now())
            except Exception as exc:  # the database, not a routine: the routines known keep firing, the next check tries again
                self.trouble = f"reading the routines failed: {type(exc).__name__}: {exc}; tried again at the next check"
                log.exception("routines: reading %s failed", self.book.path)
            else:
                self.trouble = ""
                if plan is not None and not self._stopped:
                    self._apply(plan, start=start)
        self._jumped()

    def rearm(self) -> None:
        """The routines file may have changed: read it again soon (off the loop) and re-arm. Callable
        from the loop only; from another thread, ``Book.on_written`` does it."""
        self._refresh_soon()

    def check(self) -> None:
        """Cheap; called by periodic jobs and on requests. When the wall clock moved more than the
        loop's since the timer was armed (the machine slept), what is due now runs (late if past);
        and the routines file is looked at (in a worker thread) in case it was edited by hand."""
        if self._loop is None or self._stopped:
            return
        self._jumped()
        self._refresh_soon()

    def next_run(self, name: str) -> datetime | None:
        slot = self._slots.get(name)
        if slot is None or slot.due is None:
            return None
        return datetime.fromtimestamp(slot.due, self.tz)

    def problems(self) -> dict[str, str]:
        """The routines set aside, by name: why their times cannot be computed (they do not run
        until the file changes). Safe from another thread (status is built in one)."""
        return {name: slot.error for name, slot in list(self._slots.items()) if slot.error}

    def earliest(self) -> tuple[float, str]:
        """(unix time, name) of the routine due first; (0.0, "") when none is. Safe from another thread."""
        due = [(slot.due, name) for name, slot in list(self._slots.items()) if slot.due is not None]
        return min(due) if due else (0.0, "")

    async def stop(self) -> None:
        """No more fires; runs still going are cancelled (their fire() sees CancelledError and may
        record them; one that does not is marked interrupted at the next start)."""
        self._stopped = True
        self.book.forget(self._written)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self._refresh_task is not None and not self._refresh_task.done():
            self._refresh_task.cancel()
        tasks = [task for task in self._running.values() if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks or self._writes:
            await asyncio.gather(*tasks, *self._writes, return_exceptions=True)
        self._running.clear()

    # ---- reading the file (in a worker thread) ----

    def _written(self) -> None:
        """Book.on_written: tars wrote the routines file, from any thread."""
        loop = self._loop
        if loop is None or self._stopped:
            return
        try:
            loop.call_soon_threadsafe(self._refresh_soon)
        except RuntimeError:  # the loop closed meanwhile: tarsd is stopping, nothing to arm
            pass

    def _refresh_soon(self) -> None:
        if self._loop is None or self._stopped:
            return
        if self._refresh_task is not None and not self._refresh_task.done():
            self._refresh_again = True  # once more after it: the file may have changed again meanwhile
            return
        self._refresh_task = self._loop.create_task(self._refresh_logged(), name="routines refresh")

    async def _refresh_logged(self) -> None:
        while not self._stopped:
            self._refresh_again = False
            await self.refresh()
            if not self._refresh_again:
                return

    def _plan(self, now: float) -> _Plan | None:
        """In a worker thread: what changed in the file since the clock last read it, and a new slot
        for each routine added or whose timing changed (its schedule, its pause, its creation), so
        that applying it on the loop costs O(changed). None when the file did not change."""
        routines = self.book.load()
        version = self.book.version
        if version == self._book_version:
            return None
        # The slots are read only here: they are added and removed on the loop, under the refresh lock this runs in.
        plan = _Plan(version, removed=list(self._slots.keys() - {routine.name for routine in routines}))
        needed: list[tuple[Routine, bool]] = []
        for routine in routines:
            old = self._slots.get(routine.name)
            if old is not None and not old.error and old.routine == routine:
                continue
            if old is not None and not old.error and _same_timing(old.routine, routine):
                plan.replaced[routine.name] = routine  # a new prompt, grace, target...: its times stay
                continue
            # Resumed, or given a new schedule: from now (what it missed meanwhile is not run).
            needed.append((routine, old is not None and not old.error))
        # The latest occurrence each has taken: one index lookup each, or one pass over the runs for many
        # (at the start). A database error fails the whole refresh (tried again at the next check), not a routine.
        if len(needed) > BULK_LOOKUPS:
            taken_all = self.ledger.last_scheduled_all()
            taken = {routine.name: taken_all.get(routine.name) for routine, _ in needed}
        else:
            taken = {routine.name: self.ledger.last_scheduled(routine.name) for routine, _ in needed if not routine.paused}
        for routine, from_now in needed:
            plan.fresh[routine.name] = self._new_slot(routine, taken.get(routine.name), now, from_now)
        kept = {routine.schedule for routine in routines}
        self._schedules = {text: schedule for text, schedule in self._schedules.items() if text in kept}
        return plan

    def _new_slot(self, routine: Routine, taken: float | None, now: float, from_now: bool) -> _Slot:
        try:
            if routine.paused:
                return _Slot(routine, None, routine.created, None)
            schedule = self._schedule(routine)
            since = max(routine.created, taken) if taken is not None else routine.created
            if from_now:
                since = max(since, now)
            slot = _Slot(routine, schedule, since, None)
            slot.caught_up, slot.due = self._advance(slot, now)
            return slot
        except Exception as exc:
            return self._set_aside(_Slot(routine, None, routine.created, None), exc)

    def _schedule(self, routine: Routine) -> Schedule:
        schedule = self._schedules.get(routine.schedule)
        if schedule is None:
            # now = the epoch: a one-shot that has passed is still read (the ledger knows whether it ran).
            schedule = parse_schedule(routine.schedule, self.tz, datetime.fromtimestamp(0, UTC))
            self._schedules[routine.schedule] = schedule
        return schedule

    def _advance(self, slot: _Slot, now: float) -> tuple[datetime | None, float | None]:
        """(its latest occurrence after ``slot.since`` and by ``now``, or None; the unix time of the
        first one after both). Raises what the schedule raises (a time past the calendar's end)."""
        assert slot.schedule is not None
        anchor = datetime.fromtimestamp(slot.routine.created, UTC)
        since = datetime.fromtimestamp(slot.since, UTC)
        upcoming = slot.schedule.next_after(since, anchor)
        if upcoming is None or upcoming.timestamp() > now:
            return None, upcoming.timestamp() if upcoming is not None else None  # nothing due: most routines, most of the time
        now_at = datetime.fromtimestamp(now, UTC)
        latest = slot.schedule.latest_between(since, now_at, anchor)
        upcoming = slot.schedule.next_after(max(since, now_at, latest or since), anchor)
        return latest, upcoming.timestamp() if upcoming is not None else None

    def _set_aside(self, slot: _Slot, exc: Exception) -> _Slot:
        what = f"its schedule {slot.routine.schedule!r}" if slot.schedule is not None or slot.routine.schedule else "it"
        slot.error = f"set aside, its times cannot be computed: {what}: {exc} (fix or remove it in {self.book.path})"
        slot.schedule, slot.due, slot.caught_up = None, None, None
        log.warning("routine %s: %s", slot.routine.name, slot.error)
        return slot

    # ---- on the loop ----

    def _apply(self, plan: _Plan, start: bool) -> None:
        """The plan made off the loop: removed routines out, new slots in, the definitions that
        changed but not their times (a prompt, a grace) replaced. O(changed) work on the loop (a
        heap rebuilt in O(n) when many changed: the start)."""
        self._book_version = plan.version
        for name in plan.removed:
            del self._slots[name]  # its heap entries are stale from now
        for name, routine in plan.replaced.items():
            self._slots[name].routine = routine
        for name, slot in plan.fresh.items():
            slot.generation = next(self._generations)
            self._slots[name] = slot
            if slot.caught_up is not None:
                self._catch_up(slot, slot.caught_up, start)
                slot.caught_up = None
            if len(plan.fresh) <= BULK_LOOKUPS:
                self._push(slot)
        if len(plan.fresh) > BULK_LOOKUPS or len(self._heap) > 2 * len(self._slots) + 64:
            self._heap = [(s.due, s.generation, n) for n, s in self._slots.items() if s.due is not None]
            heapq.heapify(self._heap)
        self._arm()

    def _push(self, slot: _Slot) -> None:
        if slot.due is not None:
            heapq.heappush(self._heap, (slot.due, slot.generation, slot.routine.name))

    def _arm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        assert self._loop is not None
        self._armed_wall = self.now()
        self._armed_loop = self._loop.time()
        while self._heap and not self._current(self._heap[0]):
            heapq.heappop(self._heap)
        if not self._heap:
            return
        delay = max(0.0, self._heap[0][0] - self._armed_wall)
        self.timer = self._loop.call_at(self._armed_loop + delay, self._on_timer)
        self.armed_count += 1

    def _current(self, entry: tuple[float, int, str]) -> bool:
        slot = self._slots.get(entry[2])
        return slot is not None and slot.generation == entry[1] and slot.due == entry[0]

    def _jumped(self) -> None:
        if self._loop is None or self._stopped:
            return
        wall = self.now() - self._armed_wall
        steady = self._loop.time() - self._armed_loop
        if abs(wall - steady) > JUMP_SECONDS:
            self._on_timer()

    def _on_timer(self) -> None:
        """The routines due by now, at most BATCH of them: each one's latest occurrence is handled
        and its next time computed and pushed; nothing else is looked at."""
        self.timer = None
        if self._stopped:
            return
        now = self.now()
        handled = 0
        while self._heap and self._heap[0][0] <= now and handled < BATCH:
            entry = heapq.heappop(self._heap)
            if not self._current(entry):
                continue
            handled += 1
            slot = self._slots[entry[2]]
            try:
                latest, slot.due = self._advance(slot, now)
                if latest is not None:
                    self._catch_up(slot, latest, start=False)
            except Exception as exc:
                self._set_aside(slot, exc)
                continue
            slot.generation = next(self._generations)
            self._push(slot)
        self._arm()

    def _catch_up(self, slot: _Slot, latest: datetime, start: bool) -> None:
        """The latest occurrence due: it fires (within grace) or is skipped (older, or its previous
        run still going). Either way it is taken: the next catch-up starts after it."""
        routine = slot.routine
        now = self.now()
        occurrence = latest.timestamp()
        slot.since = occurrence
        missed_by = now - occurrence
        grace = routine.grace(self.reminder_grace, self.routine_grace)
        running = self._running.get(routine.name)
        if running is not None and not running.done():
            line = f"{routine.name}: the run of {self._shown(latest)} was skipped ({STILL_GOING})"
            self._skip(routine.name, occurrence, STILL_GOING, line)
        elif missed_by > grace.total_seconds():
            detail = f"missed by {_hours_or_minutes(missed_by)}, grace {_hours_or_minutes(grace.total_seconds())}"
            what = "reminder" if routine.is_reminder else "run"
            line = f"{routine.name}: the {what} of {self._shown(latest)} was skipped ({detail})"
            self._skip(routine.name, occurrence, detail, line)
            if start and self._skipped_lines is not None:
                self._skipped_lines.append(line)
        else:
            late = start or missed_by > LATE_AFTER_SECONDS
            assert self._loop is not None
            task = self._loop.create_task(self._claim_and_fire(routine, latest, late), name=f"routine {routine.name}")
            self._running[routine.name] = task

    def _skip(self, name: str, occurrence: float, detail: str, line: str) -> None:
        log.info("routines: %s", line)
        assert self._loop is not None
        task = self._loop.create_task(asyncio.to_thread(self.ledger.skipped, name, occurrence, detail))
        self._writes.add(task)
        task.add_done_callback(self._written_down)

    def _written_down(self, task: asyncio.Task) -> None:
        self._writes.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("routines: recording a skipped run failed: %s", task.exception())

    def _shown(self, when: datetime) -> str:
        local = when.astimezone(self.tz)
        today = datetime.fromtimestamp(self.now(), self.tz).date()
        return f"{local:%H:%M}" if local.date() == today else f"{local:%Y-%m-%d %H:%M}"

    async def _claim_and_fire(self, routine: Routine, when: datetime, late: bool) -> None:
        try:
            run = await asyncio.to_thread(self.ledger.claim, routine.name, when.timestamp(), late)
            if run is None:
                return  # taken already (another clock, a restart that ran it)
            await self.fire(routine, when.astimezone(self.tz), late)
        except asyncio.CancelledError:
            raise
        except Exception:  # fire() records its own failures; one it did not is logged, the clock goes on
            log.exception("routine %s: the run of %s failed", routine.name, when.isoformat())
        finally:
            if self._running.get(routine.name) is asyncio.current_task():
                del self._running[routine.name]
