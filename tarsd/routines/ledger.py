"""What the routines did and said, in the index database: the runs (one row per occurrence taken,
so none runs twice, across restarts too), the inbox (every message tars sent first) and the
deliveries of each message to its other targets (a messenger, a note), retried until sent or given up.

A run is claimed before it starts (``claim``: the occurrence's row, state running) and finished
with its outcome; tarsd killed in between leaves it running, and the next start marks it
interrupted (``interrupted``). A message is posted in one transaction with its deliveries and
the run that made it: the inbox holds every message whatever its targets, so one a messenger
never took is still there to read.

On a connection of its own, each change committed at once (as the proposals, tarsd/memory/pending_rules.py).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from dataclasses import dataclass

from tarsd.store.connection import writing_first
from tarsd.store.database import Store

RUNNING, DONE = "running", "done"
OUTCOMES = ("spoke", "quiet", "skipped", "limited", "failed", "interrupted", "reminded")
INBOX = "inbox"
PENDING, SENT, FAILED = "pending", "sent", "failed"
# Outcomes of runs that never reached the model: they do not count towards a routine's runs per day.
_NOT_RUN = ("skipped", "limited")

_RUN_COLUMNS = "id, routine, scheduled_at, started_at, finished_at, state, outcome, late, detail, conversation, message_id"
_INBOX_COLUMNS = "id, created_at, source, title, text, read"
_DELIVERY_COLUMNS = "id, message_id, target, state, attempts, next_attempt_at, last_error, sent_at"


@dataclass(frozen=True)
class Run:
    id: int
    routine: str
    scheduled_at: float
    started_at: float
    finished_at: float | None
    state: str  # running | done
    outcome: str  # "" while running, else one of OUTCOMES
    late: bool
    detail: str
    conversation: str
    message_id: int | None


@dataclass(frozen=True)
class DeliveryState:
    id: int
    message_id: int
    target: str
    state: str  # pending | sent | failed
    attempts: int
    next_attempt_at: float | None
    last_error: str
    sent_at: float | None


@dataclass(frozen=True)
class InboxItem:
    id: int
    created_at: float
    source: str  # routine:NAME | reminder:NAME
    title: str
    text: str
    read: bool
    deliveries: tuple[DeliveryState, ...] = ()


def _run(row: tuple) -> Run:
    *head, late, detail, conversation, message_id = row
    return Run(*head, bool(late), detail, conversation, message_id)


class Ledger:
    def __init__(self, store: Store):
        self.conn = store.writer_connection()
        self.lock = threading.Lock()

    def _writing(self) -> contextlib.AbstractContextManager[None]:
        """A transaction that takes the write lock first (tarsd/store/connection.py writing_first)."""
        return writing_first(self.conn, self.lock)

    def _rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self.lock:
            return self.conn.execute(sql, args).fetchall()

    def _get_run(self, run_id: int) -> Run:
        return _run(self.conn.execute(f"SELECT {_RUN_COLUMNS} FROM routine_runs WHERE id = ?", (run_id,)).fetchall()[0])

    # Runs

    def claim(self, routine: str, scheduled_at: float, late: bool) -> Run | None:
        """Take the occurrence ``scheduled_at`` of ``routine``: a running run, or None when it was taken already."""
        with self._writing():
            self.conn.execute(
                "INSERT OR IGNORE INTO routine_runs(routine, scheduled_at, started_at, state, late) VALUES (?, ?, ?, ?, ?)",
                (routine, scheduled_at, time.time(), RUNNING, int(late)),
            )
            if self.conn.changes() == 0:
                return None
            return self._get_run(self.conn.last_insert_rowid())

    def finish(self, run_id: int, outcome: str, detail: str = "", conversation: str = "", message_id: int | None = None) -> Run:
        """A run is over. ``message_id`` None keeps the one ``post`` recorded."""
        if outcome not in OUTCOMES:
            raise ValueError(f"no such outcome: {outcome!r} (one of {', '.join(OUTCOMES)})")
        with self._writing():
            self.conn.execute(
                "UPDATE routine_runs SET state = ?, outcome = ?, finished_at = ?, detail = ?, conversation = ?, "
                "message_id = coalesce(?, message_id) WHERE id = ?",
                (DONE, outcome, time.time(), detail, conversation, message_id, run_id),
            )
            if self.conn.changes() == 0:
                raise ValueError(f"there is no run #{run_id}")
            return self._get_run(run_id)

    def skipped(self, routine: str, scheduled_at: float, detail: str) -> Run | None:
        """An occurrence not run (missed past its grace, the previous run still going): recorded done
        at once, so it is taken. None when it was taken already."""
        now = time.time()
        with self._writing():
            self.conn.execute(
                "INSERT OR IGNORE INTO routine_runs(routine, scheduled_at, started_at, finished_at, state, outcome, late, detail) "
                "VALUES (?, ?, ?, ?, ?, 'skipped', 1, ?)",
                (routine, scheduled_at, now, now, DONE, detail),
            )
            if self.conn.changes() == 0:
                return None
            return self._get_run(self.conn.last_insert_rowid())

    def interrupted(self) -> list[Run]:
        """At start: the runs a kill left running are done, interrupted (and returned, to be told)."""
        with self._writing():
            ids = [row[0] for row in self.conn.execute("SELECT id FROM routine_runs WHERE state = ? ORDER BY id", (RUNNING,))]
            self.conn.execute(
                "UPDATE routine_runs SET state = ?, outcome = 'interrupted', finished_at = ?, "
                "detail = 'tarsd stopped while it ran' WHERE state = ?",
                (DONE, time.time(), RUNNING),
            )
            return [self._get_run(run_id) for run_id in ids]

    def last_scheduled(self, routine: str) -> float | None:
        """The latest occurrence of ``routine`` taken, whatever became of it."""
        rows = self._rows("SELECT max(scheduled_at) FROM routine_runs WHERE routine = ?", (routine,))
        return rows[0][0] if rows else None

    def last_scheduled_all(self) -> dict[str, float]:
        """``last_scheduled`` of every routine that has run, in one query (the clock's re-arming)."""
        return dict(self._rows("SELECT routine, max(scheduled_at) FROM routine_runs GROUP BY routine"))

    def run_for(self, routine: str, scheduled_at: float) -> Run | None:
        """The run of one occurrence: what fire() finishes (the clock claimed it just before calling fire)."""
        rows = self._rows(f"SELECT {_RUN_COLUMNS} FROM routine_runs WHERE routine = ? AND scheduled_at = ?", (routine, scheduled_at))
        return _run(rows[0]) if rows else None

    def last_run(self, routine: str) -> Run | None:
        runs = self.runs(routine, limit=1)
        return runs[0] if runs else None

    def runs(self, routine: str = "", limit: int = 20) -> list[Run]:
        """Newest first (by when they started); ``routine`` "" for all. One routine's come from the
        index on (routine, started_at): a routine that ran every minute for a year is no slower."""
        if routine:
            rows = self._rows(
                f"SELECT {_RUN_COLUMNS} FROM routine_runs WHERE routine = ? ORDER BY started_at DESC, id DESC LIMIT ?", (routine, limit)
            )
        else:
            rows = self._rows(f"SELECT {_RUN_COLUMNS} FROM routine_runs ORDER BY id DESC LIMIT ?", (limit,))
        return [_run(row) for row in rows]

    def latest_outcomes(self, routines: list[str]) -> dict[str, Run]:
        """Each routine's latest finished run that was not skipped (what status shows: a failure
        that a later run made good is no longer news), by name: one statement, an index lookup each."""
        return self._latest_each(routines, "AND state = 'done' AND outcome != 'skipped'")

    def last_runs(self, routines: list[str]) -> dict[str, Run]:
        """``last_run`` of each routine that has run, by name: one statement, an index lookup each
        (a listing of 10,000 routines is not 10,000 round trips)."""
        return self._latest_each(routines, "")

    def _latest_each(self, routines: list[str], condition: str) -> dict[str, Run]:
        sql = (
            f"SELECT {_RUN_COLUMNS} FROM routine_runs WHERE id IN (SELECT (SELECT id FROM routine_runs "
            f"WHERE routine = names.value {condition} ORDER BY started_at DESC, id DESC LIMIT 1) FROM json_each(?) AS names)"
        )
        rows = self._rows(sql, (json.dumps(list(dict.fromkeys(routines))),))
        return {run.routine: run for run in map(_run, rows)}

    def runs_today(self, routines: list[str], since: float) -> dict[str, int]:
        """``runs_since`` of each routine, by name, in one statement."""
        sql = (
            "SELECT names.value, (SELECT count(*) FROM routine_runs WHERE routine = names.value AND started_at >= ? "
            f"AND outcome NOT IN {_NOT_RUN!r}) FROM json_each(?) AS names"
        )
        return dict(self._rows(sql, (since, json.dumps(list(dict.fromkeys(routines))))))

    def runs_since(self, routine: str, since: float) -> int:
        """Runs of ``routine`` started at or after ``since`` that were claimed to run (not skipped
        nor stopped by a limit): a run just claimed counts itself."""
        rows = self._rows(
            f"SELECT count(*) FROM routine_runs WHERE routine = ? AND started_at >= ? AND outcome NOT IN {_NOT_RUN!r}",
            (routine, since),
        )
        return rows[0][0]

    def forget_routine(self, routine: str) -> None:
        """A routine removed: its runs stay as history (and keep its occurrences taken, should a
        routine of the same name come back)."""

    # The inbox

    def post(self, source: str, title: str, text: str, targets: list[str], claim_run: int | None = None) -> InboxItem:
        """A message in the inbox, a pending delivery for each target but the inbox, and the run
        that made it pointing at it, in one transaction."""
        now = time.time()
        with self._writing():
            self.conn.execute(
                "INSERT INTO inbox(created_at, source, title, text, read) VALUES (?, ?, ?, ?, 0)",
                (now, source, title, text),
            )
            message_id = self.conn.last_insert_rowid()
            for target in dict.fromkeys(targets):  # each target once, in the order given
                if target != INBOX:
                    self.conn.execute(
                        "INSERT INTO deliveries(message_id, target, state, attempts, next_attempt_at) VALUES (?, ?, ?, 0, ?)",
                        (message_id, target, PENDING, now),
                    )
            if claim_run is not None:
                self.conn.execute("UPDATE routine_runs SET message_id = ? WHERE id = ?", (message_id, claim_run))
            return self._items(self.conn.execute(f"SELECT {_INBOX_COLUMNS} FROM inbox WHERE id = ?", (message_id,)).fetchall())[0]

    def _items(self, rows: list[tuple]) -> list[InboxItem]:
        ids = [row[0] for row in rows]
        by_message: dict[int, list[DeliveryState]] = {}
        if ids:
            marks = ",".join("?" * len(ids))
            for row in self.conn.execute(f"SELECT {_DELIVERY_COLUMNS} FROM deliveries WHERE message_id IN ({marks}) ORDER BY id", ids):
                by_message.setdefault(row[1], []).append(DeliveryState(*row))
        return [
            InboxItem(id, created_at, source, title, text, bool(read), tuple(by_message.get(id, ())))
            for id, created_at, source, title, text, read in rows
        ]

    def inbox(self, limit: int = 50, unread_only: bool = False) -> list[InboxItem]:
        """Newest first."""
        where = "WHERE read = 0" if unread_only else ""
        with self.lock:
            rows = self.conn.execute(f"SELECT {_INBOX_COLUMNS} FROM inbox {where} ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
            return self._items(rows)

    def unread(self) -> int:
        return self._rows("SELECT count(*) FROM inbox WHERE read = 0")[0][0]

    def mark_read(self, ids: list[int] | None) -> int:
        """Mark messages read (None: all of them); how many were unread."""
        with self._writing():
            if ids is None:
                self.conn.execute("UPDATE inbox SET read = 1 WHERE read = 0")
                return self.conn.changes()
            marked = 0
            for message_id in dict.fromkeys(ids):
                self.conn.execute("UPDATE inbox SET read = 1 WHERE id = ? AND read = 0", (message_id,))
                marked += self.conn.changes()
            return marked

    # Deliveries

    def due_deliveries(self, now: float) -> list[DeliveryState]:
        rows = self._rows(
            f"SELECT {_DELIVERY_COLUMNS} FROM deliveries WHERE state = ? AND next_attempt_at <= ? ORDER BY next_attempt_at, id",
            (PENDING, now),
        )
        return [DeliveryState(*row) for row in rows]

    def next_delivery_at(self) -> float | None:
        return self._rows("SELECT min(next_attempt_at) FROM deliveries WHERE state = ?", (PENDING,))[0][0]

    def delivered(self, delivery_id: int) -> None:
        with self._writing():
            self.conn.execute(
                "UPDATE deliveries SET state = ?, attempts = attempts + 1, sent_at = ?, next_attempt_at = NULL, last_error = '' "
                "WHERE id = ?",
                (SENT, time.time(), delivery_id),
            )

    def delivery_failed(self, delivery_id: int, error: str, retry_at: float | None) -> None:
        """An attempt failed: tried again at ``retry_at``, or given up (None): the message stays in the inbox."""
        with self._writing():
            if retry_at is None:
                self.conn.execute(
                    "UPDATE deliveries SET state = ?, attempts = attempts + 1, last_error = ?, next_attempt_at = NULL WHERE id = ?",
                    (FAILED, error, delivery_id),
                )
            else:
                self.conn.execute(
                    "UPDATE deliveries SET attempts = attempts + 1, last_error = ?, next_attempt_at = ? WHERE id = ?",
                    (error, retry_at, delivery_id),
                )

    def delivery_counts(self) -> dict[str, int]:
        """Deliveries by state (pending, sent, failed), for status."""
        return dict(self._rows("SELECT state, count(*) FROM deliveries GROUP BY state"))

    def failed_deliveries(self, limit: int = 5) -> list[DeliveryState]:
        """The newest deliveries given up (their messages are in the inbox)."""
        rows = self._rows(f"SELECT {_DELIVERY_COLUMNS} FROM deliveries WHERE state = ? ORDER BY id DESC LIMIT ?", (FAILED, limit))
        return [DeliveryState(*row) for row in rows]

    def failing_targets(self, look_back: int = 20) -> list[DeliveryState]:
        """For status: of the newest deliveries given up, the newest of each target that nothing
        was delivered to since (a target that works again is no longer news); each target once."""
        found: dict[str, DeliveryState] = {}
        with self.lock:
            rows = self.conn.execute(
                f"SELECT {_DELIVERY_COLUMNS} FROM deliveries WHERE state = ? ORDER BY id DESC LIMIT ?", (FAILED, look_back)
            ).fetchall()
            for row in rows:
                delivery = DeliveryState(*row)
                kind = delivery.target.split(":", 1)[0]  # every note is one target: note:PATH#HEADING
                if kind in found:
                    continue
                later = self.conn.execute(
                    "SELECT 1 FROM deliveries WHERE id > ? AND state = ? AND (target = ? OR target LIKE ?) LIMIT 1",
                    (delivery.id, SENT, kind, kind + ":%"),
                ).fetchall()
                if not later:
                    found[kind] = delivery
        return list(found.values())

    def last_posted(self, source: str) -> float | None:
        """When a message of ``source`` was last put in the inbox (a scan: asked once per routine and
        tarsd process, to rate-limit notices across restarts)."""
        return self._rows("SELECT max(created_at) FROM inbox WHERE source = ?", (source,))[0][0]

    def delivery(self, delivery_id: int) -> DeliveryState | None:
        rows = self._rows(f"SELECT {_DELIVERY_COLUMNS} FROM deliveries WHERE id = ?", (delivery_id,))
        return DeliveryState(*rows[0]) if rows else None

    def message(self, message_id: int) -> InboxItem | None:
        with self.lock:
            items = self._items(self.conn.execute(f"SELECT {_INBOX_COLUMNS} FROM inbox WHERE id = ?", (message_id,)).fetchall())
        return items[0] if items else None
