"""The acceptance line on daylight saving, through the clock itself (not only the schedule): a daily
07:30 routine in Europe/Berlin, driven by the real RoutineClock on a real asyncio loop with a real
ledger and routines file, fires once a day at 07:30 local on both sides of each change. The wall
clock is shifted (``now`` is injected) to a tenth of a second before each morning in turn, as a
machine waking there would see it; the clock's own timer then fires the run."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from tarsd.routines.book import Book, Routine
from tarsd.routines.clock import RoutineClock
from tarsd.routines.ledger import Ledger
from tarsd.store.database import Store

BERLIN = ZoneInfo("Europe/Berlin")


class Wall:
    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def set(self, when: datetime) -> None:
        self.offset = when.timestamp() - time.time()


def test_a_daily_0730_routine_in_berlin_fires_once_at_0730_local_on_both_sides_of_each_change(tmp_path):
    store = Store(tmp_path / "index.sqlite3")
    book = Book(tmp_path / "routines.toml", BERLIN)
    ledger = Ledger(store)
    wall, fired = Wall(), []
    mornings = [datetime(2026, 3, day, 7, 30, tzinfo=BERLIN) for day in (27, 28, 29, 30, 31)]
    mornings += [datetime(2026, 10, day, 7, 30, tzinfo=BERLIN) for day in (23, 24, 25, 26, 27)]
    wall.set(mornings[0] - timedelta(days=1, hours=1))
    book.add(Routine(name="brief", schedule="30 7 * * *", created=wall(), prompt="the morning brief"))

    async def fire(routine: Routine, when: datetime, late: bool) -> None:
        fired.append((when, late, wall()))
        ledger.finish(ledger.run_for(routine.name, when.timestamp()).id, "spoke")

    async def main() -> None:
        clock = RoutineClock(book, ledger, BERLIN, fire, timedelta(hours=24), timedelta(minutes=30), now=wall)
        await clock.start()
        for number, morning in enumerate(mornings):
            wall.set(morning - timedelta(seconds=0.1))
            clock.check()  # the wall clock jumped (a night's sleep): the clock re-arms for this morning
            assert clock.next_run("brief") == morning, (morning, clock.next_run("brief"))
            deadline = time.monotonic() + 10
            while len(fired) <= number:
                assert time.monotonic() < deadline, f"no run at {morning}"
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.15)  # nothing more fires this morning
            assert len(fired) == number + 1, fired
        await clock.stop()

    try:
        asyncio.run(main())
        outcomes = [run.outcome for run in ledger.runs("brief", 100)]
    finally:
        store.close()
    assert [when for when, _, _ in fired] == mornings  # one run each morning, at 07:30 local
    assert all(not late and 0 <= at - when.timestamp() < 5 for when, late, at in fired)  # on time, by the clock's own timer
    utc = [when.astimezone(UTC).strftime("%m-%d %H:%M") for when, _, _ in fired]
    assert utc == [
        "03-27 06:30", "03-28 06:30", "03-29 05:30", "03-30 05:30", "03-31 05:30",
        "10-23 05:30", "10-24 05:30", "10-25 06:30", "10-26 06:30", "10-27 06:30",
    ]  # fmt: skip
    # Each jump over a day or more (the first night, the months between the changes): its latest missed
    # morning is recorded skipped (past its grace), once; the mornings woken just before all ran.
    assert outcomes.count("spoke") == 10 and outcomes.count("skipped") == 2


def test_a_reminders_own_grace_is_the_one_the_clock_keeps(tmp_path):
    """A reminder with grace_minutes set is skipped past it, as `tarsctl routines` says its grace is
    (the clock once kept the reminders' default of a day for every reminder)."""
    store = Store(tmp_path / "index.sqlite3")
    book = Book(tmp_path / "routines.toml", BERLIN)
    ledger = Ledger(store)
    wall, fired = Wall(), []
    # 15:00 two days from now (a date written in the test would pass one day: the book refuses a one-shot in the past).
    due = (datetime.now(BERLIN) + timedelta(days=2)).replace(hour=15, minute=0, second=0, microsecond=0)
    at = f"{due:%Y-%m-%d %H:%M}"
    # Written now (the book takes no creation time ahead of the real clock): due in two days.
    book.add(Routine(name="strict", schedule=at, created=time.time(), text="in the hour or not at all", grace_minutes=60))
    book.add(Routine(name="lenient", schedule=at, created=time.time(), text="any time today"))

    async def fire(routine: Routine, when: datetime, late: bool) -> None:
        fired.append((routine.name, late))
        ledger.finish(ledger.run_for(routine.name, when.timestamp()).id, "reminded")

    async def main() -> list[str]:
        wall.set(due + timedelta(hours=2))  # tarsd was stopped over the time
        clock = RoutineClock(book, ledger, BERLIN, fire, timedelta(hours=24), timedelta(minutes=30), now=wall)
        lines = await clock.start()
        await asyncio.sleep(0.2)
        await clock.stop()
        return lines

    try:
        lines = asyncio.run(main())
        outcomes = {run.routine: run.outcome for run in ledger.runs("", 10)}
    finally:
        store.close()
    assert fired == [("lenient", True)]
    assert outcomes == {"strict": "skipped", "lenient": "reminded"}
    assert [line for line in lines if line.startswith("strict:") and "grace 60 min" in line]
