"""Schedules as the user writes them: the three forms, refusals that say what is accepted, fire
times across the daylight-saving changes, every-N series counted from their anchor, and the
reminder times of parse_when."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tarsd.routines.schedule import ScheduleError, parse_schedule, parse_when, user_timezone

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=BERLIN)


def test_the_three_forms_are_read():
    assert parse_schedule("30 7 * * 1-5", BERLIN, NOW).kind == "cron"
    assert parse_schedule("cron 30 7 * * 1-5", BERLIN, NOW).kind == "cron"
    for text, seconds in [("every 2h", 7200), ("every 15 min", 900), ("every 30s", 30), ("every 1d", 86400), ("every 5 m", 300)]:
        schedule = parse_schedule(text, BERLIN, NOW)
        assert (schedule.kind, schedule.seconds) == ("every", seconds)
    for text in ["2026-11-27 15:00", "2026-11-27T15:00", "2026-11-27T15:00+01:00"]:
        once = parse_schedule(text, BERLIN, NOW)
        assert once.kind == "once"
        assert datetime.fromtimestamp(once.at, BERLIN) == datetime(2026, 11, 27, 15, 0, tzinfo=BERLIN)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "empty"),
        ("30 7 * *", "5 fields"),
        ("61 7 * * *", "not a valid crontab"),
        ("every 0h", "1 or more"),
        ("every 2 fortnights", "not a unit"),
        ("every often", "not an interval"),
        ("2026-02-30 10:00", "not a date"),
        ("2025-01-01 10:00", "passed already"),
        ("0 9 31 2 *", "never fires"),
    ],
)
def test_nonsense_is_refused_with_what_is_accepted(text, said):
    with pytest.raises(ScheduleError) as refused:
        parse_schedule(text, BERLIN, NOW)
    assert said in str(refused.value)
    assert refused.value.hint and "e.g." in refused.value.hint or '"' in refused.value.hint


def test_a_daily_0730_routine_in_berlin_fires_once_at_0730_on_both_sides_of_each_change():
    schedule = parse_schedule("30 7 * * *", BERLIN, NOW)
    for change, before_utc, after_utc in [
        (datetime(2026, 3, 29, tzinfo=BERLIN), "06:30", "05:30"),
        (datetime(2026, 10, 25, tzinfo=BERLIN), "05:30", "06:30"),
    ]:
        fires = schedule.occurrences(change - timedelta(days=3), change + timedelta(days=3), anchor=NOW)
        assert len(fires) == 6, fires  # once a day, no day missed or doubled
        assert [f.astimezone(BERLIN).strftime("%H:%M") for f in fires] == ["07:30"] * 6
        assert len({f.date() for f in fires}) == 6
        utc = [f.astimezone(UTC).strftime("%H:%M") for f in fires]
        assert utc == [before_utc] * 3 + [after_utc] * 3, utc


def test_every_n_counts_real_time_from_its_anchor_across_a_change():
    anchor = datetime(2026, 3, 28, 12, 0, 7, tzinfo=BERLIN)
    schedule = parse_schedule("every 1d", BERLIN, anchor)
    fires = schedule.occurrences(anchor, anchor.astimezone(UTC) + timedelta(days=3), anchor)
    # 24 hours of real time each: from the night the clocks go forward, 13:00 local, not 12:00.
    assert [f.astimezone(UTC) for f in fires] == [anchor.astimezone(UTC) + timedelta(days=n) for n in (1, 2, 3)]
    assert [f.astimezone(BERLIN).strftime("%H:%M:%S") for f in fires] == ["13:00:07"] * 3
    every = parse_schedule("every 15 min", BERLIN, anchor)
    later = anchor + timedelta(hours=5, minutes=1)
    assert every.next_after(later, anchor) == anchor + timedelta(hours=5, minutes=15)
    assert every.next_after(anchor + timedelta(minutes=15), anchor) == anchor + timedelta(minutes=30)  # strictly after
    assert every.latest_between(anchor, later, anchor) == anchor + timedelta(hours=5)
    assert every.latest_between(anchor, anchor + timedelta(minutes=14), anchor) is None


def test_latest_between_finds_the_last_fire_without_walking_a_long_gap():
    schedule = parse_schedule("30 7 * * *", BERLIN, NOW)
    until = datetime(2026, 6, 10, 7, 0, tzinfo=BERLIN)
    assert schedule.latest_between(NOW, until, NOW) == datetime(2026, 6, 9, 7, 30, tzinfo=BERLIN)
    assert schedule.latest_between(until, until + timedelta(minutes=20), NOW) is None
    assert parse_schedule("* * * * *", BERLIN, NOW).latest_between(NOW, until, NOW) == until


def test_a_one_shot_fires_once_and_is_refused_once_past():
    once = parse_schedule("2026-11-27 15:00", BERLIN, NOW)
    at = datetime(2026, 11, 27, 15, 0, tzinfo=BERLIN)
    assert once.next_after(NOW, NOW) == at
    assert once.next_after(at, NOW) is None
    with pytest.raises(ScheduleError, match="passed already"):
        parse_schedule("2026-11-27 15:00", BERLIN, at + timedelta(seconds=1))


def test_a_local_time_the_clocks_skip_is_refused_and_one_they_pass_twice_is_the_first():
    with pytest.raises(ScheduleError) as skipped:
        parse_schedule("2026-03-29 02:30", BERLIN, NOW)
    assert "does not exist in Europe/Berlin" in str(skipped.value)
    assert "offset" in skipped.value.hint
    # With the offset the user means, it is that instant.
    pinned = parse_schedule("2026-03-29 02:30+01:00", BERLIN, NOW)
    assert datetime.fromtimestamp(pinned.at, UTC) == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)
    twice = parse_schedule("2026-10-25 02:30", BERLIN, NOW)
    assert datetime.fromtimestamp(twice.at, UTC) == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # 02:30 summer time, the first


def test_parse_when_reads_a_clock_time_a_date_and_a_delay():
    morning = datetime(2026, 11, 26, 9, 0, tzinfo=BERLIN)
    assert parse_when("15:00", BERLIN, morning) == datetime(2026, 11, 26, 15, 0, tzinfo=BERLIN)
    assert parse_when("08:00", BERLIN, morning) == datetime(2026, 11, 27, 8, 0, tzinfo=BERLIN)  # passed: tomorrow
    assert parse_when("2026-11-27 15:00", BERLIN, morning) == datetime(2026, 11, 27, 15, 0, tzinfo=BERLIN)
    assert parse_when("2026-11-27T15:00Z", BERLIN, morning) == datetime(2026, 11, 27, 15, 0, tzinfo=UTC)
    assert parse_when("in 20 min", BERLIN, morning) == morning + timedelta(minutes=20)
    assert parse_when("in 2 hours", BERLIN, morning) == morning + timedelta(hours=2)
    assert parse_when("in 30s", BERLIN, morning) == morning + timedelta(seconds=30)
    assert parse_when("02:30", BERLIN, datetime(2026, 3, 28, 23, 0, tzinfo=BERLIN)) == datetime(2026, 3, 30, 2, 30, tzinfo=BERLIN)
    for text, said in [
        ("2026-11-25 15:00", "passed already"),
        ("25:00", "not a time of day"),
        ("soon", "not a time"),
        ("in 3 weeks", "not a unit"),
    ]:
        with pytest.raises(ScheduleError) as refused:
            parse_when(text, BERLIN, morning)
        assert said in str(refused.value)
        assert "15:00" in refused.value.hint


def test_user_timezone_names_an_unknown_zone():
    assert user_timezone("Europe/Berlin") == BERLIN
    assert isinstance(user_timezone(""), ZoneInfo)
    with pytest.raises(ScheduleError, match="Mars/Olympus"):
        user_timezone("Mars/Olympus")


# ---- crontab(5)'s forms (the property test, test_schedule_property.py, checks them at random) ----

NEW_YORK = ZoneInfo("America/New_York")
FRIDAY = datetime(2026, 11, 27, 12, 0, tzinfo=BERLIN)


def _next(text: str, after: datetime, count: int = 1, tz: ZoneInfo = BERLIN) -> list[str]:
    schedule = parse_schedule(text, tz, after)
    found, run = [], after
    for _ in range(count):
        run = schedule.next_after(run, after)
        found.append(run.astimezone(tz).strftime("%a %d %b %H:%M %Z"))
    return found


@pytest.mark.parametrize(
    ("text", "first"),
    [
        ("30 7 * * 1-5", "Mon 30 Nov 07:30 CET"),
        ("0 18 * * 0", "Sun 29 Nov 18:00 CET"),
        ("0 9 * * 7", "Sun 29 Nov 09:00 CET"),
        ("0 9 * * SUN", "Sun 29 Nov 09:00 CET"),
        ("0 9 * * sat-sun", "Sat 28 Nov 09:00 CET"),
        ("0 9 * * mon-sun", "Sat 28 Nov 09:00 CET"),
        ("0 9 * dec mon", "Mon 07 Dec 09:00 CET"),
        ("@weekly", "Sun 29 Nov 00:00 CET"),
        ("@monthly", "Tue 01 Dec 00:00 CET"),
        ("cron @yearly", "Fri 01 Jan 00:00 CET"),
        ("5/20 13 * * *", "Fri 27 Nov 13:05 CET"),
    ],
)
def test_weekdays_names_and_macros_mean_what_crontab_says(text, first):
    assert _next(text, FRIDAY) == [first]


def test_day_of_month_or_day_of_week_as_vixie_cron_has_it():
    # Both restricted: either. The 1st of December is a Tuesday, the Mondays come too.
    assert _next("0 9 1 * 1", FRIDAY, 3) == ["Mon 30 Nov 09:00 CET", "Tue 01 Dec 09:00 CET", "Mon 07 Dec 09:00 CET"]
    # A field beginning with * counts as unrestricted, even */2: then a day must match both.
    assert _next("0 9 */2 * 1", FRIDAY, 2) == ["Mon 07 Dec 09:00 CET", "Mon 21 Dec 09:00 CET"]  # odd Mondays
    assert _next("0 9 * * */2", FRIDAY, 4) == [
        "Sat 28 Nov 09:00 CET",
        "Sun 29 Nov 09:00 CET",
        "Tue 01 Dec 09:00 CET",
        "Thu 03 Dec 09:00 CET",
    ]
    # The 30th of February never comes, but its Mondays do.
    assert _next("0 9 30 2 mon", FRIDAY) == ["Mon 01 Feb 09:00 CET"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("5-2 * * * *", "runs backwards"),
        ("*/0 * * * *", "step"),
        ("60 * * * *", "from 0 to 59"),
        ("0 24 * * *", "from 0 to 23"),
        ("0 9 0 * *", "from 1 to 31"),
        ("0 9 * 13 *", "from 1 to 12"),
        ("0 9 * * 8", "from 0 to 7"),
        ("0 9 ? * *", "Quartz"),
        ("0 9 L * *", "Quartz"),
        ("0 9 * * 1#2", "Quartz"),
        ("0 0 9 * * *", "5 fields"),
        ("@reboot", "@hourly"),
        ("0 9 * * funday", "not a day of week"),
        ("0 9 30 2 *", "never fires"),
        ("0 9 31 4,6 *", "never fires"),
        ("0 99999999999999999999 * * *", "from 0 to 23"),
    ],
)
def test_crontabs_cron_would_not_read_are_refused_with_the_reason(text, said):
    with pytest.raises(ScheduleError) as refused:
        parse_schedule(text, BERLIN, FRIDAY)
    assert said in str(refused.value)
    assert refused.value.hint


# ---- the nights the clocks change (the rule written in docs/routines.md) ----


def test_a_fixed_time_the_clocks_skip_runs_once_when_they_jump():
    """crontab users' expectation, and Vixie cron's: 02:30 on the night 02:00 becomes 03:00 runs at 03:00."""
    assert _next("30 2 * * *", datetime(2026, 3, 28, 12, 0, tzinfo=BERLIN), 3) == [
        "Sun 29 Mar 03:00 CEST",
        "Mon 30 Mar 02:30 CEST",
        "Tue 31 Mar 02:30 CEST",
    ]
    assert _next("30 2 * * *", datetime(2026, 3, 7, 12, 0, tzinfo=NEW_YORK), 2, NEW_YORK) == [
        "Sun 08 Mar 03:00 EDT",
        "Mon 09 Mar 02:30 EDT",
    ]
    # Two fixed times in the skipped hour are one run at the jump; 03:00 itself is the same run.
    assert _next("0,30 2,3 * * *", datetime(2026, 3, 29, 1, 0, tzinfo=BERLIN), 3) == [
        "Sun 29 Mar 03:00 CEST",
        "Sun 29 Mar 03:30 CEST",
        "Mon 30 Mar 02:00 CEST",
    ]


def test_a_fixed_time_the_clocks_pass_twice_runs_once_the_first_time():
    fires = parse_schedule("30 2 * * *", BERLIN, NOW).occurrences(
        datetime(2026, 10, 24, 12, 0, tzinfo=BERLIN), datetime(2026, 10, 27, 12, 0, tzinfo=BERLIN), NOW
    )
    assert [f.astimezone(UTC).isoformat() for f in fires] == [
        "2026-10-25T00:30:00+00:00",  # 02:30 summer time; 02:30 winter time an hour later does not run it again
        "2026-10-26T01:30:00+00:00",
        "2026-10-27T01:30:00+00:00",
    ]
    # A daily 07:30 is untouched by either night (tested in test_a_daily_0730_routine_in_berlin_...).


@pytest.mark.parametrize("tz", [BERLIN, NEW_YORK])
def test_a_wildcard_job_goes_on_in_real_time_through_both_changes(tz):
    """*/15 runs every 15 minutes of real time: on the short day 92 times, on the long day 100."""
    schedule = parse_schedule("*/15 * * * *", tz, NOW)
    for day, hours in [(_change_day(tz, 3), 23), (_change_day(tz, 10 if tz is BERLIN else 11), 25)]:
        start = datetime(day.year, day.month, day.day, tzinfo=tz).astimezone(UTC)  # real time from here on
        fires = schedule.occurrences(start - timedelta(seconds=1), start + timedelta(hours=hours, seconds=-1), NOW)
        assert len(fires) == hours * 4
        gaps = {(b.astimezone(UTC) - a.astimezone(UTC)) for a, b in zip(fires, fires[1:], strict=False)}
        assert gaps == {timedelta(minutes=15)}
    # Hourly (the hour field is *) likewise: 01:00, then 03:00 summer time, an hour of real time later.
    hourly = parse_schedule("0 * * * *", BERLIN, NOW)
    assert hourly.next_after(datetime(2026, 3, 29, 1, 0, tzinfo=BERLIN), NOW) == datetime(2026, 3, 29, 3, 0, tzinfo=BERLIN)
    first = hourly.next_after(datetime(2026, 10, 25, 1, 30, tzinfo=BERLIN), NOW)
    second = hourly.next_after(first, NOW)
    assert (first.astimezone(UTC).hour, second.astimezone(UTC).hour) == (0, 1)  # 02:00 summer time, then 02:00 winter time


def _change_day(tz: ZoneInfo, month: int):
    """The day in ``month`` of 2026 on which the clocks of ``tz`` change."""
    day = datetime(2026, month, 1, 12, tzinfo=tz)
    while (day + timedelta(days=1)).utcoffset() == day.utcoffset():
        day += timedelta(days=1)
    return (day + timedelta(days=1)).date()


# ---- bounds: nothing that cannot be represented gets in ----


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("every 10000000 d", "the longest is 366 days"),
        ("every 367 d", "the longest is 366 days"),
        ("every 99999999999999999999999999 s", "longer than anything"),
        ("9999-12-31T23:59-12:00", "at most 10 years"),
        ("0001-01-01T00:00+14:00", "at most 10 years"),
        ("0001-01-01 00:00", "at most 10 years"),
        ("9999-12-31 23:59", "at most 10 years"),
        ("2037-01-01 10:00", "at most 10 years"),
        pytest.param(",".join(["0"] * 500_000) + " * * * *", "at most 1,000", id="a megabyte"),
    ],
)
def test_a_schedule_that_cannot_be_represented_is_refused_with_what_is_allowed(text, said):
    with pytest.raises(ScheduleError) as refused:
        parse_schedule(text, BERLIN, FRIDAY)
    assert said in str(refused.value)
    assert refused.value.hint
    assert parse_schedule("every 366 d", BERLIN, FRIDAY).seconds == 366 * 86400
    assert parse_schedule("2036-11-01 10:00", BERLIN, FRIDAY).kind == "once"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("in 99999999999 d", "at most 10 years"),
        ("in 3654 d", "at most 10 years"),
        ("in 999999999999999999999999 min", "longer than anything"),
        ("9999-12-31T23:59-12:00", "at most 10 years"),
        ("0001-01-01T00:00+14:00", "at most 10 years"),
        ("in 5", "in 5 what? say in 5 min"),
        ("in", "in N what?"),
    ],
)
def test_a_reminder_time_that_cannot_be_represented_is_refused_with_what_is_allowed(text, said):
    with pytest.raises(ScheduleError) as refused:
        parse_when(text, BERLIN, FRIDAY)
    assert said in str(refused.value)


def test_the_minimum_interval_refuses_an_every_below_it_and_says_why():
    assert parse_schedule("every 1 s", BERLIN, NOW).seconds == 1  # no minimum asked: the book passes the config's
    with pytest.raises(ScheduleError) as refused:
        parse_schedule("every 30 s", BERLIN, NOW, min_interval=60)
    assert "at most every 1 min" in str(refused.value)
    assert "runs the model" in refused.value.hint and "min_interval_seconds" in refused.value.hint
    assert parse_schedule("every 1 min", BERLIN, NOW, min_interval=60).seconds == 60
    assert parse_schedule("* * * * *", BERLIN, NOW, min_interval=60).kind == "cron"  # cron's finest is a minute


def test_fire_times_at_the_ends_of_the_calendar_are_none_not_an_error():
    end = datetime(9999, 12, 31, 23, 0, tzinfo=UTC)
    start = datetime(1, 1, 2, tzinfo=UTC)
    for text in ("* * * * *", "0 0 1 1 *", "30 2 * * *", "every 366 d", "every 1 s"):
        schedule = parse_schedule(text, BERLIN, NOW)
        assert schedule.next_after(end, end) is None, text
        assert schedule.occurrences(end, end + timedelta(minutes=59), end) == []
        assert schedule.latest_between(start, end, start) is not None or text.startswith("every"), text
        assert schedule.latest_between(end, start, end) is None
    anchor = end - timedelta(days=1)
    assert parse_schedule("every 366 d", BERLIN, NOW).next_after(start, anchor) == anchor  # the anchor itself
    assert parse_schedule("every 366 d", BERLIN, NOW).next_after(anchor, anchor) is None  # a year past 9999
