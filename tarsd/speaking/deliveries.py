"""Delivering what routines and reminders say: every message is in the inbox (the web page's, and
`tarsctl inbox`) from the moment it is made, in the same transaction as its deliveries to the
routine's other targets; each of those is tried at once and, when it fails, again later, so a
message is never lost: a channel that is down gets it when it is back, and one that never comes
back leaves it in the inbox, its delivery marked failed with the reason (status shows it).

One timer for the earliest retry, never a poll: an idle tarsd wakes for a delivery only when one is due.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from tarsd.config.settings import RoutinesConfig
from tarsd.routines.book import CHANNEL_TARGETS
from tarsd.routines.ledger import DeliveryState, InboxItem, Ledger
from tarsd.speaking.vault_note import NoteTargetError, append_to_note, entry, note_path

if TYPE_CHECKING:  # the channels are loaded only when one is enabled (tests/serve/test_http.py checks it)
    from tarsd.channels.relay import Relay

log = logging.getLogger(__name__)

# A notice of a failure (a run failed, a delivery given up) is posted at most this often per routine:
# a routine every 15 minutes with the model down tells the user once an hour, not 96 times a day.
NOTICE_EVERY_SECONDS = 3600.0
NOTICE_CHARS = 400  # of what went wrong, in a notice
NOTICE_PREFIX = "notice:"  # the source of a notice: notice:ROUTINE (a notice's own failure makes no notice)
# Seconds before each retry of a failed delivery; after the last, the delivery is given up (the
# message stays in the inbox). About a day in all: a phone off for a night still gets it.
RETRY_SECONDS = (2.0, 30.0, 120.0, 600.0, 1800.0, 3600.0, 3600.0, 7200.0, 7200.0, 14400.0, 14400.0, 28800.0, 28800.0)


class DeliveryFailed(Exception):
    """A delivery that did not go through (the message says why and what to do); tried again later."""


class Deliveries:
    def __init__(
        self,
        ledger: Ledger,
        relays: Callable[[], Mapping[str, Relay]],
        vault: Path,
        config: RoutinesConfig,
        tz: ZoneInfo,
        retry_seconds: tuple[float, ...] = RETRY_SECONDS,
    ):
        self.ledger = ledger
        self.relays = relays  # the running channels' relays by name, asked at each attempt (a channel may start late)
        self.vault = vault
        self.config = config
        self.tz = tz
        self.retry_seconds = retry_seconds
        self._timer: asyncio.TimerHandle | None = None
        self._running: asyncio.Task | None = None
        self._again = False
        self.last_error = ""
        self._noticed: dict[str, float] = {}  # routine -> when its last notice was posted

    # ---- making a message ----

    async def post(
        self, source: str, title: str, text: str, targets: list[str], claim_run: int | None = None, note: str = "", heading: str = ""
    ) -> InboxItem:
        """Put a message in the inbox with a delivery per other target, and try those now."""
        # A note target is resolved now (the day's note is the day the message was made) and kept in the
        # delivery's target, so a retry after a restart writes to the same note.
        when = datetime.now(self.tz)
        resolved = []
        for target in targets:
            if target == "note":
                try:
                    rel = note_path(note or self.config.note, when)
                except NoteTargetError:
                    rel = ""  # no note named: its delivery fails and says what to set (the message is in the inbox)
                target = f"note:{rel}#{(heading or self.config.heading).strip()}"
            resolved.append(target)
        item = await asyncio.to_thread(self.ledger.post, source, title, text, resolved, claim_run)
        self.kick()
        return item

    async def notice(self, routine: str, what: str, targets: list[str] | tuple[str, ...]) -> InboxItem | None:
        """A short notice that something of ``routine`` went wrong, in the inbox and on the routine's
        messengers among ``targets`` (not a note: a failure is no entry for the user's notes). At most
        one per routine every NOTICE_EVERY_SECONDS (across restarts: the inbox says when the last
        was); None when one was posted within that time."""
        source = NOTICE_PREFIX + routine
        if routine not in self._noticed:
            last = await asyncio.to_thread(self.ledger.last_posted, source)
            self._noticed.setdefault(routine, last if last is not None else 0.0)
        now = time.time()
        if now - self._noticed[routine] < NOTICE_EVERY_SECONDS:
            log.info("routine %s: %s (no notice: one was posted within the hour)", routine, what)
            return None
        self._noticed[routine] = now
        if len(what) > NOTICE_CHARS:  # a short notice: an error body of a megabyte stays in tarsd's log and the run's detail
            what = what[: NOTICE_CHARS - 1] + "…"
        text = (
            f"{routine} {what}\n`tarsctl routines show {routine}` has its runs; `tarsctl status` says what is wrong now. "
            "(At most one such notice an hour for each routine.)"
        )
        channels = [target for target in targets if target in CHANNEL_TARGETS]
        return await self.post(source, "Something went wrong", text, channels)

    # ---- trying ----

    def start(self) -> None:
        """Deliveries left pending by the last run of tarsd are tried now, and the timer armed."""
        self.kick()

    def kick(self) -> None:
        """Try what is due now (on the loop), then arm the timer for the next retry."""
        if self._running is not None and not self._running.done():
            self._again = True
            return
        self._running = asyncio.ensure_future(self._attempt_due())

    async def _attempt_due(self) -> None:
        while True:
            self._again = False
            due = await asyncio.to_thread(self.ledger.due_deliveries, time.time())
            for delivery in due:
                await self._attempt(delivery)
            if not self._again:
                break
        await self._arm()

    async def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        at = await asyncio.to_thread(self.ledger.next_delivery_at)
        if at is None:
            return
        loop = asyncio.get_running_loop()
        self._timer = loop.call_at(loop.time() + max(0.0, at - time.time()), self.kick)

    async def _attempt(self, delivery: DeliveryState) -> None:
        item = await asyncio.to_thread(self.ledger.message, delivery.message_id)
        if item is None:  # the message is gone (the index was rebuilt): nothing left to send
            await asyncio.to_thread(self.ledger.delivery_failed, delivery.id, "the message is no longer in the inbox", None)
            return
        try:
            await self._send(delivery.target, item)
        except (DeliveryFailed, NoteTargetError, OSError) as exc:
            why = str(exc) + (f" ({exc.hint})" if getattr(exc, "hint", "") else "")
            retry_at = self._retry_at(delivery.attempts + 1)
            await asyncio.to_thread(self.ledger.delivery_failed, delivery.id, why, retry_at)
            self.last_error = f"{delivery.target}: {why}"
            again = "gives up: the message stays in the inbox" if retry_at is None else f"tries again at {_clock(retry_at, self.tz)}"
            log.warning(
                "delivering %s to %s failed (attempt %d): %s; tars %s", item.source, delivery.target, delivery.attempts + 1, why, again
            )
            if retry_at is None and not item.source.startswith(NOTICE_PREFIX):  # no notice about a notice
                await self._given_up(item, delivery, why)
            return
        await asyncio.to_thread(self.ledger.delivered, delivery.id)
        log.info("delivered %s to %s", item.source, delivery.target)

    async def _given_up(self, item: InboxItem, delivery: DeliveryState, why: str) -> None:
        """A delivery given up: a notice in the inbox and on the message's messengers (the one that
        failed too: it may be back by now, and a notice that fails there makes no further notice)."""
        routine = item.source.split(":", 1)[1] if ":" in item.source else item.source
        target = delivery.target.split("#", 1)[0] if delivery.target.startswith("note:") else delivery.target
        when = datetime.fromtimestamp(item.created_at, self.tz).strftime("%Y-%m-%d %H:%M")
        what = f"could not be delivered to {target} (its message of {when}; tars gave up): {why}"
        try:
            await self.notice(routine, what, [d.target for d in item.deliveries])
        except Exception:  # the notice is a help: the delivery is recorded as given up whatever becomes of it
            log.exception("the notice of a delivery given up could not be posted")

    def _retry_at(self, attempts: int) -> float | None:
        if attempts > len(self.retry_seconds):
            return None
        return time.time() + self.retry_seconds[attempts - 1]

    async def _send(self, target: str, item: InboxItem) -> None:
        text = item.text if not item.title else f"**{item.title}**\n{item.text}"
        if target in CHANNEL_TARGETS:
            relay = self.relays().get(target)
            if relay is None:
                raise DeliveryFailed(f"the {target} channel is not running in this tarsd: `tarsctl status` says why ([{target}] enabled?)")
            from tarsd.channels.channel import SendFailed  # loaded already: a relay runs

            try:
                await relay.deliver(text)
            except SendFailed as exc:
                raise DeliveryFailed(str(exc)) from None
            return
        if target.startswith("note:"):
            # At the first "#": a note path has none (tarsd/routines/note_target.py), a heading may ("C# notes").
            rel, _, heading = target.removeprefix("note:").partition("#")
            if not rel:
                note_path("", datetime.now(self.tz))  # raises, saying which setting names the note
            block = entry(item.title or item.source, item.text, datetime.fromtimestamp(item.created_at, self.tz))
            await asyncio.to_thread(append_to_note, self.vault, rel, heading, block)
            return
        raise DeliveryFailed(f"no such delivery target {target!r}: use inbox, telegram, whatsapp or note")

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._running is not None and not self._running.done():
            self._running.cancel()


def _clock(at: float, tz: ZoneInfo) -> str:
    return datetime.fromtimestamp(at, tz).strftime("%H:%M:%S")
