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
