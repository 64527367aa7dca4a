"""When a routine runs: its schedule, read from what the user wrote, and the times it fires.

Three forms, each refused with a message that says what is wrong and a hint with examples:

- a 5-field crontab, ``30 7 * * 1-5`` (also written ``cron 30 7 * * 1-5``, or ``@daily`` and
  cron's other names), meaning what crontab(5) says (tarsd/routines/crontab.py: 0 and 7 are
  Sunday, and a day matching either day field runs when both are restricted), in the user's
  time zone;
- ``every 2h`` / ``every 15 min`` / ``every 1d``: a fixed length of real time from the routine's
  creation (the anchor), so a change of the clocks neither stretches nor shrinks it; from the
  minimum interval ([routines] min_interval_seconds) to 366 days;
- a one-shot local date-time, ``2026-11-27 15:00`` or ``2026-11-27T15:00`` (an offset, ``+01:00``
  or ``Z``, pins it to that instant), at most 10 years ahead.

Bounds keep every fire time representable: nothing here computes a date past year 9999, and any
input gives a Schedule or a ScheduleError, never another exception.

Daylight-saving changes, as Vixie/Debian cron has them (cron(8): "Special considerations exist
when the clock is changed by less than 3 hours"):

- a crontab job at a fixed time (minute and hour fields that do not begin with ``*``: ``30 2 * * *``)
  whose time the clocks skip runs once, at the moment they jump (03:00 in Berlin); one whose time
  the clocks pass twice runs once, the first time;
- a wildcard job (``*/15 * * * *``, ``0 * * * *``) follows the clock on the wall: the skipped
  times do not come, and the repeated ones come twice (so ``*/15`` goes on every 15 minutes of
  real time through both nights);
- a one-shot at a local time that the clocks skip is refused (it never happens, and guessing
  01:30 or 03:30 for the user would be wrong one way or the other); one at a time they pass twice
  is the first of the two; an offset picks the other.

Which days and times match comes from APScheduler's CronTrigger, handed each field as the explicit
list crontab.py read (the weekdays by name), with an OrTrigger of two for crontab(5)'s OR rule. It
is run on wall-clock times (naive times given as UTC, where no clock ever changes), and the small
step from a wall-clock time to the instants it names, the rule above, is done here.
"""

from __future__ import annotations

import functools
import math
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.cron import CronTrigger

from tarsd.routines.crontab import DAY_NAMES, Crontab, CrontabError, NeverFires, NotFiveFields, parse_crontab

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
_EVERY = re.compile(r"every\s+(?P<count>\d+)\s*(?P<unit>[a-z]+)")
_IN = re.compile(r"in\s+(?P<count>\d+)\s*(?P<unit>[a-z]+)")
_CLOCK = re.compile(r"(?P<hour>\d{1,2}):(?P<minute>\d{2})")
# A date and a time, with "T" or a space between, seconds and an offset optional.
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?")
_DATE_FIRST = re.compile(r"\d{4}-\d{2}-\d{2}")
_MAX_COUNT_DIGITS = 12  # "in 99999999999999999999 d": refused as too far before any arithmetic

