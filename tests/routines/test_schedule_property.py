"""tars's crontab schedules against an independent reference, over thousands of random
expressions and instants in Europe/Berlin and America/New_York, many of them near a
daylight-saving change: the next five fire times must be the same.

The reference (``reference_fires``) is written here from crontab(5)'s text and cron(8)'s main
loop, and is independent of what it checks:

- it never calls APScheduler, nor tars's parser (tarsd/routines/crontab.py): each field item is
  *evaluated* against a value (``value in first..last and (value - first) % step == 0``) rather
  than expanded to a set, and the day rule is crontab(5)'s sentence ("if both fields are
  restricted (i.e., don't start with *), the command will be run when either field matches");
- the calendar is walked a day at a time with the standard library's date arithmetic, and on a
  day the clocks change, a minute at a time in real (UTC) time, doing what Vixie cron's main loop
  does each minute (cron.c: a normal minute runs every matching job; a jump forward of up to 3
  hours runs wildcard jobs for the new minute and fixed-time jobs for every minute skipped; a
  jump back runs only wildcard jobs until the clock has caught up), where tars maps wall-clock
  times to instants in one step (tarsd/routines/schedule.py: ``_instants``).

croniter (PyPI), a third implementation, is checked too where crontab(5) leaves it no room to
differ: away from the changes of the clocks, and where croniter's reading of the day rule is
cron's (it treats only a bare ``*`` as unrestricted).
"""

from __future__ import annotations

import random
import re
import time
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from tarsd.routines.schedule import ScheduleError, parse_schedule

ZONES = (ZoneInfo("Europe/Berlin"), ZoneInfo("America/New_York"))
SEED = 4343
EXPRESSIONS = 10_000
FIRES = 5
MONTH_NAMES = "jan feb mar apr may jun jul aug sep oct nov dec".split()
DAY_NAMES = "sun mon tue wed thu fri sat".split()
# crontab(5): "Instead of the first five fields, one of eight special strings may appear".
SPECIAL = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MINUTE = timedelta(minutes=1)
# What croniter 7 reads otherwise than cron: a number with a step ("5/10", cronie's and
# APScheduler's, not crontab(5)'s), and a range of one value (below).
_NUMBER_WITH_STEP = re.compile(r"(?<![\w*-])\d+/")
_RANGE = re.compile(r"(\w+)-(\w+)")


# ---- the reference ----


def _number(word: str, names: list[str], first: int) -> int:
    return int(word) if word.isdigit() else first + names.index(word)


def item_matches(field: str, value: int, low: int, high: int, names: list[str]) -> bool:
    """crontab(5): a field is a list of items; an item is a number, a name, a range ``a-b`` or
    ``*`` (first-last), any of them followed by ``/step`` (a number with a step runs to the last)."""
    for item in field.split(","):
        base, slash, step_text = item.partition("/")
        step = int(step_text) if slash else 1
        if base == "*":
            first, last = low, high
        elif "-" in base:
            start, end = base.split("-")
            first, last = _number(start, names, low), _number(end, names, low)
            if names is DAY_NAMES and end == "sun" and first > 0:
                last = 7  # "fri-sun": Sunday ending a range is its 7
        else:
            first = _number(base, names, low)
            last = high if slash else first
        if first <= value <= last and (value - first) % step == 0:
            return True
    return False


class Reference:
    def __init__(self, expression: str):
        fields = SPECIAL.get(expression, expression).split()
        minute, hour, dom, month, dow = fields
        self.minutes = [m for m in range(60) if item_matches(minute, m, 0, 59, [])]
        self.hours = [h for h in range(24) if item_matches(hour, h, 0, 23, [])]
        self.dom = {d for d in range(1, 32) if item_matches(dom, d, 1, 31, [])}
        self.month = {m for m in range(1, 13) if item_matches(month, m, 1, 12, MONTH_NAMES)}
        # 0 or 7 is Sunday: a weekday matches when its number does, Sunday also when 7 does.
        self.dow = {d for d in range(7) if item_matches(dow, d, 0, 7, DAY_NAMES) or (d == 0 and item_matches(dow, 7, 0, 7, DAY_NAMES))}
        self.either = not dom.startswith("*") and not dow.startswith("*")
        # cron(8): "Only jobs that run at a particular time (not specified as @hourly, nor with '*'
        # in the hour or minute specifier) are affected" by the clock's changes.
        self.wildcard = minute.startswith("*") or hour.startswith("*")

    def day(self, day: date) -> bool:
        if day.month not in self.month:
            return False
        in_dom, in_dow = day.day in self.dom, day.isoweekday() % 7 in self.dow
        return (in_dom or in_dow) if self.either else (in_dom and in_dow)

    def at(self, wall: datetime) -> bool:
        return self.day(wall.date()) and wall.hour in self.hours and wall.minute in self.minutes


