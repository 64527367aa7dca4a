"""Where the Telegram channel's long polling goes on from: the next update id to ask for, kept in
the index database's ``meta`` table under the bot's id (a new bot starts from its own first update),
with the time it was kept.

Telegram forgets an update once tars asks for a later offset, so the offset is written after each
update is taken in (recorded by ``SeenMessages``) and before the next poll: a restart neither asks
for an update again that was answered (and were it asked again, its id is in ``SeenMessages``)
nor skips one that was not. Deleting the database loses nothing either: Telegram has dropped the
updates before the offset, and keeps the ones after it.

An offset kept more than a day ago is not used: Telegram keeps an update at most 24 hours, so it
protects nothing then, and after a week without updates Telegram numbers the next one at random,
below the kept offset too, which an offset would confirm unread: Telegram would drop it, a real
message never answered. Asked without an offset, Telegram gives what it still holds, from its
oldest; an update seen already is in ``SeenMessages`` (kept a day, as long as Telegram keeps it).
"""

from __future__ import annotations

import threading
import time

from tarsd.store.database import Store

KEY = "telegram_offset:"  # + the bot's numeric id (the part of its token before the colon)
KEPT_AT_KEY = "telegram_offset_at:"  # + the bot's id: when the offset was kept (unix time)
TRUSTED_SECONDS = 24 * 3600.0  # how long Telegram keeps an update it has not handed out


class UpdateOffset:
    """On a connection of its own (as the channel's message ids): each write committed at once."""

    def __init__(self, store: Store):
        self.conn = store.writer_connection()
        self.lock = threading.Lock()

    def get(self, bot_id: str, now: float | None = None) -> int:
        """The next update id to ask for; 0 (Telegram's "from the oldest unconfirmed") when none is
        kept, or when it was kept more than a day ago (or at an unknown time)."""
        with self.lock:
            rows = dict(self.conn.execute("SELECT key, value FROM meta WHERE key IN (?, ?)", (KEY + bot_id, KEPT_AT_KEY + bot_id)))
        try:
            offset, kept_at = int(rows.get(KEY + bot_id, 0)), float(rows.get(KEPT_AT_KEY + bot_id, 0))
        except ValueError:
            return 0
        if now is None:
            now = time.time()
        return offset if 0 <= now - kept_at <= TRUSTED_SECONDS else 0

    def set(self, bot_id: str, offset: int, now: float | None = None) -> None:
        kept_at = time.time() if now is None else now
        with self.lock, self.conn:
            self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (KEY + bot_id, str(offset)))
            self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (KEPT_AT_KEY + bot_id, repr(kept_at)))
