"""Rules the model proposed during a chat, waiting for the user's yes or no.

A procedural rule changes how tars treats every later message, so the model may only propose
one (memory_remember with kind procedural): it is kept here, in the index database (schema
version 5), and is not in Procedural.md, not in any prompt and not in search results until the
user approves it (``tarsctl rules``, ``GET/POST /rules/pending`` over HTTP, the web page).
Approving writes it into Procedural.md as the user's rule; rejecting drops it.

The database rather than a file in the vault: a file there would be indexed, searched and
synced like a note, and a note is exactly what a proposal must not become. Deleting the
index loses the proposals that are still waiting, nothing else.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from tarsd.memory.facts import key
from tarsd.store.database import Store


@dataclass(frozen=True, slots=True)
class PendingRule:
    id: int
    rule: str
    conversation: str = ""
    proposed_at: float = 0.0


class PendingRules:
    """On a connection of its own (as the conversations): committed at once, never part of an
    indexing batch."""

    def __init__(self, store: Store):
        self.conn = store.writer_connection()
        self.lock = threading.Lock()

    def propose(self, rule: str, conversation: str = "") -> tuple[PendingRule, bool]:
        """(the proposal, True if new); a rule that reads the same as one waiting is that one."""
        with self.lock, self.conn:
            self.conn.execute(
                "INSERT OR IGNORE INTO pending_rules(rule, rule_key, conversation, proposed_at) VALUES (?, ?, ?, ?)",
                (rule, key(rule), conversation, time.time()),
            )
            new = self.conn.changes() > 0
            row = self.conn.execute(
                "SELECT id, rule, conversation, proposed_at FROM pending_rules WHERE rule_key = ?", (key(rule),)
            ).fetchall()[0]
        return PendingRule(*row), new

    def list(self) -> list[PendingRule]:
        with self.lock:
            rows = self.conn.execute("SELECT id, rule, conversation, proposed_at FROM pending_rules ORDER BY id").fetchall()
        return [PendingRule(*row) for row in rows]

    def get(self, rule_id: int) -> PendingRule | None:
        with self.lock:
            rows = self.conn.execute("SELECT id, rule, conversation, proposed_at FROM pending_rules WHERE id = ?", (rule_id,)).fetchall()
        return PendingRule(*rows[0]) if rows else None

    def drop(self, rule_id: int) -> None:
        with self.lock, self.conn:
            self.conn.execute("DELETE FROM pending_rules WHERE id = ?", (rule_id,))