def _wall(instant: datetime, tz: ZoneInfo) -> datetime:
    return instant.astimezone(tz).replace(tzinfo=None)


def _minutes(a: datetime, b: datetime) -> int:
    return round((b - a).total_seconds() / 60)


# Both zones change their clocks between 01:00 and 04:00 local time (checked below): on such a day
# Vixie's loop is followed minute by minute until 06:00, and the rest of the day is plain.
MORNING = 6


def reference_fires(expression: str, tz: ZoneInfo, after: datetime, count: int = FIRES) -> list[datetime]:
    """The next ``count`` fire times (UTC) strictly after ``after``; [] when none in 60 years."""
    job = Reference(expression)
    found: list[datetime] = []
    # Hours more than 3 before ``after`` on the wall clock have passed (no zone jumps further back).
    first_hour = after.astimezone(tz).replace(tzinfo=None) - timedelta(hours=3)
    day = first_hour.date()
    last_day = day + timedelta(days=366 * 60)
    while len(found) < count and day < last_day:
        if job.day(day):
            midnight = datetime(day.year, day.month, day.day, tzinfo=tz)
            morning, end = midnight.replace(hour=MORNING), midnight + timedelta(days=1)
            plain_from = 0
            if midnight.utcoffset() != end.utcoffset():  # the clocks change this day
                assert morning.utcoffset() == end.utcoffset() and midnight.astimezone(UTC).astimezone(tz) == midnight
                found += [instant for instant in _vixie_day(job, tz, midnight.astimezone(UTC), morning.astimezone(UTC)) if instant > after]
                plain_from = MORNING
            # No change of the clocks in these hours: each matching wall-clock time is one instant.
            if day == first_hour.date():
                plain_from = max(plain_from, first_hour.hour)
            for hour in job.hours:
                for minute in job.minutes if hour >= plain_from else ():
                    instant = datetime(day.year, day.month, day.day, hour, minute, tzinfo=tz).astimezone(UTC)
                    if instant > after:
                        found.append(instant)
                    if len(found) >= count:
                        return found[:count]
        day += timedelta(days=1)
    return found[:count]


def _vixie_day(job: Reference, tz: ZoneInfo, start: datetime, end: datetime) -> list[datetime]:
    """Vixie cron's main loop (cron.c) over one day, a minute of real time at a time: the minute
    it wakes at is on the wall clock ``now``; ``virtual`` is the last wall-clock minute it ran."""
    fired = []
    virtual = _wall(start - MINUTE, tz)
    instant = start
    while instant < end:
        now = _wall(instant, tz)
        step = _minutes(virtual, now)
        if step == 1:  # the usual minute
            fire, virtual = job.at(now), now
        elif 1 < step <= 5:  # woke late: every job, for each minute missed
            fire = any(job.at(virtual + MINUTE * k) for k in range(1, step + 1))
            virtual = now
        elif 5 < step <= 180:  # the clocks went forward: wildcard jobs now, fixed-time jobs of each minute skipped
            fire = job.at(now) if job.wildcard else any(job.at(virtual + MINUTE * k) for k in range(1, step + 1))
            virtual = now
        elif -180 <= step <= 0:  # the clocks went back: wildcard jobs only, until the clock catches up
            fire = job.wildcard and job.at(now)
        else:  # a jump of hours: start again from the new time
            fire, virtual = job.at(now), now
        if fire:
            fired.append(instant)
        instant += MINUTE
    return fired


# ---- random expressions and instants ----


