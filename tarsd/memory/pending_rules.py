"""What a model proposed, waiting for the user's yes or no: rules, and changes to the user's lines.

A procedural rule changes how tars treats every later message, and a line the user wrote is the
user's word: so a model (the chat's memory tools, an MCP client) may only *propose* a rule, or a
change to a line it did not write (replace it, remove it). Each proposal is kept here, in the
index database, and changes nothing until the user approves it (``tarsctl rules``,
``GET/POST /rules/pending`` over HTTP, the web page). Approving applies it as the user's;
rejecting drops it.

A decision cannot be confused or half made:

- ids are never reused (AUTOINCREMENT), and a decision may name the text the user saw
  (DecideRule.rule): a card left open on the page can never approve another proposal;
- a decision is claimed in one transaction (pending -> approving, or deleted for a reject), so an
  approve and a reject sent at once cannot both win: the second is told it was decided already;
- an approval is applied to the memory file, then the row goes. tarsd killed in between leaves the
  row "approving": the next start finishes it (``unfinished``), so a proposal ends either applied
  and gone, or still pending and not applied. A rule applied again changes nothing; for a remove
  or a replace, the row holds how many lines read as the line it changes, counted just before
  the write (``counted``): fewer now, and the change was written already (applying it again
  would change a second line that reads the same).

The database rather than a file in the vault: a file there would be indexed, searched and synced
like a note, and a note is exactly what a proposal must not become. Deleting the index loses the
proposals that are still waiting, nothing else.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass

from tarsd.memory.facts import key
from tarsd.memory.text import UnsafeMemoryText
from tarsd.store.connection import writing_first
from tarsd.store.database import Store

RULE, REPLACE, REMOVE = "rule", "replace", "remove"
ROUTINE = "routine"  # a routine the model proposed: its text is the TOML table it becomes in the routines file
ACTIONS = (RULE, REPLACE, REMOVE, ROUTINE)
PENDING, APPROVING = "pending", "approving"

_COLUMNS = "id, text, conversation, proposed_at, action, kind, target, lines_before"
# Proposals waiting at once: past this, a model or an AI tool proposing without end (a rule each,
# a change to every line) is refused, and the user's list stays one a person can go through.
MAX_WAITING = 100


@dataclass(frozen=True, slots=True)
class PendingRule:
    id: int
    rule: str  # the rule; replace: the line's new text; remove: the line to remove
    conversation: str = ""
    proposed_at: float = 0.0
    action: str = RULE
    kind: str = "procedural"  # the memory file it changes: semantic | procedural; "routine": the routines file
    target: str = ""  # replace: the line it replaces, as it read when proposed
    # remove, replace being approved: the lines reading as the one it changes, just before the
    # write (None: not counted, so not written either)
    lines_before: int | None = None

    def describe(self) -> str:
        if self.action == REPLACE:
            return f"replace {self.target!r} with {self.rule!r}"
        if self.action == REMOVE:
            return f"remove {self.rule!r}"
        if self.action == ROUTINE:
            return f"add the routine {self.rule!r}"
        return f"add the rule {self.rule!r}"


class AlreadyDecided(UnsafeMemoryText):
    """The proposal was decided (or is being decided) by another answer; the hint says where to look."""


class PendingRules:
    """On a connection of its own (as the conversations): committed at once, never part of an
    indexing batch."""

    def __init__(self, store: Store):
        self.conn = store.writer_connection()
        self.lock = threading.Lock()

    def _writing(self) -> contextlib.AbstractContextManager[None]:
        """A transaction that takes the write lock first (tarsd/store/connection.py writing_first)."""
        return writing_first(self.conn, self.lock)

    def propose(
        self, rule: str, conversation: str = "", action: str = RULE, kind: str = "procedural", target: str = ""
    ) -> tuple[PendingRule, bool]:
        """(the proposal, True if new); one that reads the same as one waiting is that one."""
        if action not in ACTIONS:
            raise ValueError(f"no such proposal: {action!r}")
        same = f"{action}|{kind}|{key(target)}|{key(rule)}"
        with self._writing():
            known = self.conn.execute("SELECT 1 FROM proposals WHERE proposal_key = ?", (same,)).fetchall()
            waiting = self.conn.execute("SELECT count(*) FROM proposals").fetchall()[0][0]
            if not known and waiting >= MAX_WAITING:
                raise UnsafeMemoryText(
                    f"{waiting} proposals wait for the user's decision already: no more are taken until some are decided",
                    "tell the user what you would propose; they decide those waiting with `tarsctl rules` or on the web page",
                )
            self.conn.execute(
                "INSERT OR IGNORE INTO proposals(action, kind, text, target, proposal_key, conversation, proposed_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (action, kind, rule, target, same, conversation, time.time()),
            )
            new = self.conn.changes() > 0
            row = self.conn.execute(f"SELECT {_COLUMNS} FROM proposals WHERE proposal_key = ?", (same,)).fetchall()[0]
        return PendingRule(*row), new

    def list(self) -> list[PendingRule]:
        """The proposals waiting for the user, oldest first."""
        with self.lock:
            rows = self.conn.execute(f"SELECT {_COLUMNS} FROM proposals WHERE state = ? ORDER BY id", (PENDING,)).fetchall()
        return [PendingRule(*row) for row in rows]

    def claim(self, rule_id: int, approve: bool, seen_text: str = "") -> PendingRule:
        """Take the decision on proposal ``rule_id``, in one transaction: a reject drops it, an
        approve marks it being applied (``finish`` drops it once applied, ``reopen`` gives it back).
        ``seen_text``, when given, must be the proposal's text. Raises AlreadyDecided when another
        answer got there first, ValueError when there is no such proposal or it says something else."""
        with self._writing():
            rows = self.conn.execute(f"SELECT {_COLUMNS}, state FROM proposals WHERE id = ?", (rule_id,)).fetchall()
            if not rows:
                raise AlreadyDecided(
                    f"there is no proposal #{rule_id} waiting: it was approved or rejected already",
                    "`tarsctl rules` lists those waiting",
                )
            *fields, state = rows[0]
            proposal = PendingRule(*fields)
            if seen_text and seen_text != proposal.rule:
                raise UnsafeMemoryText(
                    f"proposal #{rule_id} says {proposal.rule!r}, not {seen_text!r}: nothing was decided",
                    "list the proposals again (`tarsctl rules`, or reload the page) and decide what they say now",
                )
            if state != PENDING:
                raise AlreadyDecided(f"proposal #{rule_id} is being approved already", "`tarsctl rules` shows what is still waiting")
            if approve:
                self.conn.execute("UPDATE proposals SET state = ? WHERE id = ? AND state = ?", (APPROVING, rule_id, PENDING))
            else:
                self.conn.execute("DELETE FROM proposals WHERE id = ? AND state = ?", (rule_id, PENDING))
        return proposal

    def finish(self, rule_id: int) -> None:
        """An approved proposal is applied: it leaves the table."""
        with self._writing():
            self.conn.execute("DELETE FROM proposals WHERE id = ?", (rule_id,))

    def counted(self, rule_id: int, lines: int) -> None:
        """An approved remove or replace is about to be written: ``lines`` of the file read as the
        line it changes (a start that finds the row still approving compares)."""
        with self._writing():
            self.conn.execute("UPDATE proposals SET lines_before = ? WHERE id = ? AND state = ?", (lines, rule_id, APPROVING))

    def close(self, rule_id: int) -> bool:
        """A proposal the vault shows done already (approved on another machine of a synced vault, or
        made by hand: tarsd/memory/settled.py) leaves the list without being applied. False when it is
        not waiting any more (decided meanwhile)."""
        with self._writing():
            self.conn.execute("DELETE FROM proposals WHERE id = ? AND state = ?", (rule_id, PENDING))
            return self.conn.changes() > 0

    def reopen(self, rule_id: int) -> None:
        """Applying an approved proposal failed (the disk, the line gone): it waits again."""
        with self._writing():
            self.conn.execute("UPDATE proposals SET state = ?, lines_before = NULL WHERE id = ?", (PENDING, rule_id))

    def unfinished(self) -> list[PendingRule]:
        """Approvals that tarsd stopped in the middle of (killed between the write and the delete)."""
        with self.lock:
            rows = self.conn.execute(f"SELECT {_COLUMNS} FROM proposals WHERE state = ? ORDER BY id", (APPROVING,)).fetchall()
        return [PendingRule(*row) for row in rows]
