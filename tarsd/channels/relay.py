"""The relay: what every messenger channel shares, between the messages a channel takes in and the
daemon's dispatcher (the one the socket and HTTP use).

Authority: a message from a sender on the channel's allow list is the user speaking; a message
from anyone else reaches nothing (it is counted, logged under a hash, and dropped unread). Only
the user's own button taps answer a question, and a question's buttons carry a random id bound to
the one sender it was asked of and to the call it decides: the approval id stays here (it reaches
neither the messenger nor the model), and a tap from any other number is ignored. A message
names its sender by one id or more (WhatsApp: a phone number, a BSUID, or both): it is the user's
when any of them is allowed. When the messenger says an allowed sender's id changed, the log and
the sender are told, and the new id stays out until the owner adds it: no id is ever allowed here.

Each sender is one conversation, ``<channel>:<sender>``, in the conversation store the CLI and the
page use (so the same compaction and session logs); its messages are handled one after the other,
while button taps are handled at once (a turn may be waiting for one). Commands work as in the
REPL (``commands``, the relay's base class): /new, /remember, /forget, /search (and /sgrep, /svec, /help), /remind and /routines (a
reminder set here is sent here, in the owner's chat), and /whoami: the ids the messenger names the
sender by, to put in the allow list (a WhatsApp BSUID, say). What the model did on its own while
answering (a reminder set, a line noted, a proposal filed) follows its answer, one line each with
its undo (``effects``): a note it read may have told it to. Every message is answered once: the
channel's webhook records each message id before answering Meta (``SeenMessages``), and a message
recorded but never answered (tarsd stopped or was killed meanwhile) gets a note at the next start.

tars also speaks first (a routine's answer, a reminder): ``deliver`` sends to the owner, the first
id of the allow list (never whoever wrote last: another allowed person is not asked, nor told, what
the owner's routines do), and ``run_chat`` runs a routine's chat asking the owner, with buttons,
each tool call that needs approval; a tap from anyone else decides nothing. A messenger with
a reply window (WhatsApp's 24 hours) takes free text and buttons only within it: outside it a
message tars starts goes as the channel allows (``send_outside_window``), and nothing is asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

from tarsctl.authority import Principal
from tarsctl.protocol import (
    Chat,
    ChatDone,
    DecideToolCall,
    Error,
    Message,
    ToolActivity,
    ToolApproval,
    ToolCallDecided,
    ToolEffect,
)
from tarsctl.shown import shown_text
from tarsd.channels.channel import Button, Channel, ChoiceIn, IdChanged, Inbound, OtherIn, SendFailed, TextIn, WindowClosed
from tarsd.channels.commands import HELP, Commands, failure
from tarsd.channels.effects import effects_message
from tarsd.channels.seen import ANSWERED, KEEP_SECONDS, NOTIFIED, SeenMessages
from tarsd.serve.handlers.common import Peer

log = logging.getLogger(__name__)

ServerDispatch = Callable[[Message, Peer], AsyncIterator[Message]]

TYPING_REFRESH_SECONDS = 20.0  # WhatsApp drops its typing indicator after 25 s (a channel may say otherwise)
MAX_QUESTIONS = 200  # open questions in all; the oldest go first
STOP_GRACE_SECONDS = 1.0  # for what is under way to end when tarsd stops, then as long again once cancelled
STRANGER_LOG_SECONDS = 60.0  # at most one log line a minute about numbers not allowed
ARGUMENT_CHARS = 3000  # of a tool call's arguments, shown whole with its question; a longer call cannot be approved here
# tars knows when it took a message in, not when Meta's clock started the window (the person's
# send, a delivery retried late): the window is taken to close this much earlier.
WINDOW_MARGIN_SECONDS = 600.0


class Stopping(Exception):
    """tarsd stops: what is under way is left, to be noted at the next start."""


@dataclass(slots=True)
class Question:
    sender: str  # the only one whose tap answers it
    answers: dict[str, Callable[[], Awaitable[None]]]  # button choice -> what it does
    asked_at: float
    expires_at: float
    blocking: bool  # a turn waits for it (a tool approval): the sender's next messages wait too


class _ChannelPeer(Peer):
    """The client a channel's requests come from: the user, in that messenger. A chat it started
    ends (cancelled) when the channel stops."""

    door = "channel"
    principal = Principal.PHONE  # an allowed sender: the user, with a phone's rights (tarsctl/authority.py)

    def __init__(self, who: str, stopping: asyncio.Future):
        self.who = who
        self.stopping = stopping

    def read_ahead(self) -> asyncio.Future:
        return self.stopping


class Relay(Commands):
    def __init__(
        self,
        channel: Channel,
        title: str,
        dispatch: ServerDispatch,
        seen: SeenMessages,
        allowed: set[str],
        typing_every: float = TYPING_REFRESH_SECONDS,
        allow_list: str = "",
        addresses: Sequence[str] = (),
    ):
        self.channel = channel
        self.typing_every = typing_every  # how long the messenger shows its typing indicator
        # The setting that lists who may talk to tars, as the user writes it: "[whatsapp] allowed_senders".
        self.allow_list = allow_list or f"[{channel.name}] allowed_senders"
        self.title = title  # "WhatsApp", for people
        self.dispatch = dispatch
        self.seen = seen
        self.allowed = allowed
        # The allow list's ids in the order written, each one a message can be sent to: what tars starts
        # goes to the first, the owner.
        self.addresses = list(addresses)
        self.started_at = time.time()
        self._ids = itertools.count(1)
        self._queues: dict[str, asyncio.Queue[Inbound]] = {}
        self._workers: dict[str, asyncio.Task] = {}
        self._tasks: set[asyncio.Task] = set()
        self._questions: dict[str, Question] = {}
        self._latest: dict[str, str] = {}  # sender -> their latest message id (for the typing indicator)
        # sender -> every id their latest message named them by: a tap answers their question when
        # it carries any of these (a WhatsApp tap may come with the BSUID alone, the question having
        # been asked at the number).
        self._ids_of: dict[str, tuple[str, ...]] = {}
        self._stopping: asyncio.Future | None = None
        self._strangers = 0  # messages from numbers not allowed since the last line about them
        self._stranger_logged_at = float("-inf")

    # ---- taking messages in (the webhook awaits this) ----

    async def take(self, event: Inbound) -> None:
        """Record ``event`` and schedule its handling; returns once it is recorded, so that the
        webhook answers 200 only for what will not be lost."""
        who = self.channel.who(event.sender)
        counters = self.channel.counters
        if not any(i in self.allowed for i in event.ids):
            if isinstance(event, IdChanged):
                # Someone not allowed has a new id: nothing of theirs was ever answered, nothing changes.
                log.info("%s: a sender not in %s has a new id: nothing to do", self.title, self.allow_list)
                return
            counters.unknown_senders += 1
            self._strangers += 1
            if time.monotonic() - self._stranger_logged_at >= STRANGER_LOG_SECONDS:
                more = f" ({self._strangers - 1} more since the last line)" if self._strangers > 1 else ""
                self._stranger_logged_at, self._strangers = time.monotonic(), 0
                log.warning(
                    "%s: dropped a message from %s, a %s not in %s: not read, not answered%s (at most a line a minute)",
                    self.title,
                    who,
                    "user" if self.allow_list.endswith("allowed_users") else "sender",
                    self.allow_list,
                    more,
                )
            return
        age = time.time() - event.at
        if age > KEEP_SECONDS:
            # Older than the memory of message ids: it may have been answered already.
            log.warning(
                "%s: a message from %s sent %.0f h ago arrived only now: not answered (it may have been already)",
                self.title,
                who,
                age / 3600,
            )
            return
        preview = event.text if isinstance(event, TextIn) else ""
        if not await asyncio.to_thread(self.seen.take, self.channel.name, event.message_id, event.sender, preview):
            counters.duplicates += 1
            # Never the message id in the log: a wamid holds the sender's number, base64-encoded.
            log.info("%s: a message from %s delivered again: answered once already", self.title, who)
            return
        counters.received += 1
        if not isinstance(event, IdChanged):
            self._ids_of[event.sender] = event.ids
        if isinstance(event, IdChanged):
            counters.id_changes += 1
            self._spawn(self._handled(event, self._id_changed(event)))
            return
        if isinstance(event, ChoiceIn):
            # At once, not behind the sender's turn: that turn may be waiting for this very tap.
            self._spawn(self._handled(event, self._choice(event)))
            return
        self._latest[event.sender] = event.message_id
        queue = self._queues.setdefault(event.sender, asyncio.Queue())
        queue.put_nowait(event)
        worker = self._workers.get(event.sender)
        if worker is None or worker.done():
            self._workers[event.sender] = self._spawn(self._work(event.sender))
        elif isinstance(event, TextIn) and any(q.sender == event.sender and q.blocking for q in self._questions.values()):
            self._spawn(
                self._say_quietly(
                    event.sender, "tars waits for your answer to the question above (Run it / Don't); this message comes after it."
                )
            )

    def _spawn(self, job: Awaitable[None]) -> asyncio.Task:
        task = asyncio.ensure_future(job)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _work(self, sender: str) -> None:
        queue = self._queues[sender]
        while True:
            try:
                event = queue.get_nowait()
            except asyncio.QueueEmpty:
                # No await between the empty queue and this: a message taken in now starts a new worker.
                self._workers.pop(sender, None)
                return
            await self._handled(event, self._message(event))

    async def _handled(self, event: Inbound, job: Awaitable[None]) -> None:
        try:
            await job
        except (Stopping, asyncio.CancelledError):
            return  # left as received: the next start tells the sender it was never answered
        except Exception:
            log.exception("%s: a message from %s could not be handled", self.title, self.channel.who(event.sender))
            with contextlib.suppress(Exception):
                await self._say(event.sender, "Something went wrong in tars with this message; its log says what.")
        await asyncio.to_thread(self.seen.mark, self.channel.name, event.message_id, ANSWERED)
        self.channel.counters.answered += 1

    # ---- one message ----

    async def _message(self, event: Inbound) -> None:
        if isinstance(event, OtherIn):
            if not event.quiet:
                await self._say(
                    event.sender, f"tars reads only text messages; this one ({event.kind}) was not read. Send it as text, please."
                )
            return
        assert isinstance(event, TextIn)
        text = event.text.strip()
        if not text.startswith("/"):
            return await self._chat(event)
        parts = text.split(maxsplit=1)
        name, rest = parts[0].lower(), parts[1].strip() if len(parts) > 1 else ""
        if name == "/new":
            return await self._new(event.sender)
        if name == "/remember":
            return await self._remember(event.sender, rest)
        if name == "/forget":
            return await self._forget(event.sender, rest)
        if name in ("/search", "/sgrep", "/svec"):
            return await self._search(event.sender, rest, {"/search": "hybrid", "/sgrep": "fts", "/svec": "vec"}[name])
        if name == "/remind":
            return await self._remind(event.sender, rest)
        if name == "/routines":
            return await self._routines(event.sender, rest)
        if name == "/review":
            return await self._review_command(event.sender, rest)
        if name == "/whoami":
            # Only ever to an allowed sender, about themselves: the ids are theirs.
            ids = "\n".join(f"`{i}`" for i in event.ids)
            return await self._say(event.sender, f"This message came from:\n{ids}\n(each one can go in {self.allow_list})")
        if name in ("/help", "/start"):  # /start: what Telegram sends when a user opens the bot the first time
            return await self._say(event.sender, HELP.format(allow_list=self.allow_list))
        await self._say(event.sender, f"Unknown command {name}: /help lists them.")

    def conversation(self, sender: str) -> str:
        return f"{self.channel.name}:{sender}"

    async def _chat(self, event: TextIn) -> None:
        sender = event.sender
        typing = asyncio.ensure_future(self._keep_typing(sender))
        asked: list[str] = []
        effects: list[ToolEffect] = []  # what the model did on its own: said after its answer
        final: Message | None = None
        try:
            request = Chat(id=next(self._ids), conversation=self.conversation(sender), message=event.text, approvals=True)
            async for reply in self.dispatch(request, self._peer(sender)):
                if isinstance(reply, ToolApproval):
                    asked.append(await self._ask_approval(sender, reply))
                elif isinstance(reply, ToolActivity) and reply.effect is not None:
                    effects.append(reply.effect)
                elif isinstance(reply, (ChatDone, Error)):
                    final = reply
        finally:
            typing.cancel()
            for nonce in asked:
                self._questions.pop(nonce, None)  # the turn is over: its questions are too
        if self._stopped():
            raise Stopping
        if isinstance(final, ChatDone):
            text = final.text.strip()
            if final.cancelled:
                text = (text + "\n\n" if text else "") + "(the answer was stopped)"
            await self._say(sender, text or "(tars had nothing to say)")
        else:
            await self._say(sender, failure("tars could not answer", final))
        if effects:
            # A message of its own, in tars's words: never part of (nor to be mistaken for) the model's answer.
            await self._say(sender, effects_message(effects, self.channel.name, self.is_owner(sender)))

    async def _keep_typing(self, sender: str) -> None:
        """The typing indicator while a turn runs, shown again before it lapses; not while a
        question waits for the user (they are the one to act)."""
        while True:
            latest = self._latest.get(sender)
            if latest and not any(q.sender == sender for q in self._questions.values()):
                await self.channel.typing(sender, latest)
            await asyncio.sleep(self.typing_every)

    # ---- a sender's new id ----

    async def _id_changed(self, event: IdChanged) -> None:
        """An allowed sender's id changed: said in the log (hashed), and to the sender, at the old
        address and at the new one (the old may no longer reach them: a number change replaces
        both ids). The new ids are not allowed: a signed delivery from the messenger says who the
        person is, but only the owner says who may talk to tars."""
        new = [i for i in event.new_ids if i not in self.allowed]
        if not new:
            log.info("%s: %s has a new id, which %s already holds", self.title, self.channel.who(event.sender), self.allow_list)
            return
        log.warning(
            "%s: %s now writes as %s (the messenger says their id changed): the new id is not allowed until you add it to %s; "
            "the message sent to them names it",
            self.title,
            self.channel.who(event.sender),
            " and ".join(self.channel.who(i) for i in new),
            self.allow_list,
        )
        ids = " and ".join(f"`{i}`" for i in new)
        text = (
            f"{self.title} says your id changed: you now write as {ids}. tars does not answer the new id until you add it to "
            f"{self.allow_list} in tarsd's config and restart tarsd."
        )
        for address in dict.fromkeys((event.sender, event.new_address)):
            await self._say(address, text)  # a send that fails is logged by the channel; the other may still arrive

    # ---- questions with buttons ----

    async def _ask_approval(self, sender: str, approval: ToolApproval) -> str:
        """Ask the sender to approve a call, its arguments shown whole; "" when it cannot be asked.

        A tap approves what the question shows, so the question shows all of it: blank runs are
        a counted marker (padding cannot push the real payload out of sight) and invisible or
        control characters are escapes. Arguments that still do not fit are never cut (the
        hidden rest would run): the call is refused, and the sender told where it can be asked."""
        arguments = shown_text(json.dumps(approval.arguments, ensure_ascii=False, indent=1), keep_newlines=True)
        if len(arguments) > ARGUMENT_CHARS:
            await self._say(
                sender,
                f"tars wanted to run *{approval.name}* ({approval.server}: {approval.tool}), but its arguments "
                f"({len(arguments):,} characters) are too long to show whole in {self.title}, so it cannot be approved here: "
                "it was not run. Ask for it in `tarsctl chat` or on the web page, where a call's arguments are shown whole.",
            )
            await self._decide(sender, approval.approval, False)
            return ""
        arguments = arguments.replace("```", "ʼʼʼ")  # cannot close the block it is shown in
        timeout = f"No answer within {approval.timeout_seconds:g} s is a no."
        asking = f"Run *{approval.name}*? ({approval.server}: {approval.tool}; {approval.why})"
        question = f"{asking}\n```\n{arguments}\n```\n{timeout}"
        if not self.channel.fits_question(question):
            await self._say(
                sender, f"tars wants to run *{approval.name}* ({approval.server}: {approval.tool}) with:\n```\n{arguments}\n```"
            )
            question = f"Run *{approval.name}* with the arguments above? ({approval.why})\n{timeout}"
        nonce = self._question(
            sender,
            {"yes": lambda: self._decide(sender, approval.approval, True), "no": lambda: self._decide(sender, approval.approval, False)},
            approval.timeout_seconds,
            blocking=True,
        )
        # A question that could not be sent stays unanswered: the call is not run, and the model is told.
        await self._ask(sender, question, [Button(f"{nonce}:yes", "Run it"), Button(f"{nonce}:no", "Don't")])
        return nonce

    def _question(self, sender: str, answers: dict[str, Callable[[], Awaitable[None]]], seconds: float, blocking: bool = False) -> str:
        now = time.time()
        for nonce in [n for n, q in self._questions.items() if q.expires_at < now]:
            del self._questions[nonce]
        while len(self._questions) >= MAX_QUESTIONS:
            del self._questions[min(self._questions, key=lambda n: self._questions[n].asked_at)]
        nonce = secrets.token_urlsafe(18)  # 144 random bits: nobody who has not seen the buttons can name it
        self._questions[nonce] = Question(sender, answers, now, now + seconds, blocking)
        return nonce

    def questions_waiting(self) -> int:
        now = time.time()
        return sum(1 for q in self._questions.values() if q.expires_at >= now)

    async def _choice(self, event: ChoiceIn) -> None:
        nonce, _, answer = event.choice.rpartition(":")
        question = self._questions.get(nonce)
        if question is None or question.expires_at < time.time():
            await self._say(event.sender, "That question is no longer open: it was answered already, its time ran out, or tarsd restarted.")
            return
        # Asked at one of the ids the tap names (the owner, asked for a routine, may have written with another).
        if question.sender not in event.ids and not set(event.ids) & set(self._ids_of.get(question.sender, ())):
            log.warning(
                "%s: %s tapped a button of a question asked of %s: ignored",
                self.title,
                self.channel.who(event.sender),
                self.channel.who(question.sender),
            )
            return
        action = question.answers.get(answer)
        if action is None:
            log.warning("%s: a tap with an unknown answer %r: ignored", self.title, answer[:20])
            return
        del self._questions[nonce]  # one answer per question
        await action()

    async def _decide(self, sender: str, approval: str, approve: bool) -> None:
        final = await self._final(DecideToolCall(id=next(self._ids), approval=approval, approve=approve), sender)
        if not isinstance(final, ToolCallDecided):
            # Never the error's own text: it names the approval id.
            await self._say(
                sender, "Too late: that call no longer waits for an answer (its time ran out, or tarsd restarted). It was not run."
            )

    # ---- sending ----

    async def _say(self, sender: str, markdown: str) -> bool:
        """Send ``markdown`` as one or more messages; False when a send failed (the channel logged why)."""
        if self._stopped():
            raise Stopping
        for part in self.channel.format(markdown):
            try:
                await self.channel.send_text(sender, part)
            except SendFailed:
                return False
        return True

    async def _say_quietly(self, sender: str, markdown: str) -> None:
        with contextlib.suppress(Stopping):
            await self._say(sender, markdown)

    async def _ask(self, sender: str, text: str, buttons: list[Button]) -> bool:
        if self._stopped():
            raise Stopping
        try:
            await self.channel.ask(sender, text, buttons)
        except SendFailed:
            return False  # the channel logged why
        return True

    async def _final(self, request: Message, sender: str) -> Message | None:
        final = None
        async for reply in self.dispatch(request, self._peer(sender)):
            final = reply
        return final

    def _peer(self, sender: str) -> Peer:
        assert self._stopping is not None, "the relay is not started"
        return _ChannelPeer(f"you in {self.title} ({self.channel.who(sender)})", self._stopping)

    def _stopped(self) -> bool:
        return self._stopping is None or self._stopping.done()

    # ---- tars speaks first ----

    def owner(self) -> str | None:
        """Whom a message tars starts goes to, and whom a routine's question is asked of: the first id
        of the allow list, fixed by the config (never whoever wrote last); None when the list names
        nobody that can be written to."""
        return self.addresses[0] if self.addresses else None

    def is_owner(self, sender: str) -> bool:
        """Whether ``sender`` is the owner: by the id they write from, or (WhatsApp) by their other
        id their messages since start carried (the BSUID beside the number)."""
        owner = self.owner()
        return owner is not None and (sender == owner or owner in self._ids_of.get(sender, ()))

    def _window_open(self, to: str) -> bool:
        """Whether the messenger takes free text and buttons for ``to`` now (always, without a window):
        a message from ``to`` within it, under any of their ids known since start."""
        window = self.channel.reply_window
        if window is None:
            return True
        wrote = [at for sender, at in self.seen.last_senders(self.channel.name) if sender == to or to in self._ids_of.get(sender, ())]
        return bool(wrote) and time.time() - max(wrote) < window - WINDOW_MARGIN_SECONDS

    def can_ask(self) -> bool:
        """Whether a question with buttons can reach the owner now: the channel runs, someone can be
        written to, and (WhatsApp) within their reply window, as buttons are free-form messages."""
        if self._stopped():
            return False
        owner = self.owner()
        return owner is not None and self._window_open(owner)

    async def deliver(self, markdown: str) -> None:
        """Send ``markdown``, a message tars starts, to the owner, in the channel's formatting (an
        empty one sends nothing). SendFailed says why it could not be sent and what to do: the caller
        keeps the message and tries again later. Outside the reply window it goes as the channel
        allows then (WhatsApp: the approved template)."""
        if self._stopped():
            raise SendFailed(f"tarsd is stopping (or {self.title} has not started): the message is kept, to be sent at the next try")
        to = self.owner()
        if to is None:
            setting = self.allow_list if self.allow_list.startswith("[") else f"[{self.channel.name}] {self.allow_list}"
            raise SendFailed(f"nobody to send it to in {self.title}: {setting} names nobody tars can write to; put your own id there")
        if not self._window_open(to):
            await self.channel.send_outside_window(to, markdown)
            return
        try:
            for part in self.channel.format(markdown):
                await self.channel.send_text(to, part)
        except WindowClosed:
            # The window closed after all (the person's last message was delivered late, or just now):
            # the whole message goes as the channel allows outside it, though a first part may have
            # arrived already; better twice than cut off.
            await self.channel.send_outside_window(to, markdown)

    async def run_chat(self, request: Chat, peer: Peer) -> Message | None:
        """Run ``request`` (a routine's chat, approvals on) as ``peer`` and return its final reply
        (ChatDone or Error; None when the dispatcher gave none). Each tool call that asks is asked of
        the owner with buttons, as a sender's own chat asks them, and their tap decides it as the
        phone; a call that nobody can be asked about now (no owner, outside the reply window, tarsd
        stopping) is refused at once rather than left to time out. The answer is not sent here: the
        caller delivers it. Questions still open when the turn ends are dropped."""
        asked: list[str] = []
        final: Message | None = None
        try:
            async for reply in self.dispatch(request, peer):
                if isinstance(reply, ToolApproval):
                    nonce = await self._ask_owner(reply, peer)
                    if nonce:
                        asked.append(nonce)
                elif isinstance(reply, (ChatDone, Error)):
                    final = reply
        finally:
            for nonce in asked:
                self._questions.pop(nonce, None)  # the turn is over: its questions are too
        return final

    async def _ask_owner(self, approval: ToolApproval, peer: Peer) -> str:
        """The nonce of the question asked of the owner about ``approval``; "" when it was refused instead."""
        owner = self.owner()
        if owner is not None and self.can_ask():
            with contextlib.suppress(Stopping):  # stopping meanwhile: refused below, as the turn ends anyway
                return await self._ask_approval(owner, approval)
        if self._stopped():
            why = "tarsd is stopping"
        elif owner is None:
            why = f"the allow list names nobody tars can write to in {self.title}"
        else:
            why = f"it is outside {self.title}'s reply window (no message from you within the day)"
        log.info("%s: a routine's call of %s (%s) was refused, not asked: %s", self.title, approval.name, approval.server, why)
        # The caller (a routine's run) has the right to answer its own calls; only ever with a no here.
        async for _ in self.dispatch(DecideToolCall(id=next(self._ids), approval=approval.approval, approve=False), peer):
            pass  # an Error (the call timed out meanwhile) changes nothing: it was not run
        return ""

    # ---- start and stop ----

    def start(self) -> None:
        self._stopping = asyncio.get_running_loop().create_future()
        self.started_at = time.time()
        self._spawn(self._note_unanswered())

    async def _note_unanswered(self) -> None:
        """Tell each sender about their messages taken in before this start and never answered."""
        with contextlib.suppress(Stopping):
            await self._tell_unanswered()

    async def _tell_unanswered(self) -> None:
        for missed in await asyncio.to_thread(self.seen.unanswered, self.channel.name, self.started_at):
            if missed.sender in self.allowed:
                quoted = f"“{missed.preview}”" if missed.preview else "(not text)"
                when = time.strftime("%H:%M", time.localtime(missed.received_at))
                if not await self._say(
                    missed.sender,
                    f"tarsd stopped before answering your message of {when} {quoted}. Send it again if you still want an answer.",
                ):
                    continue  # tried again at the next start
            await asyncio.to_thread(self.seen.mark, self.channel.name, missed.message_id, NOTIFIED)

    async def stop(self) -> None:
        """Chats under way end (cancelled), nothing more is sent; messages not answered yet stay
        recorded as such, for the next start."""
        if self._stopping is not None and not self._stopping.done():
            self._stopping.set_result(None)
        tasks = list(self._tasks)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=STOP_GRACE_SECONDS)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=STOP_GRACE_SECONDS)