def _item(rng: random.Random, low: int, high: int, names: list[str], often: list[int]) -> str:
    """One item of a field: a number or a name, a range, a step of one of them, or of ``*``."""

    def value() -> int:
        return rng.choice(often) if rng.random() < 0.5 else rng.randint(low, high)

    def shown(number: int, end: bool = False) -> str:
        if not names or rng.random() < 0.6:
            return str(number)
        if names is DAY_NAMES:
            return DAY_NAMES[number % 7] if number < 7 or end else "7"  # 7 as a name only ends a range
        return names[number - low]

    kind = rng.random()
    step = rng.randint(1, high - low)
    if kind < 0.15:
        return f"*/{step}"
    if kind < 0.5:
        return shown(value())
    first, last = sorted((value(), value()))
    if kind < 0.8:
        return f"{shown(first)}-{shown(last, end=True)}"
    if kind < 0.9:
        return f"{shown(first)}-{shown(last, end=True)}/{step}"
    return f"{first}/{step}"


def _field(rng: random.Random, star: float, low: int, high: int, often: list[int], names: list[str] | None = None) -> str:
    if rng.random() < star:
        return "*"
    return ",".join(_item(rng, low, high, names or [], often) for _ in range(rng.choice((1, 1, 1, 2, 3))))


def random_expression(rng: random.Random) -> str:
    if rng.random() < 0.03:
        return rng.choice(list(SPECIAL))
    minute = _field(rng, 0.2, 0, 59, [0, 15, 30, 45, 59])
    hour = _field(rng, 0.2, 0, 23, [0, 1, 2, 3, 4])  # the hours the clocks change in, often
    dom = _field(rng, 0.5, 1, 31, [1, 15, 28, 29, 30, 31])
    month = _field(rng, 0.6, 1, 12, [3, 10, 11, 2], MONTH_NAMES)  # the months they change in, and February
    dow = _field(rng, 0.5, 0, 7, [0, 7, 6, 1], DAY_NAMES)
    return " ".join((minute, hour, dom, month, dow))


def _changes(tz: ZoneInfo, years: range) -> list[datetime]:
    """The instants the clocks of ``tz`` change in ``years``, found hour by hour."""
    found = []
    instant = datetime(years.start, 1, 1, tzinfo=UTC)
    offset = instant.astimezone(tz).utcoffset()
    while instant.year < years.stop:
        instant += timedelta(hours=1)
        now = instant.astimezone(tz).utcoffset()
        if now != offset:
            found.append(instant)
            offset = now
    return found


def random_instant(rng: random.Random, changes: list[datetime]) -> datetime:
    if rng.random() < 0.45:  # near a change of the clocks: a day and a half either side, to the second
        return rng.choice(changes) + timedelta(seconds=rng.randint(-36 * 3600, 36 * 3600))
    start = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
    return datetime.fromtimestamp(rng.uniform(start, start + 9 * 365 * 86400), UTC).replace(microsecond=0)


def tars_fires(expression: str, tz: ZoneInfo, after: datetime, count: int = FIRES) -> list[datetime]:
    schedule = parse_schedule(expression, tz, after)
    found, run = [], after
    while len(found) < count and (run := schedule.next_after(run, after)) is not None:
        found.append(run.astimezone(UTC))
    return found


# ---- the tests ----


def test_next_five_fire_times_equal_an_independent_reference():
    rng = random.Random(SEED)
    changes = {tz: _changes(tz, range(2024, 2034)) for tz in ZONES}
    started, cpu = time.monotonic(), time.process_time()
    compared = refused = near_changes = 0
    wrong: list[str] = []
    for number in range(EXPRESSIONS):
        expression = random_expression(rng)
        for tz in (ZONES[number % 2],):  # each zone for half of them
            after = random_instant(rng, changes[tz])
            expected = reference_fires(expression, tz, after)
            try:
                got = tars_fires(expression, tz, after)
            except ScheduleError as exc:
                refused += 1
                if expected or "never fires" not in str(exc):
                    wrong.append(f"{expression!r} refused ({exc}), the reference fires {expected[:2]}")
                continue
            compared += 1
            if any(abs((after - change).total_seconds()) < 36 * 3600 for change in changes[tz]):
                near_changes += 1
            if got != expected:
                wrong.append(
                    f"{expression!r} in {tz.key} after {after.astimezone(tz).isoformat()}:\n"
                    f"   tars      {[f.astimezone(tz).isoformat() for f in got]}\n"
                    f"   reference {[f.astimezone(tz).isoformat() for f in expected]}"
                )
    took, cpu = time.monotonic() - started, time.process_time() - cpu
    print(f"{compared} compared ({near_changes} within 36 h of a change of the clocks), {refused} refused, {took:.1f} s, CPU {cpu:.1f} s")
    assert not wrong, f"{len(wrong)} of {compared + refused} differ; the first:\n" + "\n".join(wrong[:5])
    assert compared > 0.95 * EXPRESSIONS and near_changes > 0.3 * compared


