"""The run ledger and the inbox in a real index database: an occurrence is taken once, a kill's
runs are found, a message and its deliveries are posted together, retries are kept count of."""

from __future__ import annotations

import time

import apsw
import pytest

from tarsd.routines.ledger import Ledger
from tarsd.store.database import MIGRATIONS, SCHEMA_VERSION, Store


@pytest.fixture
def store(tmp_path):
    store = Store(tmp_path / "index.sqlite3")
    yield store
    store.close()


def test_an_occurrence_is_claimed_once_even_by_a_second_ledger(store):
    first, second = Ledger(store), Ledger(store)
    run = first.claim("morning-brief", 1000.0, late=False)
    assert run is not None and run.state == "running" and run.outcome == "" and not run.late
    assert second.claim("morning-brief", 1000.0, late=True) is None
    assert second.skipped("morning-brief", 1000.0, "x") is None
    done = first.finish(run.id, "spoke", detail="3 tasks", conversation="c1")
    assert (done.state, done.outcome, done.detail, done.conversation) == ("done", "spoke", "3 tasks", "c1")
    assert done.finished_at is not None
    skipped = first.skipped("morning-brief", 2000.0, "missed by 3 h, grace 2 h")
    assert (skipped.outcome, skipped.state, skipped.late) == ("skipped", "done", True)
    assert first.last_scheduled("morning-brief") == 2000.0 and first.last_scheduled("other") is None
    assert first.last_scheduled_all() == {"morning-brief": 2000.0}
    assert [r.scheduled_at for r in first.runs()] == [2000.0, 1000.0]
    assert first.last_run("morning-brief").id == skipped.id
    with pytest.raises(ValueError, match="no such outcome"):
        first.finish(run.id, "great")


def test_runs_left_running_by_a_kill_are_interrupted_at_the_next_start(store):
    ledger = Ledger(store)
    left = ledger.claim("a", 1.0, late=False)
    ledger.finish(ledger.claim("b", 1.0, late=False).id, "quiet")
    [found] = Ledger(store).interrupted()
    assert (found.id, found.outcome, found.state) == (left.id, "interrupted", "done")
    assert Ledger(store).interrupted() == []


def test_runs_since_counts_the_runs_that_ran(store):
    ledger = Ledger(store)
    since = time.time() - 1
    ledger.finish(ledger.claim("a", 1.0, late=False).id, "spoke")
    ledger.finish(ledger.claim("a", 2.0, late=False).id, "limited")
    ledger.skipped("a", 3.0, "missed")
    ledger.claim("a", 4.0, late=False)  # running now: counts itself
    assert ledger.runs_since("a", since) == 2
    assert ledger.runs_since("a", time.time() + 10) == 0


def test_a_message_is_posted_with_its_deliveries_and_its_run(store):
    ledger = Ledger(store)
    run = ledger.claim("morning-brief", 1.0, late=False)
    item = ledger.post(
        "routine:morning-brief", "Morning brief", "3 tasks today", ["inbox", "telegram", "note", "telegram"], claim_run=run.id
    )
    assert (item.source, item.title, item.text, item.read) == ("routine:morning-brief", "Morning brief", "3 tasks today", False)
    assert [(d.target, d.state, d.attempts) for d in item.deliveries] == [("telegram", "pending", 0), ("note", "pending", 0)]
    assert ledger.runs("morning-brief")[0].message_id == item.id
    assert ledger.finish(run.id, "spoke").message_id == item.id  # kept when finish names none
    only_inbox = ledger.post("reminder:x", "", "call", [])
    assert only_inbox.deliveries == () and ledger.inbox()[0].id == only_inbox.id  # newest first
    assert ledger.unread() == 2


def test_delivery_retries_and_giving_up_are_kept_count_of(store):
    ledger = Ledger(store)
    item = ledger.post("routine:a", "t", "x", ["telegram", "whatsapp"])
    telegram, whatsapp = item.deliveries
    now = time.time() + 1
    assert [d.id for d in ledger.due_deliveries(now)] == [telegram.id, whatsapp.id]
    ledger.delivery_failed(telegram.id, "Telegram answered 502", retry_at=now + 60)
    assert [d.id for d in ledger.due_deliveries(now)] == [whatsapp.id]
    assert ledger.next_delivery_at() <= now
    ledger.delivered(whatsapp.id)
    assert ledger.next_delivery_at() == now + 60
    ledger.delivery_failed(telegram.id, "Telegram answered 403", retry_at=None)
    assert ledger.next_delivery_at() is None and ledger.due_deliveries(now + 3600) == []
    states = {d.target: d for d in ledger.message(item.id).deliveries}
    assert (states["telegram"].state, states["telegram"].attempts, states["telegram"].last_error) == ("failed", 2, "Telegram answered 403")
    assert (states["whatsapp"].state, states["whatsapp"].attempts) == ("sent", 1) and states["whatsapp"].sent_at
    assert ledger.inbox()[0].id == item.id  # given up: still in the inbox


