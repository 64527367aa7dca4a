"""Deliveries on real parts (the ledger in a real index database, a real asyncio loop, the note
target in a real vault folder): a delivery that keeps failing is tried on its schedule, then given
up with its reason while the message stays in the inbox; one to a channel that is not running says
so; a note delivery retried after a restart writes to the note it was made for."""

from __future__ import annotations

import asyncio
import time
from zoneinfo import ZoneInfo

from tarsd.config.settings import RoutinesConfig
from tarsd.routines.ledger import Ledger
from tarsd.speaking.deliveries import Deliveries
from tarsd.store.database import Store

BERLIN = ZoneInfo("Europe/Berlin")


def test_a_failing_delivery_is_retried_then_given_up_and_the_message_stays_in_the_inbox(tmp_path):
    store = Store(tmp_path / "index.sqlite3")
    vault = tmp_path / "vault"
    vault.mkdir()
    try:
        ledger = Ledger(store)
        deliveries = Deliveries(ledger, dict, vault, RoutinesConfig(), BERLIN, retry_seconds=(0.2, 0.2))

        async def main():
            item = await deliveries.post("reminder:tea", "Reminder", "tea", ["telegram", "inbox"])
            deadline = time.monotonic() + 10
            while ledger.delivery_counts().get("failed", 0) < 2:  # the message's, then its notice's
                assert time.monotonic() < deadline, ledger.inbox()
                await asyncio.sleep(0.05)
            await deliveries.stop()
            return item

        started = time.monotonic()
        item = asyncio.run(main())
        assert time.monotonic() - started >= 0.4  # the two retries waited their time
        notice, message = ledger.inbox()
        assert notice.source == "notice:tea" and "tea could not be delivered to telegram" in notice.text
        assert message.id == item.id and message.text == "tea" and not message.read
        [delivery] = message.deliveries  # "inbox" is no delivery: the message is there
        assert (delivery.target, delivery.state, delivery.attempts) == ("telegram", "failed", 3)
        assert "the telegram channel is not running" in delivery.last_error
        assert ledger.next_delivery_at() is None  # nothing left to wake for
    finally:
        store.close()


def test_a_note_delivery_waiting_across_a_restart_goes_to_the_note_it_was_made_for(tmp_path):
    store = Store(tmp_path / "index.sqlite3")
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Daily").write_text("a file where the folder should be")  # the first attempt fails: not a folder
    config = RoutinesConfig(note="Daily/{date}.md", heading="tars")
    try:
        ledger = Ledger(store)

        async def first():
            deliveries = Deliveries(ledger, dict, vault, config, BERLIN, retry_seconds=(3600.0,))
            await deliveries.post("routine:brief", "brief", "all fine", ["note"])
            deadline = time.monotonic() + 10
            while not ledger.inbox()[0].deliveries[0].attempts:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            await deliveries.stop()

        asyncio.run(first())
        [delivery] = ledger.inbox()[0].deliveries
        assert delivery.state == "pending" and delivery.target.startswith("note:Daily/") and delivery.target.endswith(".md#tars")
        (vault / "Daily").unlink()
        with store.writer_connection() as conn:  # the hour passed (tarsd was stopped meanwhile)
            conn.execute("UPDATE deliveries SET next_attempt_at = ?", (time.time() - 1,))

        async def after_restart():
            deliveries = Deliveries(ledger, dict, vault, RoutinesConfig(note="Elsewhere/{date}.md"), BERLIN)
            deliveries.start()
            deadline = time.monotonic() + 10
            while ledger.delivery_counts().get("sent", 0) == 0:
                assert time.monotonic() < deadline, ledger.inbox()[0].deliveries
                await asyncio.sleep(0.05)
            await deliveries.stop()

        asyncio.run(after_restart())
        rel = delivery.target.removeprefix("note:").rpartition("#")[0]
        assert (vault / rel).read_text().startswith("## tars\n\n**") and "all fine" in (vault / rel).read_text()
        assert not (vault / "Elsewhere").exists()  # the note it was made for, not today's setting
    finally:
        store.close()


def test_a_delivery_given_up_leaves_one_notice_an_hour_per_routine_and_none_about_a_notice(tmp_path):
    store = Store(tmp_path / "index.sqlite3")
    vault = tmp_path / "vault"
    vault.mkdir()
    try:
        ledger = Ledger(store)
        # No channel runs here: every delivery to telegram fails, and is given up after one retry.
        deliveries = Deliveries(ledger, dict, vault, RoutinesConfig(), BERLIN, retry_seconds=(0.05,))

        async def settled():
            deadline = time.monotonic() + 10
            while ledger.delivery_counts().get("pending", 0) or deliveries._running is not None and not deliveries._running.done():
                assert time.monotonic() < deadline, ledger.inbox()
                await asyncio.sleep(0.05)

        async def main():
            await deliveries.post("routine:brief", "brief", "first", ["telegram"])
            await settled()
            await deliveries.post("routine:brief", "brief", "second", ["telegram"])  # within the hour: no second notice
            await deliveries.post("reminder:tea", "Reminder", "tea", ["telegram", "note"])
            await settled()
            await deliveries.stop()

        asyncio.run(main())
        sources = [m.source for m in reversed(ledger.inbox())]
        assert sources.count("notice:brief") == 1 and sources.count("notice:tea") == 1
        assert len(sources) == 5  # three messages, two notices; the notices' own failed deliveries made none
        [tea] = [m for m in ledger.inbox() if m.source == "notice:tea"]
        # On the messengers the message had (the note is no place for a failure), and in the inbox.
        assert [d.target for d in tea.deliveries] == ["telegram"] and tea.deliveries[0].state == "failed"

        # A restart keeps the hour: the inbox says when the last notice was. And a notice is short.
        async def after_restart():
            again = Deliveries(ledger, dict, vault, RoutinesConfig(), BERLIN, retry_seconds=(0.05,))
            assert await again.notice("brief", "did not run: the model is away", ["telegram"]) is None
            long = await again.notice("huge", "did not run: " + "an error body " * 100_000, [])
            assert long is not None and len(long.text) < 1000 and long.deliveries == ()
            await again.stop()

        asyncio.run(after_restart())
    finally:
        store.close()
