"""The clock against what can go wrong in a routines file kept for months, on a real asyncio loop, a
real ledger (index database) and a real routines file: one routine whose times cannot be computed
is set aside with its error while the others keep firing; a write through the book (a reminder the
model set, from a worker thread) arms the clock at once; a routine resumed starts from now; and a
fire's work does not grow with the number of routines (no re-read of the file, no query of every
routine's runs)."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tarsd.routines.book import Book, Routine
from tarsd.routines.clock import RoutineClock
from tarsd.routines.ledger import Ledger
from tarsd.store.database import Store

BERLIN = ZoneInfo("Europe/Berlin")
HOUR = 3600.0


class CountingBook(Book):
    """The real book, counting how often the file is looked at (each load is a stat, and a read when it changed)."""

    loads = 0

    def load(self):
        self.loads += 1
        return super().load()


class CountingLedger(Ledger):
    """The real ledger, counting the queries over the runs of routines other than the one that fires."""

    lookups = 0

    def last_scheduled_all(self):
        self.lookups += 1
        return super().last_scheduled_all()

    def last_scheduled(self, routine):
        self.lookups += 1
        return super().last_scheduled(routine)


@pytest.fixture
def store(tmp_path):
    store = Store(tmp_path / "index.sqlite3")
    yield store
    store.close()


def make_clock(book, ledger, fired):
    async def fire(routine: Routine, when: datetime, late: bool) -> None:
        fired.append((routine.name, when, late))
        run = ledger.run_for(routine.name, when.timestamp())
        ledger.finish(run.id, "reminded" if routine.is_reminder else "spoke")

    return RoutineClock(book, ledger, BERLIN, fire, timedelta(hours=24), timedelta(hours=2))


async def wait_until(condition, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def stamp(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class UncheckingBook(Book):
    """The real book without its checks of each entry: what reaches the clock when an entry got past
    them (written by an older tars, or made unreadable by a change of the time zone)."""

    def _check(self, routine, now):
        pass


def tick_and_big(now: float) -> str:
    """A reminder every second, and a routine whose next run (year 29405) no clock can hold."""
    return f"""[reminder.tick]
schedule = "every 1s"
text = "tick"
created = {stamp(now)}

[routine.big]
schedule = "every 10000000 d"
prompt = "the next one is in the year 29405"
created = {stamp(now - 10)}
"""


def test_bad_entries_are_named_and_the_others_keep_firing(tmp_path, store):
    path = tmp_path / "routines.toml"
    path.write_text(
        tick_and_big(time.time())
        + """
[routine.from-the-far-future]
schedule = "every 1h"
prompt = "created in the last hour of year 9999"
created = 9999-12-31T23:30:00Z

[reminder.last-minute]
schedule = "9999-12-31T23:59-12:00"
text = "past the end of the calendar in UTC"

[reminder.first-minute]
schedule = "0001-01-01T00:00+14:00"
text = "before its start in UTC"
"""
    )
    book, ledger, fired = Book(path, BERLIN), Ledger(store), []

    async def main():
        clock = make_clock(book, ledger, fired)
        await clock.start()  # must not raise
        await wait_until(lambda: sum(name == "tick" for name, *_ in fired) >= 2, "tick to fire twice")
        # The book leaves out what it cannot use, and names each.
        for name in ("big", "from-the-far-future", "last-minute", "first-minute"):
            assert f".{name}]" in book.problem, (name, book.problem)
        # One added while it runs (a hand edit) is named the same way; tick goes on.
        with path.open("a") as handle:
            handle.write('\n[routine.later]\nschedule = "every 1h"\nprompt = "x"\ncreated = 1e300\n')
        await clock.refresh()
        assert "[routine.later]" in book.problem
        count = len(fired)
        await wait_until(lambda: len(fired) >= count + 2, "tick to go on firing")
        await clock.stop()

    asyncio.run(main())
    assert {name for name, *_ in fired} == {"tick"}


def test_a_routine_whose_times_cannot_be_computed_is_set_aside_named_and_the_others_keep_firing(tmp_path, store):
    """Should one get past the book, the clock sets it aside with its error: one routine's error is that routine's."""
    path = tmp_path / "routines.toml"
    path.write_text(tick_and_big(time.time()))
    book, ledger, fired = UncheckingBook(path, BERLIN), Ledger(store), []

    async def main():
        clock = make_clock(book, ledger, fired)
        await clock.start()  # must not raise
        await wait_until(lambda: sum(name == "tick" for name, *_ in fired) >= 2, "tick to fire twice")
        problems = clock.problems()
        assert set(problems) == {"big"}, problems
        assert "every 10000000 d" in problems["big"]
        assert clock.next_run("big") is None and clock.next_run("tick") is not None
        await clock.stop()

    asyncio.run(main())
    assert {name for name, *_ in fired} == {"tick"}


def test_a_reminder_written_through_the_book_from_another_thread_is_armed_at_once(tmp_path, store):
    """What the model's remind_user does: book.add on a worker thread, no request to tarsd afterwards."""
    book, ledger, fired = Book(tmp_path / "routines.toml", BERLIN), Ledger(store), []

    async def main():
        clock = make_clock(book, ledger, fired)
        await clock.start()
        assert clock.timer is None  # nothing to wait for yet
        at = datetime.fromtimestamp(time.time() + 1.5, BERLIN).replace(microsecond=0)
        reminder = Routine(name="remind-soon", schedule=at.isoformat(), created=time.time(), text="soon", by="model")
        writer = threading.Thread(target=book.add, args=(reminder,))
        writer.start()
        await asyncio.to_thread(writer.join)
        await wait_until(lambda: fired, "the reminder to fire without a check() or a request")
        await clock.stop()
        return at

    at = asyncio.run(main())
    assert fired == [("remind-soon", at, False)]


