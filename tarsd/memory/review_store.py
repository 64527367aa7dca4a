"""Where the memory review keeps what it proposed, what the user decided, what was applied (the
undo) and when it first saw each line: four tables of the index database (schema version 11).

A proposal is one change (remove these lines, add this one, move this section), keyed by what it
changes (``change_key``, UNIQUE): proposed once, it is never proposed again, whatever the user
decided (rejected, applied, undone), and a review that finds it again says so instead.

An approval is claimed first (pending -> approving, in one transaction: a second answer is told it
came too late), then the change is written to the journal (``memory_changes``, state writing, with
the file before and after), then to the file, then marked applied. tarsd killed anywhere in between
leaves rows that say how far it got; ``unfinished`` gives them to the next start, which finishes or
rolls back each (tarsd/memory/review_apply.py), so the file and the proposals always agree.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from tarsd.memory.text import UnsafeMemoryText
from tarsd.store.connection import writing_first
from tarsd.store.database import Store

PENDING, APPROVING, APPLIED, REJECTED, UNDONE, GONE = "pending", "approving", "applied", "rejected", "undone", "gone"
WRITING = "writing"
_LAST_LOOK = "memory_review_looked_at"  # meta: when the review last read Memory.md (observe)
_MACHINE = "memory_review_machine"  # meta: this index's name in the history notes
_MISSING = "memory_review_missing"  # meta: JSON, the lines no longer in Memory.md and since when (observe)
MISSING_GRACE = 3600.0  # seconds a line may be missing from Memory.md and keep its dates when it is back
_PROPOSAL_COLUMNS = "id, review_id, kind, body, why, source, proposed_at, state, change_id"
_CHANGE_COLUMNS = "id, applied_at, path, before, after, note_path, note_before, note_after, summary, state, recorded, undone_at"


class AlreadyDecided(UnsafeMemoryText):
    """The proposal was decided already (or is being decided); the hint says where to look."""


@dataclass(frozen=True, slots=True)
class Proposal:
    id: int
    review_id: int
    kind: str  # duplicate | supersede | expired | budget | missing
    body: dict  # remove: [{raw, text, line, section}], keep: {raw, text, line}, add: {text, section}, section, note
    why: str
    source: str
    proposed_at: float
    state: str = PENDING
    change_id: int | None = None

    @property
    def removes(self) -> list[dict]:
        return list(self.body.get("remove", []))

    @property
    def adds(self) -> dict | None:
        return self.body.get("add")


@dataclass(frozen=True, slots=True)
class Change:
    id: int
    applied_at: float
    path: str
    before: str
    after: str
    note_path: str
    note_before: str | None
    note_after: str | None
    summary: dict
    state: str
    recorded: bool
    undone_at: float | None


@dataclass(slots=True)
class NewProposal:
    kind: str
    key: str  # what it changes, for "never twice"
    body: dict
    why: str
    source: str
    removes: int = field(default=0)  # lines it takes out of the file (the cap counts them)


def line_key(text: str) -> str:
    """A line's identity for first-seen dates: its text as the judge reads it (facts.key), hashed."""
    from tarsd.memory.facts import key

    return hashlib.sha256(key(text).encode()).hexdigest()


