"""tars speaks first on a channel (a routine's answer, a reminder): whom it goes to (the owner, the
allow list's first id),
delivering to Telegram and to WhatsApp inside and outside the 24-hour window (the template), and a
routine's chat asking its tool approvals of the owner with buttons.

The real relay and the real channel classes (python-telegram-bot's client, the Graph client over
httpx) talk to the fake Bot API and the fake Graph API on 127.0.0.1, which check what the real
ones check; the message ids and their senders are in a real SQLite index (SeenMessages). The
dispatcher is a small async generator speaking tars's own wire types: it yields a real
ToolApproval and waits for the DecideToolCall the owner's tap dispatches."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import msgspec
import pytest

from harness.daemon import wait_for
from harness.fake_graph import FakeGraph
from harness.fake_telegram import FakeTelegram
from tarsctl.authority import Principal
from tarsctl.protocol import Chat, ChatDone, DecideToolCall, Message, ToolApproval, ToolCallDecided
from tarsd.channels.channel import OtherIn, SendFailed
from tarsd.channels.seen import ANSWERED
from tarsd.channels.telegram import Telegram
from tarsd.channels.whatsapp import WhatsApp
from tarsd.channels.whatsapp_graph import Graph, GraphError
from tarsd.channels.whatsapp_text import CUT_NOTE, MAX_PARAMETER_CHARS, template_parameter
from tarsd.config.settings import ConfigError, TelegramConfig, WhatsAppConfig, load_config
from tarsd.serve.handlers.common import Peer
from tarsd.serve.status import channel_warnings
from tarsd.store.database import Store

TOKEN = "7700112233:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
ME, PARTNER, STRANGER = 4_200_000_001, 4_200_000_002, 4_200_000_999
PNID, ACCESS = "123456789", "graph-token"
NUMBER, OTHER_NUMBER, BSUID = "353870000001", "353870000002", "US.13491208655302741918"
HOUR = 3600.0


def fake_wait_confirmed(fake: FakeTelegram, update_id: int) -> None:
    """Until tars has fetched ``update_id`` and asked for the next (so it has been taken in)."""
    wait_for(
        lambda: any((c.params.get("offset") or 0) > update_id for c in fake.called("getUpdates")), f"update {update_id} to be taken in"
    )


def private(path: Path, text: str) -> Path:
    path.write_text(text + "\n")
    path.chmod(0o600)
    return path


def wrote(channel, sender: str, message_id: str, at: float) -> None:
    """``sender`` wrote to tars at ``at``, and was answered (so the relay's start has nothing to note)."""
    assert channel.relay.seen.take(channel.name, message_id, sender, "hello", now=at)
    channel.relay.seen.mark(channel.name, message_id, ANSWERED)


class RoutinePeer(Peer):
    """The caller of run_chat: a routine's run, as the runner names it."""

    door = "routine"
    principal = Principal.ROUTINE
    who = "the routine morning-brief"

    def read_ahead(self) -> asyncio.Future:
        return asyncio.get_running_loop().create_future()  # a routine sends nothing mid-chat


class Dispatcher:
    """The dispatcher as the relay sees it: a Chat asks one tool approval, then waits for its
    DecideToolCall (from whoever dispatches it) and ends with a ChatDone naming the decision."""

    def __init__(self):
        self.seen: list[tuple[Message, Principal]] = []
        self.decided: asyncio.Queue[tuple[DecideToolCall, Principal]] = asyncio.Queue()

    async def __call__(self, message: Message, peer: Peer):
        self.seen.append((message, peer.principal))
        if isinstance(message, Chat):
            yield ToolApproval(
                id=message.id,
                approval="approval-7",
                server="tasks",
                tool="add-task",
                name="tasks_add_task",
                arguments={"title": "buy milk"},
                why="ask 'add-*' in the config",
                timeout_seconds=30,
            )
            decision, by = await self.decided.get()
            yield ChatDone(id=message.id, conversation=message.conversation, text=f"approve={decision.approve} by {by}")
        elif isinstance(message, DecideToolCall):
            self.decided.put_nowait((message, peer.principal))
            yield ToolCallDecided(id=message.id, approval=message.approval, approved=message.approve)


@pytest.fixture
def store(tmp_path):
    store = Store(tmp_path / "index.sqlite3")
    yield store
    store.close()


def telegram(tmp_path: Path, store: Store, fake: FakeTelegram | None, allowed: list, dispatch=None) -> Telegram:
    settings = TelegramConfig(
        enabled=True,
        allowed_users=allowed,
        api_url=fake.url if fake is not None else "http://127.0.0.1:9",
        token_file=str(private(tmp_path / "telegram_token", TOKEN)),
        poll_timeout_seconds=1,
    )
    return Telegram(settings, tmp_path / "config.toml", store, dispatch or Dispatcher())


def whatsapp(tmp_path: Path, store: Store, fake: FakeGraph | None, allowed: list[str], template: str = "", dispatch=None) -> WhatsApp:
    settings = WhatsAppConfig(
        enabled=True,
        phone_number_id=PNID,
        allowed_senders=allowed,
        verify_token_file=str(private(tmp_path / "verify", "verify-word")),
        app_secret_file=str(private(tmp_path / "secret", "app-secret")),
        access_token_file=str(private(tmp_path / "access", ACCESS)),
        graph_url=fake.url if fake is not None else "http://127.0.0.1:9",
        template=template,
        template_language="en_US",
    )
    return WhatsApp(settings, tmp_path / "config.toml", store, dispatch or Dispatcher())


# ---- whom tars writes to ----


def test_the_owner_is_the_allow_lists_first_id_whoever_wrote_last(tmp_path, store):
    """Issue 43, observation 7: the owner was whoever wrote last, so another allowed user was asked
    about a routine's tool calls, and given its answers. It is the allow list's first id."""
    channel = telegram(tmp_path, store, None, ["@someone", ME, PARTNER])
    assert channel.relay.owner() == str(ME)  # the first numeric id (a username cannot be written to)
    now = time.time()
    wrote(channel, str(PARTNER), "1", now - 60)
    assert channel.relay.owner() == str(ME)  # another allowed user wrote last: the owner all the same
    wrote(channel, str(ME), "2", now - HOUR)
    wrote(channel, str(PARTNER), "3", now)
    assert channel.relay.owner() == str(ME)
    assert channel.relay.is_owner(str(ME)) and not channel.relay.is_owner(str(PARTNER)) and not channel.relay.is_owner(str(STRANGER))
    assert telegram(tmp_path, store, None, ["@someone"]).relay.owner() is None


def test_a_whatsapp_owner_is_a_number_or_a_bsuid_in_the_order_written(tmp_path, store):
    assert whatsapp(tmp_path, store, None, ["not a number", "+353 87 000 0001", BSUID]).relay.owner() == NUMBER
    assert whatsapp(tmp_path, store, None, [BSUID, "+353 87 000 0001"]).relay.owner() == BSUID
    assert whatsapp(tmp_path, store, None, ["US.ENT.1234"]).relay.owner() is None


def test_a_whatsapp_owner_written_as_a_bsuid_is_known_by_the_number_beside_it(tmp_path, store):
    """The owner named by their BSUID writes from their number (the message carries both): it is the
    owner writing, and the window a delivery to the BSUID is judged by is open; another allowed
    number that wrote last is not the owner."""
    with FakeGraph(PNID, ACCESS, templates={"tars_message": {"en_US"}}) as fake:
        channel = whatsapp(tmp_path, store, fake, [BSUID, OTHER_NUMBER], template="tars_message")

        async def run() -> tuple[bool, bool, bool]:
            channel.relay.start()
            try:
                # Reactions: taken in and recorded, answered with nothing (no model, no reply).
                await channel.relay.take(OtherIn(NUMBER, "wamid.owner", time.time() - HOUR, "reaction", quiet=True, also=(BSUID,)))
                await channel.relay.take(OtherIn(OTHER_NUMBER, "wamid.other", time.time() - 60, "reaction", quiet=True))
                owner = channel.relay.is_owner(NUMBER) and not channel.relay.is_owner(OTHER_NUMBER)
                can_ask = channel.relay.can_ask()
                await channel.relay.deliver("Due today: milk")
                return owner, can_ask, channel.relay.owner() == BSUID
            finally:
                await channel.relay.stop()
                await channel.graph.aclose()

        assert asyncio.run(run()) == (True, True, True)
        [sent] = fake.sends(BSUID)
        assert sent.body["type"] == "text" and not fake.templates_sent(BSUID) and not fake.sends(OTHER_NUMBER)


# ---- Telegram ----


def test_a_delivery_to_telegram_reaches_the_owners_chat_as_telegram_html(tmp_path, store):
    with FakeTelegram(TOKEN) as fake:
        fake.known_chats.update({ME, PARTNER})
        channel = telegram(tmp_path, store, fake, [ME, PARTNER])
        wrote(channel, str(ME), "1", time.time() - HOUR)
        wrote(channel, str(PARTNER), "2", time.time() - 60)  # another allowed user wrote last: not theirs

        async def run() -> bool:
            assert not channel.relay.can_ask()  # not started: nothing can reach anyone
            channel.relay.start()
            try:
                await channel.relay.deliver("**Morning.** Three things are due today.")
                return channel.relay.can_ask()
            finally:
                await channel.stop()

        assert asyncio.run(run())
        [sent] = fake.sent(ME)
        assert sent["html"] == "<b>Morning.</b> Three things are due today." and not fake.sent(PARTNER)
        assert channel.counters.sent == 1


def test_a_delivery_telegram_refuses_raises_send_failed_saying_why(tmp_path, store):
    with FakeTelegram(TOKEN) as fake:
        channel = telegram(tmp_path, store, fake, [ME])

        async def deliver(text: str) -> str:
            channel.relay.start()
            try:
                await channel.relay.deliver(text)
            except SendFailed as exc:
                return str(exc)
            finally:
                await channel.stop()
            raise AssertionError("delivered")

        # The owner never started a chat with the bot: Telegram's 403.
        assert "they blocked the bot, or never started a chat with it" in asyncio.run(deliver("hi"))
        fake.known_chats.add(ME)
        # A refusal the channel does not retry (its back-off on 5xx is tested with the channel itself).
        fake.fail("sendMessage", 400, "Bad Request: message is too long", times=1)
        why = asyncio.run(deliver("hi again"))
        assert "message is too long" in why.lower() and not fake.sent(ME)
        assert channel.counters.send_failures == 2 and channel.counters.last_error == why


def test_a_stopping_relay_delivers_nothing_and_raises_send_failed(tmp_path, store):
    with FakeTelegram(TOKEN) as fake:
        fake.known_chats.add(ME)
        channel = telegram(tmp_path, store, fake, [ME])

        async def run() -> str:
            channel.relay.start()
            await channel.stop()
            assert not channel.relay.can_ask()
            try:
                await channel.relay.deliver("hi")
            except SendFailed as exc:
                return str(exc)
            raise AssertionError("delivered while stopping")

        why = asyncio.run(run())
        assert why.startswith("tarsd is stopping") and "the message is kept" in why and not fake.called("sendMessage")


def test_nobody_to_deliver_to_is_a_send_failed_naming_the_setting(tmp_path, store):
    channel = telegram(tmp_path, store, None, ["@me"])

    async def run() -> str:
        channel.relay.start()
        try:
            await channel.relay.deliver("hi")
        except SendFailed as exc:
            return str(exc)
        finally:
            await channel.relay.stop()
        raise AssertionError("delivered")

    assert asyncio.run(run()) == (
        "nobody to send it to in Telegram: [telegram] allowed_users names nobody tars can write to; put your own id there"
    )


# ---- WhatsApp and its 24-hour window ----


def test_a_template_parameter_has_no_line_breaks_tabs_or_runs_of_spaces_and_fits_1024():
    assert template_parameter("*Morning*\n\n- milk\n- \tbread     and  jam\r\n> due") == "*Morning* · - milk · - bread and jam · > due"
    assert template_parameter("a\u00a0\u00a0\u00a0\u00a0\u00a0b\u2028c") == "a b · c"
    assert template_parameter(" \n\t") == "(no text)"
    long = " ".join(f"word{i}" for i in range(400))
    cut = template_parameter(long)
    assert len(cut) <= MAX_PARAMETER_CHARS and cut.endswith(CUT_NOTE) and long.startswith(cut.removesuffix(CUT_NOTE))
    assert cut.removesuffix(CUT_NOTE).split()[-1] in long.split()  # cut between words
    assert template_parameter("x" * 1024) == "x" * 1024


def test_the_fake_graph_api_refuses_templates_as_meta_does():
    """What the channel's template tests rest on: the fake refuses what Meta refuses."""
    with FakeGraph(PNID, ACCESS, templates={"tars_message": {"en_US"}}) as fake:

        async def send(name: str, language: str, text: str) -> str | GraphError:
            graph = Graph(fake.url, PNID, lambda: ACCESS)
            try:
                return await graph.send_template(NUMBER, name, language, text)
            except GraphError as exc:
                return exc
            finally:
                await graph.aclose()

        assert asyncio.run(send("tars_message", "en_US", "fine")).startswith("wamid.")
        assert asyncio.run(send("tars_message", "de", "fine")).code == 132001
        assert asyncio.run(send("other", "en_US", "fine")).code == 132001
        for bad in ("two\nlines", "a\ttab", "five     spaces", "x" * 1025, ""):
            assert asyncio.run(send("tars_message", "en_US", bad)).code == 132018, bad


def test_inside_the_window_a_delivery_is_free_text(tmp_path, store):
    with FakeGraph(PNID, ACCESS, templates={"tars_message": {"en_US"}}) as fake:
        channel = whatsapp(tmp_path, store, fake, [NUMBER, OTHER_NUMBER], template="tars_message")
        wrote(channel, NUMBER, "wamid.in", time.time() - 23 * HOUR)
        wrote(channel, OTHER_NUMBER, "wamid.other", time.time() - 60)  # wrote last, and is not the owner

        async def run() -> bool:
            channel.relay.start()
            try:
                await channel.relay.deliver("**Due today**\n\n- milk")
                return channel.relay.can_ask()
            finally:
                await channel.relay.stop()
                await channel.graph.aclose()

        assert asyncio.run(run())
        assert fake.texts(NUMBER) == ["*Due today*\n\n- milk"] and not fake.templates_sent(NUMBER)
        assert not fake.sends(OTHER_NUMBER)


def test_outside_the_window_a_delivery_is_the_template_flattened_and_cut_to_1024(tmp_path, store):
    with FakeGraph(PNID, ACCESS, templates={"tars_message": {"en_US"}}) as fake:
        channel = whatsapp(tmp_path, store, fake, [NUMBER, OTHER_NUMBER], template="tars_message")
        wrote(channel, NUMBER, "wamid.old", time.time() - 23.95 * HOUR)  # within the day, but too close to its end
        long = "# Week\n\n" + "\n".join(f"- task number {i} is due" for i in range(200))

        async def run() -> bool:
            channel.relay.start()
            try:
                await channel.relay.deliver("**Due today**\n\n- milk\n- bread")
                await channel.relay.deliver(long)
                return channel.relay.can_ask()
            finally:
                await channel.relay.stop()
                await channel.graph.aclose()

        assert not asyncio.run(run())  # no buttons outside the window
        assert not fake.texts(NUMBER)
        short, cut = fake.templates_sent(NUMBER)
        assert short == {
            "name": "tars_message",
            "language": {"code": "en_US"},
            "components": [{"type": "body", "parameters": [{"type": "text", "text": "*Due today* · - milk · - bread"}]}],
        }
        text = cut["components"][0]["parameters"][0]["text"]
        assert text.startswith("*Week* · - task number 0 is due · - task number 1 is due") and text.endswith(CUT_NOTE)
        assert len(text) <= 1024 and channel.counters.sent == 2 and channel.counters.send_failures == 0


def test_outside_the_window_without_a_template_nothing_is_sent_and_status_says_why(tmp_path, store):
    with FakeGraph(PNID, ACCESS) as fake:
        channel = whatsapp(tmp_path, store, fake, [BSUID])  # never wrote: the window was never open

        async def run() -> str:
            channel.relay.start()
            try:
                await channel.relay.deliver("hi")
            except SendFailed as exc:
                return str(exc)
            finally:
                await channel.relay.stop()
                await channel.graph.aclose()
            raise AssertionError("delivered")

        why = asyncio.run(run())
        assert "outside WhatsApp's 24-hour window" in why and "no [whatsapp] template is set" in why
        assert "docs/whatsapp.md#templates" in why and BSUID not in why
        assert not fake.sends()
        status = channel.status()
        assert status.template == "" and status.window_closed == 1 and status.send_failures == 1 and status.last_error == why
        [warning] = channel_warnings([status])
        assert "refused outside WhatsApp's 24-hour window" in warning and "no template" in warning and "[whatsapp] template" in warning
        with_one = msgspec.structs.replace(status, template="tars_message")
        assert "no template" not in channel_warnings([with_one])[0]


def test_free_text_refused_for_the_window_goes_again_as_the_template(tmp_path, store):
    """tars thought the window open (the message was taken in late, say): WhatsApp's 131047 says
    otherwise, and the message goes as the template; without a template it is a SendFailed."""
    with FakeGraph(PNID, ACCESS, templates={"tars_message": {"en_US"}}) as fake:
        fake.closed.add(NUMBER)
        with_template = whatsapp(tmp_path, store, fake, [NUMBER], template="tars_message")
        wrote(with_template, NUMBER, "wamid.late", time.time() - HOUR)
        without = whatsapp(tmp_path, store, fake, [NUMBER])

        async def run() -> str:
            for channel in (with_template, without):
                channel.relay.start()
            try:
                await with_template.relay.deliver("Line one\nline two")
                try:
                    await without.relay.deliver("hi")
                except SendFailed as exc:
                    return str(exc)
                raise AssertionError("delivered")
            finally:
                for channel in (with_template, without):
                    await channel.relay.stop()
                    await channel.graph.aclose()

        why = asyncio.run(run())
        [template] = fake.templates_sent(NUMBER)
        assert template["components"][0]["parameters"][0]["text"] == "Line one · line two"
        assert [s.status for s in fake.sends(NUMBER)] == [400, 200, 400]  # free text, its template, the other's free text
        assert "no [whatsapp] template is set" in why and without.counters.window_closed == 2  # refused, then not sendable


def test_a_template_whatsapp_does_not_know_is_a_send_failed_naming_both_settings(tmp_path, store):
    with FakeGraph(PNID, ACCESS, templates={"tars_message": {"en"}}) as fake:
        channel = whatsapp(tmp_path, store, fake, [NUMBER], template="tars_message")  # en_US, not en

        async def run() -> str:
            channel.relay.start()
            try:
                await channel.relay.deliver("hi")
            except SendFailed as exc:
                return str(exc)
            finally:
                await channel.relay.stop()
                await channel.graph.aclose()
            raise AssertionError("delivered")

        why = asyncio.run(run())
        assert "knows no approved template 'tars_message' in 'en_US'" in why and "(#132001)" in why
        assert "[whatsapp] template and template_language" in why


def test_a_template_language_that_is_not_a_code_is_refused_with_what_it_must_be(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[whatsapp]\ntemplate = "tars_message"\ntemplate_language = "English"\n')
    with pytest.raises(ConfigError) as refused:
        load_config(config, env={})
    assert '[whatsapp] template_language = "English"' in str(refused.value)
    assert 'it must be a language code as WhatsApp Manager writes it: "en", "en_US"' in str(refused.value)
    config.write_text('[whatsapp]\ntemplate = "tars_message"\ntemplate_language = "pt_BR"\n')
    assert load_config(config, env={}).whatsapp.template_language == "pt_BR"


# ---- a routine's chat ----


def test_a_routines_approval_is_asked_of_the_owner_and_their_tap_decides_it_as_the_phone(tmp_path, store):
    dispatch = Dispatcher()
    with FakeTelegram(TOKEN) as fake:
        fake.known_chats.update({ME, PARTNER})
        channel = telegram(tmp_path, store, fake, [ME, PARTNER], dispatch=dispatch)
        wrote(channel, str(ME), "1", time.time() - HOUR)
        wrote(channel, str(PARTNER), "2", time.time() - 60)  # another allowed user wrote last: never asked (issue 43, 7)

        async def run() -> tuple[Message | None, int]:
            await channel.start()  # polling: the tap comes back as an update
            try:
                request = Chat(id=1, conversation="routine:morning-brief", message="plan my day", approvals=True)
                running = asyncio.ensure_future(channel.relay.run_chat(request, RoutinePeer()))
                question = await asyncio.to_thread(fake.wait_question, ME)
                [[yes, _no]] = question["reply_markup"]["inline_keyboard"]
                # The other allowed user taps the owner's button (forwarded, or guessed): refused, nothing decided.
                tapped = fake.tap(PARTNER, question, yes["callback_data"])
                await asyncio.to_thread(lambda: fake_wait_confirmed(fake, tapped))
                assert not running.done() and channel.relay.questions_waiting() == 1
                fake.tap(ME, question, yes["callback_data"])
                final = await asyncio.wait_for(running, 60)
                return final, channel.relay.questions_waiting()
            finally:
                await channel.stop()

        final, waiting = asyncio.run(run())
        assert isinstance(final, ChatDone) and final.text == "approve=True by phone" and waiting == 0
        question = fake.questions[0]
        assert "Run tasks_add_task?" in question["text"] and '"title": "buy milk"' in question["text"]
        assert [b["text"] for b in question["reply_markup"]["inline_keyboard"][0]] == ["Run it", "Don't"]
        assert [(type(m).__name__, by) for m, by in dispatch.seen] == [("Chat", Principal.ROUTINE), ("DecideToolCall", Principal.PHONE)]
        assert [m["text"] for m in fake.sent(ME)] == [question["text"]]  # the answer is the caller's to deliver
        assert not fake.sent(PARTNER)


def test_a_routines_approval_nobody_can_be_asked_is_refused_at_once(tmp_path, store):
    """Outside WhatsApp's window no buttons can be sent: the call is refused, by the routine's
    own peer, rather than left waiting for its timeout."""
    dispatch = Dispatcher()
    with FakeGraph(PNID, ACCESS, templates={"tars_message": {"en_US"}}) as fake:
        channel = whatsapp(tmp_path, store, fake, [NUMBER], template="tars_message", dispatch=dispatch)

        async def run() -> Message | None:
            channel.relay.start()
            try:
                request = Chat(id=1, conversation="routine:morning-brief", message="plan my day", approvals=True)
                return await asyncio.wait_for(channel.relay.run_chat(request, RoutinePeer()), 60)
            finally:
                await channel.relay.stop()
                await channel.graph.aclose()

        final = asyncio.run(run())
        assert isinstance(final, ChatDone) and final.text == "approve=False by routine"
        assert not fake.sends()
        [(chat, _), (decision, by)] = dispatch.seen
        assert isinstance(decision, DecideToolCall) and decision.approval == "approval-7" and by == Principal.ROUTINE