def test_a_routine_resumed_starts_from_now_and_runs_nothing_missed_while_paused(tmp_path, store):
    book, ledger, fired = Book(tmp_path / "routines.toml", BERLIN), Ledger(store), []
    created = time.time() - 5.5 * HOUR
    book.add(Routine(name="hourly", schedule="every 1h", created=created, prompt="p"))
    book.set_paused("hourly", True)

    async def main():
        clock = make_clock(book, ledger, fired)
        await clock.start()
        assert clock.next_run("hourly") is None
        book.set_paused("hourly", False)  # resumed 30 minutes after an occurrence it was paused for
        clock.check()
        await wait_until(lambda: clock.next_run("hourly") is not None, "the clock to see the routine resumed")
        upcoming = clock.next_run("hourly")
        assert upcoming.timestamp() > time.time()
        assert abs(upcoming.timestamp() - (created + 6 * HOUR)) < 1  # the next of its series, not one missed
        await asyncio.sleep(0.5)
        await clock.stop()

    asyncio.run(main())
    assert fired == [] and ledger.runs("hourly") == []


def test_a_fire_reads_neither_the_routines_file_nor_the_runs_of_every_routine(tmp_path, store):
    now = datetime.now(BERLIN)
    path = tmp_path / "routines.toml"
    lines = [f'[reminder.tick]\nschedule = "every 1s"\ntext = "tick"\ncreated = {stamp(time.time())}\n']
    for k in range(300):  # daily, none due now: their times are computed at the start, never at tick's fires
        hour = (now.hour + 3 + k % 18) % 24
        lines.append(f'[routine.daily-{k}]\nschedule = "{k % 60} {hour} * * *"\nprompt = "p"\ncreated = {stamp(time.time())}\n')
    path.write_text("\n".join(lines))
    book, ledger, fired = CountingBook(path, BERLIN), CountingLedger(store), []

    async def main():
        clock = make_clock(book, ledger, fired)
        await clock.start()
        await wait_until(lambda: fired, "the first fire")
        loads, lookups = book.loads, ledger.lookups
        await wait_until(lambda: len(fired) >= 4, "three more fires")
        await clock.stop()
        return loads, lookups

    loads, lookups = asyncio.run(main())
    assert book.loads == loads and ledger.lookups == lookups


def test_a_hand_written_reminder_without_a_creation_time_survives_tars_rewriting_the_file(tmp_path, store):
    """An entry without `created` counts from the file's last change. When tars rewrote the file
    (a reminder sent and removed, another added) after such a one-shot's time but before it was
    sent (a busy machine, tarsd stopped), it read as set after its own time: refused, never sent."""
    path = tmp_path / "routines.toml"
    due = time.time() + 1
    path.write_text(
        f'[reminder.by-hand]\nschedule = "{datetime.fromtimestamp(due, UTC).isoformat(timespec="seconds")}"\ntext = "by hand"\n'
    )
    book = Book(path, BERLIN)
    assert [r.name for r in book.load()] == ["by-hand"]
    time.sleep(max(0.0, due + 1.1 - time.time()))  # its time passes before it was sent
    book.add(Routine(name="other", schedule="every 1h", created=time.time(), prompt="p"))  # tars rewrites the file
    assert {r.name for r in book.load()} == {"by-hand", "other"}, book.problem
    fired: list = []

    async def main():
        clock = make_clock(book, Ledger(store), fired)
        await clock.start()  # tarsd back: the reminder is caught up, late
        await wait_until(lambda: fired, "the reminder to be sent")
        await clock.stop()

    asyncio.run(main())
    assert [(name, late) for name, _, late in fired] == [("by-hand", True)]
