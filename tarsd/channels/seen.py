"""The messages a channel has taken in, kept a day in the index database (schema version 6): a
delivery of a message already taken in is not answered again (Meta delivers again when it saw no
200 in time, and may deliver twice at once), across a restart too; and a message taken in but
never answered (tarsd was killed meanwhile) is found at the next start, so its sender can be told.

The id is written before the webhook answers 200: once Meta has its 200 it never delivers the
message again, so what is not written by then would be lost without a trace.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from tarsd.store.database import Store

KEEP_SECONDS = 24 * 3600.0  # a message id is remembered this long
PRUNE_EVERY_SECONDS = 600.0
PREVIEW_CHARS = 60

RECEIVED, ANSWERED, NOTIFIED = "received", "answered", "notified"


@dataclass(frozen=True, slots=True)
class Unanswered:
    message_id: str
    sender: str
    preview: str
    received_at: float


class SeenMessages:
    """On a connection of its own (as the conversations): each write is committed at once."""

    def __init__(self, store: Store):
        self.conn = store.writer_connection()
        self.lock = threading.Lock()
        self._pruned_at = float("-inf")

    def take(self, channel: str, message_id: str, sender: str, preview: str = "", now: float | None = None) -> bool:
        """True the first time ``message_id`` is seen (within a day), False for every later delivery.
        Two deliveries at once: the database lets exactly one of them in."""
        now = time.time() if now is None else now
        with self.lock, self.conn:
            if now - self._pruned_at > PRUNE_EVERY_SECONDS:
                self._pruned_at = now
                self.conn.execute("DELETE FROM channel_messages WHERE received_at < ?", (now - KEEP_SECONDS,))
            shown = preview[:PREVIEW_CHARS] + ("…" if len(preview) > PREVIEW_CHARS else "")
            self.conn.execute(
                """INSERT OR IGNORE INTO channel_messages(channel, message_id, sender, received_at, state, preview)
                   VALUES (?, ?, ?, ?, ?, ?)""",
                (channel, message_id, sender, now, RECEIVED, shown),
            )
            return self.conn.changes() == 1

    def mark(self, channel: str, message_id: str, state: str) -> None:
        with self.lock, self.conn:
            self.conn.execute("UPDATE channel_messages SET state = ? WHERE channel = ? AND message_id = ?", (state, channel, message_id))

    def unanswered(self, channel: str, before: float) -> list[Unanswered]:
        """Messages taken in before ``before`` (this start) and within the day, never answered."""
        with self.lock:
            rows = self.conn.execute(
                """SELECT message_id, sender, preview, received_at FROM channel_messages
                   WHERE channel = ? AND state = ? AND received_at < ? AND received_at >= ? ORDER BY received_at""",
                (channel, RECEIVED, before, before - KEEP_SECONDS),
            ).fetchall()
        return [Unanswered(*row) for row in rows]

    def last_senders(self, channel: str, now: float | None = None) -> list[tuple[str, float]]:
        """Each sender who wrote within the day (a message, a tap) and when they last did, the most
        recent first: whom a message tars starts goes to, and whether their reply window is open."""
        now = time.time() if now is None else now
        with self.lock:
            rows = self.conn.execute(
                """SELECT sender, MAX(received_at) AS last FROM channel_messages
                   WHERE channel = ? AND received_at >= ? GROUP BY sender ORDER BY last DESC, sender""",
                (channel, now - KEEP_SECONDS),
            ).fetchall()
        return [(sender, at) for sender, at in rows]