def test_unread_and_mark_read(store):
    ledger = Ledger(store)
    ids = [ledger.post("reminder:r", "", f"m{n}", []).id for n in range(3)]
    assert ledger.mark_read([ids[0], ids[0], 999]) == 1
    assert ledger.unread() == 2
    assert [i.id for i in ledger.inbox(unread_only=True)] == [ids[2], ids[1]]
    assert ledger.mark_read(None) == 2 and ledger.unread() == 0
    assert ledger.mark_read(None) == 0


def test_a_version_9_index_gets_the_routine_tables(tmp_path):
    path = tmp_path / "old.sqlite3"
    conn = apsw.Connection(str(path))
    with conn:
        for version in range(1, 10):
            conn.execute(MIGRATIONS[version])
        conn.execute("PRAGMA user_version = 9")
        conn.execute("INSERT INTO meta(key, value) VALUES ('kept', 'yes')")
    conn.close()
    store = Store(path)
    try:
        assert store.conn.execute("PRAGMA user_version").fetchall()[0][0] == SCHEMA_VERSION == 12
        assert store.get_meta("kept") == "yes"
        ledger = Ledger(store)
        assert ledger.claim("a", 1.0, late=False) is not None
        assert ledger.post("routine:a", "", "x", ["note"]).deliveries[0].target == "note"
    finally:
        store.close()


def test_the_queries_about_one_routine_use_an_index_and_never_walk_every_run(store):
    """What the clock, a routine's listing and status ask about one routine, with a routine that ran
    every minute for months beside it: each statement the ledger runs is a search of an index (no
    scan of the table, no sort of every run of the routine)."""
    ledger = Ledger(store)
    with store.writer_connection() as conn:
        conn.execute(
            "WITH RECURSIVE n(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM n WHERE k < 20000) "
            "INSERT INTO routine_runs(routine, scheduled_at, started_at, finished_at, state, outcome) "
            "SELECT CASE k % 10 WHEN 0 THEN 'brief' ELSE 'pulse' END, k * 60.0, k * 60.0 + 1, k * 60.0 + 2, 'done', 'spoke' FROM n"
        )

    def plans(ask) -> list[tuple[str, str]]:
        """The query plan of each statement ``ask`` made the ledger run."""
        statements: list[str] = []
        ledger.conn.exec_trace = lambda _cursor, sql, _bindings: statements.append(sql) or True
        try:
            ask()
        finally:
            ledger.conn.exec_trace = None
        assert statements
        return [
            (sql, " / ".join(row[3] for row in ledger.conn.execute("EXPLAIN QUERY PLAN " + sql, ('["brief"]', 0.0)[: sql.count("?")])))
            for sql in statements
        ]

    def asked_before():
        assert ledger.last_scheduled("brief") == 20000 * 60.0
        assert ledger.last_run("brief").scheduled_at == 20000 * 60.0
        assert [r.scheduled_at for r in ledger.runs("pulse", 2)] == [19999 * 60.0, 19998 * 60.0]
        assert ledger.runs_since("brief", 19995 * 60.0) == 1

    def asked_for_many():
        names = ["brief", "pulse", "gone"]
        assert ledger.latest_outcomes(names).keys() == ledger.last_runs(names).keys() == {"brief", "pulse"}
        assert ledger.runs_today(names, 19995 * 60.0) == {"brief": 1, "pulse": 5, "gone": 0}

    for ask in (asked_before, asked_for_many):
        for sql, plan in plans(ask):
            # The runs are searched through an index, never scanned or sorted whole (the list of names asked for is scanned).
            runs = [step for step in plan.split(" / ") if "routine_runs" in step]
            assert runs and all(step.startswith("SEARCH") for step in runs) and "TEMP B-TREE" not in plan, (sql, plan)