class ReviewStore:
    """On a writer connection of its own, committed at once (never part of an indexing batch)."""

    def __init__(self, store: Store):
        self.conn = store.writer_connection()
        self.lock = threading.Lock()

    def _writing(self) -> contextlib.AbstractContextManager[None]:
        return writing_first(self.conn, self.lock)

    def _read(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self.lock:
            return self.conn.execute(sql, args).fetchall()

    # ---- reviews ----

    def start_review(self, source: str, lines: int) -> int:
        with self._writing():
            self.conn.execute("INSERT INTO memory_reviews(started_at, source, lines) VALUES (?, ?, ?)", (time.time(), source, lines))
            return self.conn.last_insert_rowid()

    def finish_review(self, review_id: int, proposed: int, left_out: str, sessions_until: float | None) -> None:
        with self._writing():
            self.conn.execute(
                "UPDATE memory_reviews SET finished_at = ?, proposed = ?, left_out = ?, sessions_until = ? WHERE id = ?",
                (time.time(), proposed, left_out, sessions_until, review_id),
            )

    def sessions_read_until(self) -> float | None:
        """Up to when the last review that read session logs read them."""
        rows = self._read("SELECT max(sessions_until) FROM memory_reviews WHERE sessions_until IS NOT NULL")
        return rows[0][0] if rows and rows[0][0] is not None else None

    # ---- proposals ----

    def known(self, keys: Iterable[str]) -> set[str]:
        """Of these change keys, those proposed before (in any state)."""
        keys = list(dict.fromkeys(keys))
        found: set[str] = set()
        for start in range(0, len(keys), 500):
            batch = keys[start : start + 500]
            marks = ",".join("?" * len(batch))
            found |= {row[0] for row in self._read(f"SELECT change_key FROM memory_proposals WHERE change_key IN ({marks})", tuple(batch))}
        return found

    def add(self, review_id: int, proposals: list[NewProposal]) -> list[Proposal]:
        """The new ones stored (a key known already is skipped), in order."""
        added = []
        now = time.time()
        with self._writing():
            for item in proposals:
                self.conn.execute(
                    "INSERT OR IGNORE INTO memory_proposals(review_id, kind, change_key, body, why, source, proposed_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (review_id, item.kind, item.key, json.dumps(item.body, ensure_ascii=False), item.why, item.source, now),
                )
                if self.conn.changes():
                    added.append(self.conn.last_insert_rowid())
        return self.get(added)

    def get(self, ids: Iterable[int]) -> list[Proposal]:
        ids = list(ids)
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = self._read(f"SELECT {_PROPOSAL_COLUMNS} FROM memory_proposals WHERE id IN ({marks}) ORDER BY id", tuple(ids))
        return [_proposal(row) for row in rows]

    def waiting(self) -> list[Proposal]:
        rows = self._read(f"SELECT {_PROPOSAL_COLUMNS} FROM memory_proposals WHERE state = ? ORDER BY id", (PENDING,))
        return [_proposal(row) for row in rows]

    def in_state(self, state: str) -> list[Proposal]:
        rows = self._read(f"SELECT {_PROPOSAL_COLUMNS} FROM memory_proposals WHERE state = ? ORDER BY id", (state,))
        return [_proposal(row) for row in rows]

    def claim(self, ids: list[int], approve: bool, seen: dict[int, str] | None = None, describe=None) -> list[Proposal]:
        """Take the decision on these proposals, in one transaction: a reject marks them rejected
        (remembered: never proposed again), an approve marks them being applied. ``seen``: the
        text the user was shown for each, which must still be what ``describe`` says of it."""
        seen = seen or {}
        with self._writing():
            marks = ",".join("?" * len(ids))
            rows = self.conn.execute(f"SELECT {_PROPOSAL_COLUMNS} FROM memory_proposals WHERE id IN ({marks})", tuple(ids)).fetchall()
            found = {row[0]: _proposal(row) for row in rows}
            for proposal_id in ids:
                proposal = found.get(proposal_id)
                if proposal is None:
                    raise ValueError(f"there is no memory proposal #{proposal_id}; `tarsctl memory proposals` lists those waiting")
                if proposal.state != PENDING:
                    raise AlreadyDecided(
                        f"memory proposal #{proposal_id} is {proposal.state} already: nothing was decided",
                        "`tarsctl memory proposals` lists those still waiting",
                    )
                if proposal_id in seen and describe is not None and seen[proposal_id] != describe(proposal):
                    raise UnsafeMemoryText(
                        f"memory proposal #{proposal_id} says {describe(proposal)!r}, not {seen[proposal_id]!r}: nothing was decided",
                        "list the proposals again and decide what they say now",
                    )
            state = APPROVING if approve else REJECTED
            self.conn.execute(
                f"UPDATE memory_proposals SET state = ?, decided_at = ? WHERE id IN ({marks}) AND state = ?",
                (state, time.time(), *ids, PENDING),
            )
        return [found[i] for i in ids]

    def set_state(self, ids: Iterable[int], state: str, only_from: str | None = None) -> None:
        ids = list(ids)
        if not ids:
            return
        marks = ",".join("?" * len(ids))
        with self._writing():
            if only_from is None:
                self.conn.execute(f"UPDATE memory_proposals SET state = ? WHERE id IN ({marks})", (state, *ids))
            else:
                self.conn.execute(f"UPDATE memory_proposals SET state = ? WHERE id IN ({marks}) AND state = ?", (state, *ids, only_from))

    # ---- the journal of applied changes (the undo) ----

    def begin_change(
        self,
        path: str,
        before: str,
        after: str,
        summary: dict,
        proposal_ids: list[int],
        note: tuple[str, str | None, str | None] = ("", None, None),
    ) -> int:
        """Written before the file: a change about to be applied (state writing)."""
        with self._writing():
            self.conn.execute(
                "INSERT INTO memory_changes(applied_at, path, before, after, note_path, note_before, note_after, summary) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (time.time(), path, before, after, note[0], note[1], note[2], json.dumps(summary, ensure_ascii=False)),
            )
            change_id = self.conn.last_insert_rowid()
            marks = ",".join("?" * len(proposal_ids))
            if proposal_ids:
                self.conn.execute(f"UPDATE memory_proposals SET change_id = ? WHERE id IN ({marks})", (change_id, *proposal_ids))
        return change_id

    def written(self, change_id: int, before: str, after: str, note_before: str | None = None, note_after: str | None = None) -> None:
        """The file holds the change: the change and its proposals are applied, in one transaction."""
        with self._writing():
            self.conn.execute(
                "UPDATE memory_changes SET state = ?, before = ?, after = ?, note_before = coalesce(?, note_before), "
                "note_after = coalesce(?, note_after), applied_at = ? WHERE id = ?",
                (APPLIED, before, after, note_before, note_after, time.time(), change_id),
            )
            self.conn.execute("UPDATE memory_proposals SET state = ? WHERE change_id = ? AND state = ?", (APPLIED, change_id, APPROVING))

    def dropped(self, change_id: int) -> None:
        """A change that never reached the file: gone, its proposals wait again."""
        with self._writing():
            self.conn.execute(
                "UPDATE memory_proposals SET state = ?, change_id = NULL WHERE change_id = ? AND state = ?", (PENDING, change_id, APPROVING)
            )
            self.conn.execute("DELETE FROM memory_changes WHERE id = ?", (change_id,))

    def recorded(self, change_id: int) -> None:
        with self._writing():
            self.conn.execute("UPDATE memory_changes SET recorded = 1 WHERE id = ?", (change_id,))

    def undone(self, change_id: int) -> None:
        with self._writing():
            self.conn.execute(
                "UPDATE memory_changes SET state = ?, undone_at = ?, recorded = 0 WHERE id = ?", (UNDONE, time.time(), change_id)
            )
            self.conn.execute("UPDATE memory_proposals SET state = ? WHERE change_id = ?", (UNDONE, change_id))

    def change(self, change_id: int) -> Change | None:
        rows = self._read(f"SELECT {_CHANGE_COLUMNS} FROM memory_changes WHERE id = ?", (change_id,))
        return _change(rows[0]) if rows else None

    def last_applied(self) -> Change | None:
        rows = self._read(f"SELECT {_CHANGE_COLUMNS} FROM memory_changes WHERE state = ? ORDER BY id DESC LIMIT 1", (APPLIED,))
        return _change(rows[0]) if rows else None

    def changes(self, states: tuple[str, ...]) -> list[Change]:
        marks = ",".join("?" * len(states))
        rows = self._read(f"SELECT {_CHANGE_COLUMNS} FROM memory_changes WHERE state IN ({marks}) ORDER BY id", states)
        return [_change(row) for row in rows]

    def unrecorded(self) -> list[Change]:
        """Changes applied or undone whose entry in the history note is not written yet."""
        rows = self._read(
            f"SELECT {_CHANGE_COLUMNS} FROM memory_changes WHERE state IN (?, ?) AND recorded = 0 ORDER BY id", (APPLIED, UNDONE)
        )
        return [_change(row) for row in rows]

    def orphans(self) -> list[Proposal]:
        """Approvals claimed but never written to the journal (tarsd stopped right after the claim)."""
        rows = self._read(
            f"SELECT {_PROPOSAL_COLUMNS} FROM memory_proposals WHERE state = ? AND change_id IS NULL ORDER BY id", (APPROVING,)
        )
        return [_proposal(row) for row in rows]

    def proposals_of(self, change_id: int) -> list[Proposal]:
        rows = self._read(f"SELECT {_PROPOSAL_COLUMNS} FROM memory_proposals WHERE change_id = ? ORDER BY id", (change_id,))
        return [_proposal(row) for row in rows]

    def machine(self) -> str:
        """This index's name in the history notes, random, made once: change numbers are each index's own."""
        with self._writing():
            rows = self.conn.execute("SELECT value FROM meta WHERE key = ?", (_MACHINE,)).fetchall()
            if rows:
                return rows[0][0]
            name = secrets.token_hex(4)
            self.conn.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (_MACHINE, name))
            return name

    # ---- when each line was first seen ----

    def observe(self, keys: Iterable[str], now: float | None = None) -> None:
        """Record the lines seen now: a line new since the last look was written between the two.
        A line no longer in the file is forgotten once it has been missing MISSING_GRACE (a line back
        after that is new again, written after the look that missed it); back sooner, it keeps its
        dates: it was moved (cut, then pasted), or a save caught the file half edited, and a moved
        line taken for a new one would look newer than the lines it is older than."""
        keys = list(dict.fromkeys(keys))
        when = time.time() if now is None else now
        with self._writing():
            last = self._meta(_LAST_LOOK)
            last = float(last) if last is not None else None
            missing: dict[str, float] = json.loads(self._meta(_MISSING) or "{}")
            self.conn.execute("CREATE TEMP TABLE IF NOT EXISTS memory_lines_now(line_key TEXT PRIMARY KEY)")
            self.conn.execute("DELETE FROM memory_lines_now")
            self.conn.executemany("INSERT OR IGNORE INTO memory_lines_now(line_key) VALUES (?)", [(k,) for k in keys])
            for key in [k for k in keys if k in missing]:
                if when - missing.pop(key) > MISSING_GRACE:  # gone long enough to be written again
                    self.conn.execute("UPDATE memory_lines_seen SET first_seen = ?, absent_at = ? WHERE line_key = ?", (when, last, key))
            self.conn.execute(
                "INSERT OR IGNORE INTO memory_lines_seen(line_key, first_seen, absent_at) SELECT line_key, ?, ? FROM memory_lines_now",
                (when, last),
            )
            gone = self.conn.execute("SELECT line_key FROM memory_lines_seen WHERE line_key NOT IN (SELECT line_key FROM memory_lines_now)")
            for (key,) in gone.fetchall():
                missing.setdefault(key, when)
            forgotten = [key for key, since in missing.items() if when - since > MISSING_GRACE]
            self.conn.executemany("DELETE FROM memory_lines_seen WHERE line_key = ?", [(key,) for key in forgotten])
            for key in forgotten:
                del missing[key]
            self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (_MISSING, json.dumps(missing)))
            self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (_LAST_LOOK, repr(when)))

    def _meta(self, key: str) -> str | None:
        rows = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchall()
        return rows[0][0] if rows else None

    def seen(self) -> dict[str, tuple[float, float | None]]:
        """Each line's (first seen, last seen missing: None when the first look found it already)."""
        rows = self._read("SELECT line_key, first_seen, absent_at FROM memory_lines_seen")
        return {key: (first, absent) for key, first, absent in rows}


def _proposal(row: tuple) -> Proposal:
    pid, review_id, kind, body, why, source, proposed_at, state, change_id = row
    return Proposal(pid, review_id, kind, json.loads(body), why, source, proposed_at, state, change_id)


def _change(row: tuple) -> Change:
    cid, applied_at, path, before, after, note_path, note_before, note_after, summary, state, recorded, undone_at = row
    return Change(
        cid,
        applied_at,
        path,
        before,
        after,
        note_path,
        note_before,
        note_after,
        json.loads(summary or "{}"),
        state,
        bool(recorded),
        undone_at,
    )
