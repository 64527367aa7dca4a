"""The routine clock on a real asyncio loop, a real ledger and a real routines file; ``now`` is
injected (the wall clock shifted) so that missed runs can be made without waiting hours."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tarsd.routines.book import Book, Routine
from tarsd.routines.clock import RoutineClock
from tarsd.routines.ledger import Ledger
from tarsd.store.database import Store

BERLIN = ZoneInfo("Europe/Berlin")
HOUR = 3600.0


class Wall:
    """The wall clock, shifted by ``offset`` seconds."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@pytest.fixture
def parts(tmp_path):
    store = Store(tmp_path / "index.sqlite3")
    book = Book(tmp_path / "routines.toml", BERLIN)
    yield book, Ledger(store)
    store.close()


def make_clock(book, ledger, wall, fired, finish=True):
    async def fire(routine: Routine, when: datetime, late: bool) -> None:
        fired.append((routine.name, when, late))
        if finish:
            run = ledger.run_for(routine.name, when.timestamp())
            ledger.finish(run.id, "reminded" if routine.is_reminder else "spoke")

    return RoutineClock(book, ledger, BERLIN, fire, timedelta(hours=24), timedelta(hours=2), now=wall)


async def wait_until(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def test_a_routine_every_second_fires_about_once_a_second(parts):
    book, ledger = parts
    wall, fired = Wall(), []
    book.add(Routine(name="tick", schedule="every 1s", created=time.time(), prompt="tick"))

    async def main():
        clock = make_clock(book, ledger, wall, fired)
        assert await clock.start() == []
        started = time.monotonic()
        await wait_until(lambda: len(fired) >= 3)
        elapsed = time.monotonic() - started
        await clock.stop()
        return elapsed

    elapsed = asyncio.run(main())
    assert elapsed >= 1.5  # three fires a second apart, not at once
    times = [when.timestamp() for _, when, _ in fired]
    # Whole seconds of the series apart (a busy machine may coalesce one, never fire one twice).
    assert all(b - a >= 1.0 and (b - a).is_integer() for a, b in zip(times, times[1:], strict=False))
    assert all(not late for *_, late in fired)
    assert len({r.scheduled_at for r in ledger.runs("tick")}) == len(ledger.runs("tick"))


def test_a_missed_run_within_grace_fires_once_late_and_one_past_grace_is_skipped_and_listed(parts):
    book, ledger = parts
    wall, fired = Wall(), []
    created = time.time()
    book.add(Routine(name="hourly", schedule="every 1h", created=created, prompt="p"))
    book.add(Routine(name="slow", schedule="every 1h", created=created, prompt="p", grace_minutes=10))

    async def main(offset):
        wall.offset = offset
        clock = make_clock(book, ledger, wall, fired)
        lines = await clock.start()
        await wait_until(lambda: all(r.state == "done" for r in ledger.runs()))
        await clock.stop()
        return lines

    # Five hours and a half later: five occurrences missed each, coalesced into the latest (30 min ago).
    lines = asyncio.run(main(5.5 * HOUR))
    assert [(name, late) for name, _, late in fired] == [("hourly", True)]
    assert fired[0][1].timestamp() == created // 1 + 5 * HOUR
    [line] = lines
    assert line.startswith("slow: the run of ") and line.endswith(" was skipped (missed by 30 min, grace 10 min)")
    assert ledger.runs("slow")[0].outcome == "skipped"
    assert len(ledger.runs("hourly")) == 1  # the four earlier ones are recorded nowhere
    # A restart at the same moment finds nothing more to do.
    fired.clear()
    assert asyncio.run(main(5.5 * HOUR)) == [] and fired == []


def test_a_one_shot_fires_once_and_not_again_after_a_restart(parts):
    book, ledger = parts
    wall, fired = Wall(), []
    at = datetime.fromtimestamp(time.time() + 0.5, BERLIN).replace(microsecond=0) + timedelta(seconds=1)
    book.add(Routine(name="ping", schedule=at.isoformat(), created=time.time(), text="ping"))

    async def main():
        clock = make_clock(book, ledger, wall, fired)
        await clock.start()
        await wait_until(lambda: fired and ledger.last_run("ping").state == "done")
        assert clock.timer is None and clock.next_run("ping") is None  # nothing left to wait for
        await clock.stop()

    asyncio.run(main())
    assert fired == [("ping", at, False)]

    async def restart():
        clock = make_clock(book, ledger, wall, fired)
        assert await clock.start() == []
        assert clock.timer is None
        await clock.stop()

    wall.offset = 10 * HOUR
    asyncio.run(restart())
    assert len(fired) == 1 and ledger.last_run("ping").outcome == "reminded"


def test_paused_routines_never_fire_and_an_idle_clock_arms_no_timer(parts):
    book, ledger = parts
    wall, fired = Wall(), []
    book.add(Routine(name="tick", schedule="every 1s", created=time.time() - 10 * HOUR, prompt="p", paused=True))

    async def main():
        clock = make_clock(book, ledger, wall, fired)
        assert await clock.start() == []
        assert clock.timer is None and clock.armed_count == 0 and clock.next_run("tick") is None
        book.set_paused("tick", False)
        await clock.refresh()  # the file changed: re-read (the book told the clock already), and the routine is due within a second
        assert clock.timer is not None and clock.next_run("tick") is not None
        await wait_until(lambda: fired)
        book.set_paused("tick", True)
        await clock.refresh()
        assert clock.timer is None
        count = len(fired)
        await asyncio.sleep(1.5)
        assert len(fired) == count
        await clock.stop()

    asyncio.run(main())


def test_a_routine_still_running_skips_its_next_occurrence(parts):
    book, ledger = parts
    wall, fired = Wall(), []
    release = None

    async def main():
        nonlocal release
        release = asyncio.Event()

        async def slow_fire(routine, when, late):
            fired.append(when)
            await release.wait()
            ledger.finish(ledger.run_for(routine.name, when.timestamp()).id, "spoke")

        book.add(Routine(name="tick", schedule="every 1s", created=time.time(), prompt="p"))
        clock = RoutineClock(book, ledger, BERLIN, slow_fire, timedelta(hours=24), timedelta(hours=2), now=wall)
        await clock.start()
        await wait_until(lambda: any(r.outcome == "skipped" for r in ledger.runs("tick")))
        release.set()
        await clock.stop()

    asyncio.run(main())
    assert len(fired) == 1
    assert any(r.detail == "the previous run was still going" for r in ledger.runs("tick"))


def test_check_after_a_wall_clock_jump_runs_what_came_due(parts):
    book, ledger = parts
    wall, fired = Wall(), []
    book.add(Routine(name="hourly", schedule="every 1h", created=time.time(), prompt="p"))

    async def main():
        clock = make_clock(book, ledger, wall, fired)
        await clock.start()
        assert fired == [] and clock.timer is not None
        wall.offset = HOUR + 30  # the machine slept an hour: the loop's clock stood still
        clock.check()
        await wait_until(lambda: fired)
        await clock.stop()

    asyncio.run(main())
    assert [(name, late) for name, _, late in fired] == [("hourly", False)]