# The bounds, and why: every fire time stays a date a computer can hold, and a typo (2062 for
# 2026, "every 10000000 d") is refused rather than kept as a routine that never comes.
MAX_INTERVAL = timedelta(days=366)  # a longer wait is a yearly crontab ("0 9 1 1 *") or a one-shot
HORIZON_YEARS = 10
HORIZON = timedelta(days=3653)  # a one-shot or a reminder at most this far ahead
MAX_TEXT = 1000  # characters of a schedule or a time: a crontab's longest list is far shorter
# Catch-up looks back from now for the latest occurrence in windows that double from this size.
_FIRST_WINDOW = timedelta(minutes=1)
_WALKED = 4  # fire times walked one by one before the span left is halved instead
_ONE_MINUTE = timedelta(minutes=1)
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
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ScheduleError(f"{name!r} is not a known time zone", 'use an IANA name like "Europe/Berlin" or "America/New_York"') from exc


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: ``text`` as the user wrote it, ``kind`` one of cron, every, once.

    Every method takes and gives aware datetimes and returns None rather than raise when a time
    would fall outside what a datetime holds (year 1 to 9999)."""

    text: str
    kind: str
    tz: ZoneInfo = field(default=ZoneInfo("UTC"), compare=False)
    # every: the length in seconds; once: the instant (unix time). Unused for cron.
    seconds: float = field(default=0.0, compare=False)
    at: float = field(default=0.0, compare=False)
    crontab: Crontab | None = field(default=None, repr=False, compare=False)
    _wall: BaseTrigger | None = field(default=None, repr=False, compare=False)

    def next_after(self, after: datetime, anchor: datetime) -> datetime | None:
        """The first fire time strictly after ``after`` (aware), in the user's zone; ``anchor`` is
        the start of an ``every`` series (the routine's creation). None: a one-shot that has passed,
        or no fire time before year 9999."""
        try:
            # Aware datetimes of one zone compare and subtract by their wall clocks: all in UTC here.
            after, anchor = after.astimezone(UTC), anchor.astimezone(UTC)
            if self.kind == ONCE:
                at = datetime.fromtimestamp(self.at, UTC)
                run = at if at > after else None
            elif self.kind == EVERY:
                interval = timedelta(seconds=self.seconds)
                run = anchor if after < anchor else anchor + interval * ((after - anchor) // interval + 1)
            else:
                run = self._next_cron(after)
            return run.astimezone(self.tz) if run is not None else None
        except (OverflowError, ValueError):  # past year 9999 (or before year 1): no such time
            return None

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
        a fire time, then the last in it is found (_latest_in)."""
        try:
            after, until, anchor = after.astimezone(UTC), until.astimezone(UTC), anchor.astimezone(UTC)
            if until <= after:
                return None
            if self.kind == EVERY:
                interval = timedelta(seconds=self.seconds)
                if until - anchor < interval:
                    return None
                run = anchor + interval * ((until - anchor) // interval)
                return run.astimezone(self.tz) if run > after else None
        except (OverflowError, ValueError):  # a time past year 9999 in the user's zone
            return None
        window = _FIRST_WINDOW
        while True:
            start = after if window >= until - after else until - window
            run = self.next_after(start, anchor)
            if run is not None and run <= until:
                return self._latest_in(run, until, anchor)
            if start == after:
                return None
            window *= 2

    def _latest_in(self, run: datetime, until: datetime, anchor: datetime) -> datetime:
        """The last fire time in [run, until], ``run`` being one: the next few are walked; past
        those (every minute of a day once a year, seen from a year later) the span is halved."""
        for _ in range(_WALKED):
            following = self.next_after(run, anchor)
            if following is None or following > until:
                return run
            run = following
        high = until  # a fire time in [run, high], none after high up to until
        while True:
            following = self.next_after(run, anchor)
            if following is None or following > high:
                return run
            middle = following + (high - following) / 2
            probe = self.next_after(middle, anchor)
            if probe is not None and probe <= high:
                run = probe
            else:
                run, high = following, middle

    # A crontab: the wall-clock times that match, then the instants they are (the module's DST rule)

    def _next_cron(self, after: datetime) -> datetime | None:
        local = after.astimezone(self.tz)
        wall = local.replace(tzinfo=None)
        # From just after the wall time of ``after``: that time itself is ``after``, or, in an hour
        # passed twice, its second pass, which the look below finds in its order.
        found = self._first_after(after, wall + _ONE_MICROSECOND)
        second_pass = local.replace(fold=1).astimezone(UTC)
        if second_pass > after:
            # ``after`` is in the first pass of an hour the clocks pass twice: the times before it on
            # the wall come again in the second pass (a wildcard job runs then too), so look from
            # the wall time that the second pass starts at as well, and take the earlier instant.
            again = self._first_after(after, wall - (second_pass - after))
            if again is not None and (found is None or again < found):
                found = again
        return found

    def _first_after(self, after: datetime, wall: datetime) -> datetime | None:
        """The first instant after ``after`` of the matching wall-clock times from ``wall`` on."""
        assert self._wall is not None
        while (matched := self._wall.get_next_fire_time(None, wall.replace(tzinfo=UTC))) is not None:
            wall = matched.replace(tzinfo=None)
            for instant in self._instants(wall):
                if instant > after:
                    return instant
            wall += _ONE_MINUTE
        return None

    def _instants(self, wall: datetime) -> tuple[datetime, ...]:
        """The instants (UTC) a matching wall-clock time stands for: one; none or one when the
        clocks skip it; one or two when they pass it twice."""
        assert self.crontab is not None
        early = wall.replace(tzinfo=self.tz, fold=0).astimezone(UTC)
        late = wall.replace(tzinfo=self.tz, fold=1).astimezone(UTC)
        if early == late:
            return (early,)
        if early.astimezone(self.tz).replace(tzinfo=None) == wall:  # shown twice: the clocks went back
            return (early, late) if self.crontab.wildcard else (early,)
        # Never shown: the clocks jumped over it. (Then fold=0 reads it with the offset before the
        # jump, a later instant than fold=1 with the offset after it; the jump lies between.)
        return () if self.crontab.wildcard else (_jump(late, early, self.tz),)


def _jump(before: datetime, after: datetime, tz: ZoneInfo) -> datetime:
    """The instant in (before, after] at which the clocks of ``tz`` jumped forward, to the second
    (zone changes happen on whole seconds): the first second with the offset that ``after`` has."""
    target = after.astimezone(tz).utcoffset()
    low, high = math.floor(before.timestamp()), math.ceil(after.timestamp())
    while high - low > 1:
        middle = (low + high) // 2
        if datetime.fromtimestamp(middle, tz).utcoffset() == target:
            high = middle
        else:
            low = middle
    return datetime.fromtimestamp(high, UTC)


def _wall_trigger(crontab: Crontab) -> BaseTrigger:
    """APScheduler's trigger for the matching wall-clock times (it runs on UTC, where the clocks
    never change): each field as the explicit list read, the weekdays by their names (APScheduler 3
    numbers them from Monday; the names are the same in every numbering)."""
    common = {"minute": _listed(crontab.minutes), "hour": _listed(crontab.hours), "month": _listed(crontab.months), "timezone": UTC}
    days = _listed(crontab.days)
    weekdays = ",".join(DAY_NAMES[day] for day in sorted(crontab.weekdays))
    if crontab.either_day:  # crontab(5): both day fields restricted, a day matching either runs
        by_weekday = CronTrigger(day_of_week=weekdays, **common)
        if not crontab.days_exist:  # "0 9 30 2 mon": no 30 February, so Mondays in February only
            return by_weekday
        return OrTrigger([CronTrigger(day=days, **common), by_weekday])
    return CronTrigger(day=days, day_of_week=weekdays, **common)


def _listed(values: frozenset[int]) -> str:
    """1,2,3,5,7,8,9 as "1-3,5,7-9": the list APScheduler reads, short for a full field."""
    ordered = sorted(values)
    runs: list[str] = []
    start = previous = ordered[0]
    for value in [*ordered[1:], None]:
        if value is not None and value == previous + 1:
            previous = value
            continue
        runs.append(str(start) if start == previous else f"{start}-{previous}")
        if value is not None:
            start = previous = value
    return ",".join(runs)


def parse_schedule(text: str, tz: ZoneInfo, now: datetime, min_interval: float | None = None) -> Schedule:
    """Read a schedule (the forms in the module's docstring). A one-shot before ``now`` is refused,
    and one more than HORIZON after ``now`` (or after this moment, when ``now`` is earlier: a file's
    entries are read with ``now`` their creation); an ``every`` shorter than ``min_interval``
    seconds (None: no least) or longer than MAX_INTERVAL is refused."""
    if not isinstance(text, str):
        raise ScheduleError("the schedule must be text in quotes")
    if len(text) > MAX_TEXT:
        raise ScheduleError(f"the schedule is {len(text):,} characters long; at most {MAX_TEXT:,}")
    written = " ".join(text.split())
    lowered = written.lower()
    if not lowered:
        raise ScheduleError("the schedule is empty")
    every = _EVERY.fullmatch(lowered)
    if every:
        seconds = _seconds(written, every["count"], every["unit"], 'the units are s, min, h and d: "every 15 min"')
        if seconds < 1:
            raise ScheduleError(f"{written!r}: the interval must be 1 or more", 'e.g. "every 1h"')
        if min_interval is not None and seconds < min_interval:
            raise ScheduleError(
                f"{written!r} is too often: routines and repeating reminders come at most every {_length(min_interval)}",
                "a routine runs the model and a repeating reminder messages your phone at each time; "
                f'give an interval of {_length(min_interval)} or more ("every 15 min"), or change [routines] min_interval_seconds',
            )
        if seconds > MAX_INTERVAL.total_seconds():
            raise ScheduleError(
                f"{written!r} is too long an interval: the longest is 366 days",
                'for something yearly give a crontab ("0 9 1 1 *": 1 January at 09:00), or a date and time for once',
            )
        return Schedule(written, EVERY, tz, seconds=float(seconds))
    if lowered.startswith("every"):
        raise ScheduleError(f"{written!r} is not an interval", '"every N UNIT" with N a whole number and UNIT s, min, h or d: "every 2h"')
    if _DATE_FIRST.match(written):
        at = _date_time(written, tz)
        _check_ahead(written, at, now, SCHEDULE_HINT)
        return Schedule(written, ONCE, tz, at=at.timestamp())
    expression = written[len("cron ") :] if lowered.startswith("cron ") else written
    try:
        crontab, wall = _read_crontab(expression)
    except NotFiveFields as exc:
        raise ScheduleError(f"{written!r} is not a schedule: {exc}") from exc
    except NeverFires as exc:
        raise ScheduleError(f"{written!r} never fires: {exc}", 'check the day and month fields: "0 9 29 2 *" is 29 February') from exc
    except CrontabError as exc:
        raise ScheduleError(f"{written!r} is not a valid crontab: {exc}", _CRON_HINT) from exc
    # crontab.py refuses a crontab naming no date that exists; any other comes within 28 years.
    return Schedule(written, CRON, tz, crontab=crontab, _wall=wall)


@functools.lru_cache(maxsize=4096)
def _read_crontab(expression: str) -> tuple[Crontab, BaseTrigger]:
    """The crontab and its trigger, read once per text: 10,000 routines share a few hundred
    schedules, and reading the routines file checks each one (the trigger is never changed)."""
    crontab = parse_crontab(expression)
    return crontab, _wall_trigger(crontab)


_CRON_HINT = (
    'a crontab is 5 fields, minute hour day-of-month month day-of-week ("30 7 * * 1-5": 07:30 Monday to Friday; '
    "0 and 7 are Sunday; names like mon or jan; ranges 1-5, lists 1,3, steps */15), or @daily, @weekly, @monthly"
)


def parse_when(text: str, tz: ZoneInfo, now: datetime) -> datetime:
    """When a reminder is due: "HH:MM" (today in ``tz``, tomorrow once that has passed), a date
    and time (without an offset: in ``tz``), or "in N UNIT" from ``now``. A time past is refused,
    and one more than HORIZON ahead."""
    if not isinstance(text, str) or len(text) > MAX_TEXT:
        raise ScheduleError(f"the time must be text of at most {MAX_TEXT:,} characters", WHEN_HINT)
    written = " ".join(text.split())
    lowered = written.lower()
    local_now = now.astimezone(tz)
    relative = _IN.fullmatch(lowered)
    if relative:
        seconds = _seconds(written, relative["count"], relative["unit"], WHEN_HINT)
        if seconds < 1:
            raise ScheduleError(f"{written!r} is not in the future", WHEN_HINT)
        if seconds > HORIZON.total_seconds():
            raise ScheduleError(f"{written!r} is too far ahead: a reminder comes at most {HORIZON_YEARS} years from now", WHEN_HINT)
        return local_now + timedelta(seconds=seconds)
    if lowered in ("in", "in a", "in an") or re.fullmatch(r"in\s+\d+", lowered):
        number = lowered.removeprefix("in").strip() or "N"
        raise ScheduleError(f"{written!r}: in {number} what? say in {number} min, in {number} h, in {number} d or in {number} s", WHEN_HINT)
    clock = _CLOCK.fullmatch(lowered)
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
    if _DATE_TIME.fullmatch(written):
        at = _date_time(written, tz, WHEN_HINT)
        _check_ahead(written, at, now, WHEN_HINT)
        return at
    raise ScheduleError(f"{written!r} is not a time", WHEN_HINT)


def _seconds(written: str, count: str, unit: str, hint: str) -> int:
    """N UNIT in seconds; a unit that is not one, or a number too long to be a time, refused."""
    if unit not in _UNITS:
        raise ScheduleError(f"{written!r}: {unit!r} is not a unit of time", hint)
    if len(count.lstrip("0")) > _MAX_COUNT_DIGITS:
        raise ScheduleError(f"{written!r}: {count} {unit} is longer than anything tars can wait", hint)
    return int(count) * _UNITS[unit]


def _length(seconds: float) -> str:
    """60 -> "1 min", 90 -> "90 s", 7200 -> "2 h": the minimum interval as the user writes one."""
    whole = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if whole >= size and whole % size == 0:
            return f"{whole // size} {unit}"
    return f"{whole} s"


def _check_ahead(written: str, at: datetime, now: datetime, hint: str) -> None:
    """A one-shot still to come, and not more than HORIZON ahead (of ``now``, or of this moment
    when ``now`` is earlier: the file's entries are read with ``now`` their creation)."""
    if at <= now:
        raise ScheduleError(
            f"{written!r} has passed already (it is {now.astimezone(at.tzinfo):%Y-%m-%d %H:%M} now)",
            'give a date and time still to come, as "YYYY-MM-DD HH:MM"' if hint is SCHEDULE_HINT else hint,
        )
    latest = max(now.timestamp(), time.time()) + HORIZON.total_seconds()
    if at.timestamp() > latest:
        raise ScheduleError(
            f"{written!r} is too far ahead: a one-shot or a reminder comes at most {HORIZON_YEARS} years from now",
            'check the year; for something every year give a crontab ("0 9 27 11 *": 27 November at 09:00)',
        )


def _date_time(written: str, tz: ZoneInfo, hint: str = SCHEDULE_HINT) -> datetime:
    try:
        parsed = datetime.fromisoformat(written.replace(" ", "T", 1))
    except ValueError as exc:
        raise ScheduleError(f"{written!r} is not a date and time: {exc}", hint) from exc
    if parsed.tzinfo is None:
        return _local(parsed, tz, written, hint)
    try:
        return parsed.astimezone(tz)
    except (OverflowError, ValueError) as exc:  # 9999-12-31T23:59-12:00 is in year 10000 in UTC
        raise ScheduleError(
            f"{written!r} is too far ahead or behind: a one-shot or a reminder comes at most {HORIZON_YEARS} years from now", hint
        ) from exc


def _local(naive: datetime, tz: ZoneInfo, written: str, hint: str = SCHEDULE_HINT) -> datetime:
    """A wall-clock time in ``tz``: refused when the clocks skip it, the first of two when they pass it twice."""
    first = naive.replace(tzinfo=tz, fold=0)
    try:
        shown = first.astimezone(UTC).astimezone(tz).replace(tzinfo=None)
    except (OverflowError, ValueError) as exc:  # 0001-01-01 00:00 east of Greenwich is in year 0 in UTC
        raise ScheduleError(
            f"{written!r} is too far ahead or behind: a one-shot or a reminder comes at most {HORIZON_YEARS} years from now", hint
        ) from exc
    if shown != naive:
        raise ScheduleError(
            f"{written!r} does not exist in {tz.key}: the clocks skip that hour that night",
            f"pick a time outside the skipped hour, or add the offset you mean, e.g. {naive:%Y-%m-%d %H:%M}+01:00; " + hint,
        )
    return first