def test_hand_picked_weekdays_on_friday_27_november_2026():
    berlin = ZONES[0]
    friday = datetime(2026, 11, 27, 12, 0, tzinfo=berlin)
    for expression, first in [
        ("30 7 * * 1-5", datetime(2026, 11, 30, 7, 30, tzinfo=berlin)),  # Monday, not Saturday
        ("0 18 * * 0", datetime(2026, 11, 29, 18, 0, tzinfo=berlin)),  # Sunday, not Monday
        ("0 9 * * 7", datetime(2026, 11, 29, 9, 0, tzinfo=berlin)),  # 7 is Sunday too
        ("0 9 * * sun", datetime(2026, 11, 29, 9, 0, tzinfo=berlin)),
        ("0 9 * * */2", datetime(2026, 11, 28, 9, 0, tzinfo=berlin)),  # Sun, Tue, Thu, Sat: Saturday next
        ("0 9 1 * 1", datetime(2026, 11, 30, 9, 0, tzinfo=berlin)),  # the 1st or a Monday: Monday comes first
    ]:
        [got] = tars_fires(expression, berlin, friday, 1)
        assert got == first.astimezone(UTC), expression
        assert reference_fires(expression, berlin, friday, 1) == [first.astimezone(UTC)], expression


def _croniter_misreads(expression: str) -> bool:
    """A number with a step, or a range of one value ("30-30", "sat-6": croniter fires every minute of the field)."""
    if _NUMBER_WITH_STEP.search(expression):
        return True
    for field, names in zip(expression.split(), ([], [], [], MONTH_NAMES, DAY_NAMES), strict=True):
        low = 1 if names is MONTH_NAMES else 0
        for start, end in _RANGE.findall(field):
            first, last = _number(start, names, low), _number(end, names, low)
            if first == last or names is DAY_NAMES and first % 7 == last % 7:
                return True
    return False


def test_croniter_agrees_away_from_the_changes_of_the_clocks():
    """A third implementation, where crontab(5) leaves it no room to differ (see the docstring)."""
    from croniter import croniter  # a test extra (pyproject.toml)

    rng = random.Random(SEED + 1)
    compared = 0
    wrong = []
    while compared < 1500:
        expression = random_expression(rng)
        if expression.startswith("@") or _croniter_misreads(expression):
            continue
        _minute, _hour, dom, _month, dow = expression.split()
        job = Reference(expression)
        unrestricted = dom == "*" or dow == "*"
        plain_or = not dom.startswith("*") and not dow.startswith("*") and len(job.dom) < 31 and len(job.dow) < 7
        if not (unrestricted or plain_or):
            continue  # croniter reads "*/2" as restricted for the day rule, cron as not
        tz = rng.choice(ZONES)
        after = datetime(2025, rng.randint(1, 12), rng.randint(1, 28), rng.randint(0, 23), rng.randint(0, 59), tzinfo=tz)
        expected = reference_fires(expression, tz, after, 3)
        far = not expected or expected[-1] - after.astimezone(UTC) > timedelta(days=150)
        if far or expected[-1].astimezone(tz).utcoffset() != after.utcoffset():
            continue  # a change of the clocks may lie between: cron's rule is the reference's to check
        iterator = croniter(expression, after)
        got = [iterator.get_next(datetime).astimezone(UTC) for _ in range(3)]
        compared += 1
        if got != expected:
            wrong.append(f"{expression!r} {tz.key} after {after.isoformat()}: croniter {got}, reference {expected}")
    assert not wrong, f"{len(wrong)} of {compared} differ:\n" + "\n".join(wrong[:5])
