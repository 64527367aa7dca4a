"""Where the Telegram channel's long polling goes on from: the next update id to ask for, kept in
the index database's ``meta`` table under the bot's id (a new bot starts from its own first update).

Telegram forgets an update once tars asks for a later offset, so the offset is written after each
update is taken in (recorded by ``SeenMessages``) and before the next poll: a restart neither asks
for an update again that was answered (and were it asked again, its id is in ``SeenMessages``)
nor skips one that was not. Deleting the database loses nothing either: Telegram has dropped the
updates before the offset, and keeps the ones after it.
"""

from __future__ import annotations

import threading

from tarsd.store.database import Store

KEY = "telegram_offset:"  # + the bot's numeric id (the part of its token before the colon)


class UpdateOffset:
    """On a connection of its own (as the channel's message ids): each write committed at once."""

    def __init__(self, store: Store):
        self.conn = store.writer_connection()
        self.lock = threading.Lock()

    def get(self, bot_id: str) -> int:
        """The next update id to ask for; 0 (Telegram's "from the oldest unconfirmed") when none is kept."""
        with self.lock:
            rows = self.conn.execute("SELECT value FROM meta WHERE key = ?", (KEY + bot_id,)).fetchall()
        try:
            return int(rows[0][0]) if rows else 0
        except ValueError:
            return 0

    def set(self, bot_id: str, offset: int) -> None:
        with self.lock, self.conn:
            self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (KEY + bot_id, str(offset)))
