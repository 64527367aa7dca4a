"""Whatever text arrives as a schedule or a reminder's time (a hand edit, a model's tool call, a
phone), the schedule module answers with a Schedule or a ScheduleError, and a Schedule's fire times
with a time or None: no other exception leaves it (an OverflowError once stopped every routine)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from tarsd.routines.schedule import ScheduleError, parse_schedule, parse_when

ZONES = [ZoneInfo("Europe/Berlin"), ZoneInfo("America/New_York"), ZoneInfo("Pacific/Kiritimati"), ZoneInfo("UTC")]
PIECES = [
    "*", "*/", "/", "-", ",", " ", "  ", "\t", "\n", "\x00", "\u202e", "\u00a0", "\U0001f600", "@", "@daily", "@reboot", "cron ",
    "every", "in", "s", "min", "h", "d", "days", "fortnight", "0", "7", "59", "60", "99", "9" * 30, "9" * 5000, "-1", "1.5",
    "mon", "SUN", "jan", "dec", "L", "W", "#", "?", "T", "Z", ":", "+14:00", "-12:00", "9999-12-31", "0001-01-01", "2026-03-29",
    "2026-10-25", "02:30", "23:59", "24:00", "T23:59:59.999999", "1-5", "5-1", "*/0", "0-7", "sat-sun", "mon-sun",
]  # fmt: skip
EXTREMES = [
    datetime(1, 1, 1, tzinfo=UTC),
    datetime(1, 1, 2, tzinfo=UTC),
    datetime(1970, 1, 1, tzinfo=UTC),
    datetime(2026, 3, 29, 0, 59, 59, tzinfo=UTC),
    datetime(2026, 10, 25, 0, 30, tzinfo=UTC),
    datetime(9999, 12, 30, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
]


FIELDS = ["*", "*/2", "*/15", "0", "7", "30", "1-5", "0-7", "mon-fri", "sun", "jan", "1,15", "5/10", "2", "59", "31", "29", "*/7"]


def odd_text(rng: random.Random) -> str:
    """Text near each form (so much of it is accepted and reaches the fire-time code), and junk."""
    kind = rng.random()
    if kind < 0.35:  # a crontab, its fields mostly plausible
        return " ".join(rng.choice(FIELDS) if rng.random() < 0.95 else rng.choice(PIECES) for _ in range(rng.choice([5, 5, 5, 4, 6])))
    if kind < 0.55:
        number = rng.choice(["1", "30", "59", "60", "366", "367", "3653", "3654", "10000000", "99999999999", "9" * 40])
        return (
            f"{rng.choice(['every', 'in', 'every ', 'in  '])} {number}{rng.choice(['', ' '])}{rng.choice(['s', 'min', 'h', 'd', 'x', ''])}"
        )
    if kind < 0.75:
        year = rng.choice(["0001", "1969", "2026", "2027", "2036", "2037", "9999"])
        month, day = rng.choice(["01", "02", "03", "10", "12", "13"]), rng.choice(["01", "25", "29", "30", "31", "32"])
        clock = rng.choice(["00:00", "02:30", "23:59", "24:00", "2:30", "02:30:59.5"])
        return f"{year}-{month}-{day}{rng.choice(['T', ' '])}{clock}{rng.choice(['', 'Z', '+14:00', '-12:00', '+0100', '+99:00'])}"
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 6)))


def test_no_exception_but_a_schedule_error_leaves_the_schedule_module():
    rng = random.Random(43)
    accepted = 0
    for _ in range(5000):
        text, tz = odd_text(rng), rng.choice(ZONES)
        now = rng.choice([datetime.now(UTC), *EXTREMES[2:5]])
        try:
            parse_when(text, tz, now)
        except ScheduleError:
            pass
        try:
            schedule = parse_schedule(text, tz, now, min_interval=rng.choice([None, 1, 60]))
        except ScheduleError:
            continue
        accepted += 1
        for after in rng.sample(EXTREMES, 3):
            anchor = rng.choice(EXTREMES)
            schedule.next_after(after, anchor)
            schedule.latest_between(after, rng.choice(EXTREMES), anchor)
            schedule.occurrences(after, after + timedelta(days=rng.choice([0, 1])) if after.year < 9999 else after, anchor, limit=5)
    print(f"{accepted} accepted")
    assert accepted > 300  # the odd texts did reach the fire-time code
