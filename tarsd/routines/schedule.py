"""When a routine runs: its schedule, read from what the user wrote, and the times it fires.

Three forms, each refused with a message that says what is wrong and a hint with examples:

- a 5-field crontab, ``30 7 * * 1-5`` (also written ``cron 30 7 * * 1-5``), in the user's time
  zone: a daily 07:30 stays 07:30 local on both sides of a daylight-saving change;
- ``every 2h`` / ``every 15 min`` / ``every 30s`` / ``every 1d``: a fixed length of real time from
  the routine's creation (the anchor), so a change of the clocks neither stretches nor shrinks it;
- a one-shot local date-time, ``2026-11-27 15:00`` or ``2026-11-27T15:00`` (an offset, ``+01:00``
  or ``Z``, pins it to that instant).

A local time the clocks skip (02:30 on the night they go forward) is refused: it never happens,
and guessing 01:30 or 03:30 for the user would be wrong one way or the other; the hint says so.
A local time the clocks pass twice (02:30 on the night they go back) is the first of the two,
the earlier instant, as a person who set it the evening before would expect; an offset picks
the other.

Fire times come from APScheduler's triggers (cron rules are not hand-rolled here).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

CRON, EVERY, ONCE = "cron", "every", "once"
KINDS = (CRON, EVERY, ONCE)

SCHEDULE_HINT = (
    'a schedule is a crontab of 5 fields ("30 7 * * 1-5": 07:30 on weekdays), '
    '"every N" with a unit s, min, h or d ("every 2h", "every 15 min"), '
    'or a date and time ("2026-11-27 15:00")'
)
WHEN_HINT = 'say when as "15:00" (today, or tomorrow once it has passed), "2026-11-27 15:00", or "in 20 min" (s, min, h, d)'

_UNITS = {
    "s": 1,
    "sec": 1,
    "secs": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "mins": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hr": 3600,
    "hrs": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
}
_EVERY = re.compile(r"^every\s+(?P<count>\d+)\s*(?P<unit>[a-z]+)$")
_IN = re.compile(r"^in\s+(?P<count>\d+)\s*(?P<unit>[a-z]+)$")
_CLOCK = re.compile(r"^(?P<hour>\d{1,2}):(?P<minute>\d{2})$")
# A date and a time, with "T" or a space between, seconds and an offset optional.
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$")
# Catch-up looks back from now for the latest occurrence in windows that double from this size.
_FIRST_WINDOW = timedelta(minutes=1)
_ONE_MICROSECOND = timedelta(microseconds=1)


class ScheduleError(ValueError):
    """A schedule or a time that cannot be used; ``hint`` says which forms are accepted."""

    def __init__(self, message: str, hint: str = SCHEDULE_HINT):
        super().__init__(message)
        self.hint = hint


def user_timezone(name: str) -> ZoneInfo:
    """The user's time zone: the IANA name given, or the machine's when it is empty."""
    if not name:
        import tzlocal

        name = tzlocal.get_localzone_name() or "UTC"
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ScheduleError(f"{name!r} is not a known time zone", 'use an IANA name like "Europe/Berlin" or "America/New_York"') from exc


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: ``text`` as the user wrote it, ``kind`` one of cron, every, once."""

    text: str
    kind: str
    tz: ZoneInfo = field(default=ZoneInfo("UTC"), compare=False)
    # every: the length in seconds; once: the instant (unix time). Unused for cron.
    seconds: float = field(default=0.0, compare=False)
    at: float = field(default=0.0, compare=False)
    _cron: CronTrigger | None = field(default=None, repr=False, compare=False)

    def next_after(self, after: datetime, anchor: datetime) -> datetime | None:
        """The first fire time strictly after ``after`` (aware), in the user's zone; ``anchor`` is
        the start of an ``every`` series (the routine's creation). None: a one-shot that has passed."""
        # Aware datetimes of one zone compare and subtract by their wall clocks: all in UTC here.
        after, anchor = after.astimezone(UTC), anchor.astimezone(UTC)
        if self.kind == ONCE:
            run = DateTrigger(datetime.fromtimestamp(self.at, UTC), timezone=self.tz).get_next_fire_time(None, after)
            return run.astimezone(self.tz) if run is not None and run > after else None
        if self.kind == EVERY:
            # In UTC: the trigger counts whole intervals of real time from the anchor.
            trigger = IntervalTrigger(seconds=self.seconds, start_date=anchor, timezone=UTC)
            run = trigger.get_next_fire_time(None, after + _ONE_MICROSECOND)
            while run is not None and run <= after:  # float rounding of the timestamps: never hand back `after` itself
                run = trigger.get_next_fire_time(run, run)
            return run.astimezone(self.tz) if run is not None else None
        assert self._cron is not None
        run = self._cron.get_next_fire_time(None, (after + _ONE_MICROSECOND).astimezone(self.tz))
        return run.astimezone(self.tz) if run is not None else None

    def occurrences(self, after: datetime, until: datetime, anchor: datetime, limit: int = 1000) -> list[datetime]:
        """The fire times in (after, until], oldest first, at most ``limit`` of them."""
        found: list[datetime] = []
        until = until.astimezone(UTC)
        run = self.next_after(after, anchor)
        while run is not None and run <= until and len(found) < limit:
            found.append(run)
            run = self.next_after(run, anchor)
        return found

    def latest_between(self, after: datetime, until: datetime, anchor: datetime) -> datetime | None:
        """The last fire time in (after, until], without walking every one since ``after`` (a
        routine every 30 s, offline for a week): windows back from ``until`` double until one holds
        a fire time, then the few in it are walked."""
        after, until, anchor = after.astimezone(UTC), until.astimezone(UTC), anchor.astimezone(UTC)
        if until <= after:
            return None
        if self.kind == EVERY:
            span = (until - anchor).total_seconds()
            if span < self.seconds:
                return None
            run = anchor + timedelta(seconds=self.seconds * math.floor(span / self.seconds))
            while run > until:  # float rounding
                run -= timedelta(seconds=self.seconds)
            return run.astimezone(self.tz) if run > after else None
        window = _FIRST_WINDOW
        while True:
            start = max(after, until - window)
            run = self.next_after(start, anchor)
            if run is not None and run <= until:
                latest = run
                while (run := self.next_after(latest, anchor)) is not None and run <= until:
                    latest = run
                return latest
            if start == after:
                return None
            window *= 2


def parse_schedule(text: str, tz: ZoneInfo, now: datetime) -> Schedule:
    """Read a schedule (the forms in the module's docstring). A one-shot before ``now`` is refused."""
    written = " ".join(text.split())
    lowered = written.lower()
    if not lowered:
        raise ScheduleError("the schedule is empty")
    every = _EVERY.match(lowered)
    if every:
        count, unit = int(every["count"]), every["unit"]
        if unit not in _UNITS:
            raise ScheduleError(f"{written!r}: {unit!r} is not a unit of time", 'the units are s, min, h and d: "every 15 min"')
        if count < 1:
            raise ScheduleError(f"{written!r}: the interval must be 1 or more", 'e.g. "every 1h"')
        return Schedule(written, EVERY, tz, seconds=float(count * _UNITS[unit]))
    if lowered.startswith("every"):
        raise ScheduleError(f"{written!r} is not an interval", '"every N UNIT" with N a whole number and UNIT s, min, h or d: "every 2h"')
    if _DATE_TIME.match(written) or re.match(r"^\d{4}-\d{2}-\d{2}", written):
        at = _date_time(written, tz)
        if at <= now:
            raise ScheduleError(
                f"{written!r} has passed already (it is {now.astimezone(tz):%Y-%m-%d %H:%M} now)",
                'give a date and time still to come, as "YYYY-MM-DD HH:MM"',
            )
        return Schedule(written, ONCE, tz, at=at.timestamp())
    expression = written[len("cron ") :] if lowered.startswith("cron ") else written
    fields = expression.split()
    if len(fields) != 5:
        raise ScheduleError(
            f"{written!r} is not a schedule: a crontab has 5 fields (minute hour day month weekday), this has {len(fields)}"
        )
    try:
        trigger = CronTrigger.from_crontab(expression, timezone=tz)
    except (ValueError, TypeError) as exc:
        raise ScheduleError(f"{written!r} is not a valid crontab: {exc}") from exc
    schedule = Schedule(written, CRON, tz, _cron=trigger)
    if schedule.next_after(now, now) is None:
        raise ScheduleError(f"{written!r} never fires (no such date)", 'check the day and month fields: "0 9 29 2 *" is 29 February')
    return schedule


def parse_when(text: str, tz: ZoneInfo, now: datetime) -> datetime:
    """When a reminder is due: "HH:MM" (today in ``tz``, tomorrow once that has passed), a date
    and time (without an offset: in ``tz``), or "in N UNIT" from ``now``. A time past is refused."""
    written = " ".join(text.split())
    lowered = written.lower()
    local_now = now.astimezone(tz)
    relative = _IN.match(lowered)
    if relative:
        count, unit = int(relative["count"]), relative["unit"]
        if unit not in _UNITS:
            raise ScheduleError(f"{written!r}: {unit!r} is not a unit of time", WHEN_HINT)
        if count < 1:
            raise ScheduleError(f"{written!r} is not in the future", WHEN_HINT)
        return local_now + timedelta(seconds=count * _UNITS[unit])
    clock = _CLOCK.match(lowered)
    if clock:
        hour, minute = int(clock["hour"]), int(clock["minute"])
        if hour > 23 or minute > 59:
            raise ScheduleError(f"{written!r} is not a time of day", WHEN_HINT)
        day = local_now.date()
        for _ in range(3):  # today, else tomorrow; a day on which that time is skipped (DST): the next
            try:
                at = _local(datetime(day.year, day.month, day.day, hour, minute), tz, written)
            except ScheduleError:
                at = None
            if at is not None and at > now:
                return at
            day += timedelta(days=1)
        raise ScheduleError(f"{written!r} does not come in the next days", WHEN_HINT)
    if _DATE_TIME.match(written):
        at = _date_time(written, tz, WHEN_HINT)
        if at <= now:
            raise ScheduleError(f"{written!r} has passed already (it is {local_now:%Y-%m-%d %H:%M} now)", WHEN_HINT)
        return at
    raise ScheduleError(f"{written!r} is not a time", WHEN_HINT)


def _date_time(written: str, tz: ZoneInfo, hint: str = SCHEDULE_HINT) -> datetime:
    try:
        parsed = datetime.fromisoformat(written.replace(" ", "T", 1))
    except ValueError as exc:
        raise ScheduleError(f"{written!r} is not a date and time: {exc}", hint) from exc
    if parsed.tzinfo is not None:
        return parsed.astimezone(tz)
    return _local(parsed, tz, written, hint)


def _local(naive: datetime, tz: ZoneInfo, written: str, hint: str = SCHEDULE_HINT) -> datetime:
    """A wall-clock time in ``tz``: refused when the clocks skip it, the first of two when they pass it twice."""
    first = naive.replace(tzinfo=tz, fold=0)
    if first.astimezone(UTC).astimezone(tz).replace(tzinfo=None) != naive:
        raise ScheduleError(
            f"{written!r} does not exist in {tz.key}: the clocks skip that hour that night",
            f"pick a time outside the skipped hour, or add the offset you mean, e.g. {naive:%Y-%m-%d %H:%M}+01:00; " + hint,
        )
    return first
