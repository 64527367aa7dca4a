"""The Telegram channel, on Telegram's Bot API ([telegram] in the config, docs/telegram.md): tars
asks for its bot's updates by long polling (``getUpdates``: an outgoing HTTPS connection only, so
a Raspberry Pi behind NAT needs no public address), the relay answers them, and replies go out
through the same API as Telegram HTML (telegram_text).

The library is python-telegram-bot 22 (its ``Bot`` client over HTTPX, already tars's HTTP
client): typed updates, the API's errors as exceptions (``RetryAfter`` with Telegram's
``retry_after``, ``InvalidToken`` for a 401), and calls one awaits on tarsd's own loop. Its
``Application``/``Updater`` are not used: they bring a loop, handlers and persistence of their
own, where tars needs each update recorded (``SeenMessages``) before the offset moves on and
one code path with WhatsApp (the relay). aiogram 3 would do as well, but brings aiohttp beside
tarsd's httpx, and its dispatcher the same way.

The token lives in a file of mode 0600 (by default ``telegram_token`` beside the config file),
read again when it changes. It never reaches status, the log or a message: Telegram's error texts,
the library's and httpx's may quote it (an API address is ``/bot<token>/method``), so every text
about the channel passes ``tarsd.setup.telegram.redact`` first, and every line tarsd logs does
too (``_Redacting``, on the log's handlers: the library logs under loggers of its own). Users are
never named in the log: a sender is ``#`` and a short keyed hash of their id. A token Telegram
refuses (401: revoked in @BotFather, or mistyped) stops polling, with the fix in ``tarsctl
status``, until the token file holds another token.

An update the library cannot read (a field missing, a type it does not expect), or an answer that
is not a list of updates at all, never ends the polling: each update is read on its own, one that
cannot be is skipped (its id confirmed, so Telegram does not send it again), said in the log and
in status (the channel's last error), and the next ones are read.

Webhook mode ([telegram] webhook_url, for a user who has a public HTTPS address): Telegram posts
each update to ``/channels/telegram`` on the HTTP listener (telegram_webhook, its secret token in
a file of mode 0600 too) instead of tars polling; everything after the update is the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import hmac
import logging
import re
import secrets
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, LinkPreviewOptions, Message, Update
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, Conflict, Forbidden, InvalidToken, NetworkError, RetryAfter, TelegramError
from telegram.request import HTTPXRequest

from tarsctl.protocol import ChannelStatus
from tarsd.channels.channel import Button, ChoiceIn, Counters, Inbound, OtherIn, SendFailed, TextIn
from tarsd.channels.relay import Relay, ServerDispatch
from tarsd.channels.seen import SeenMessages
from tarsd.channels.telegram_offset import UpdateOffset
from tarsd.channels.telegram_text import MAX_MESSAGE_CHARS, plain, to_html, to_messages
from tarsd.channels.telegram_webhook import TelegramWebhook
from tarsd.config.settings import TelegramConfig
from tarsd.setup.private_files import SecretFile, SecretFileError
from tarsd.setup.telegram import WEBHOOK_PATH, allowed_users, config_problems, redact, secret_paths
from tarsd.store.database import Store

log = logging.getLogger(__name__)

_SECRET_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,256}")  # what Telegram accepts as a webhook's secret_token
TYPING_SECONDS = 4.5  # Telegram shows "typing…" for 5 s, or until the bot's next message
MAX_ATTEMPTS = 5  # for a send, after a 429, a 5xx or a dropped connection
FIRST_DELAY_SECONDS = 0.5
MAX_DELAY_SECONDS = 60.0  # between two polls or sends after a failure, retry_after included
TOKEN_CHECK_SECONDS = 2.0  # how often a refused or missing token file is looked at again (one stat)
UPDATES = ["message", "callback_query"]  # what tars reads: edits, reactions and the rest are never fetched
POLL_READ_SECONDS = 10.0  # a long poll's answer may take this long beyond its timeout
MAX_KEPT_SECRETS = 8  # tokens and secrets read since start, hidden from every text (an old token in a late error)
_KINDS = ("photo", "voice", "video", "video_note", "audio", "document", "sticker", "animation", "location", "contact", "poll")


class _QuietPolls(logging.Filter):
    """httpx logs each request, and the long poll is one: two lines a minute, all day, that say nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or "/getUpdates" not in record.getMessage()


class _Redacting(logging.Filter):
    """On the log's handlers: no line tarsd logs holds a Telegram channel's token or webhook secret,
    whichever logger wrote it (python-telegram-bot logs under loggers of its own, httpx each
    request's address, a traceback an error's text); each channel's secrets, and anything shaped
    like a bot token (``tarsd.setup.telegram.redact``)."""

    def __init__(self) -> None:
        super().__init__()
        self.channels: weakref.WeakSet[Telegram] = weakref.WeakSet()

    def filter(self, record: logging.LogRecord) -> bool:
        known = [secret for channel in list(self.channels) for secret in channel.secrets()]
        text = record.getMessage()
        hidden = redact(text, known)
        if hidden != text:
            record.msg, record.args = hidden, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, known)
        return True


_REDACTING = _Redacting()


def _hide_secrets(channel: Telegram) -> None:
    """The channel's secrets out of every log line from now on (the handlers tarsd logs through)."""
    _REDACTING.channels.add(channel)
    for handler in logging.getLogger().handlers:
        if _REDACTING not in handler.filters:
            handler.addFilter(_REDACTING)
    for name in ("httpx", "httpcore"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _QuietPolls) for f in logger.filters):
            logger.addFilter(_QuietPolls())


class _Bot(Bot):
    """python-telegram-bot's ``Bot``, with getUpdates' answer as the Bot API's JSON: the poller reads
    each update on its own (``Update.de_json``), so one the library cannot read is skipped, not the
    whole answer (``Bot.get_updates`` reads them all at once and raises for one, with no way to tell
    which). ``_post`` is the library's one way to call a method, as its own ``ExtBot`` subclass uses it."""

    async def get_update_objects(self, offset: int, timeout: float) -> object:
        data: dict[str, object] = {"timeout": timeout, "allowed_updates": UPDATES}
        if offset:
            data["offset"] = offset
        return await self._post("getUpdates", data, read_timeout=POLL_READ_SECONDS + timeout)


def _seconds(value: int | float | timedelta) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


class Telegram:
    """The channel (``tarsd.channels.channel.Channel``) and its poller (``start``, ``stop``); in
    webhook mode its webhook instead (``webhook``, an ASGI app for the HTTP listener at ``path``,
    with ``running`` as its lifespan)."""

    name = "telegram"
    title = "Telegram"
    reply_window = None  # a bot may write to a user who started a chat with it at any time

    def __init__(self, settings: TelegramConfig, config_file: Path, store: Store, dispatch: ServerDispatch):
        self.settings = settings
        self.counters = Counters()
        files = {key: SecretFile(*found) for key, found in secret_paths(settings, config_file).items()}
        self.token_file = files["token_file"]
        self.webhook_secret: SecretFile | None = files.get("webhook_secret_file")
        self._kept_secrets: dict[str, None] = {}  # every token and secret read since start, oldest first
        self._secrets_lock = threading.Lock()
        _hide_secrets(self)
        self.webhook: TelegramWebhook | None = None
        self.path = ""  # polling: no path on the listener
        if self.webhook_secret is not None:
            self.webhook = TelegramWebhook(self.webhook_secret, self._take_posted, self.counters)
            self.path = WEBHOOK_PATH
        # A numeric user id is also the user's private chat with the bot: each can be written to, and
        # what tars starts goes to the first, the owner.
        addresses = allowed_users(settings)
        self.allowed = set(addresses)
        self.problems = config_problems(settings)
        self.relay = Relay(
            self,
            self.title,
            dispatch,
            SeenMessages(store),
            self.allowed,
            typing_every=TYPING_SECONDS,
            allow_list="[telegram] allowed_users",
            addresses=addresses,
        )
        self.offsets = UpdateOffset(store)
        self.polling_error = ""  # why polling stopped (a refused token), with the fix
        self._bot: _Bot | None = None
        self._bot_lock = asyncio.Lock()
        self._refused = ""  # the token Telegram refused: not tried again until the file holds another
        self._poller: asyncio.Task | None = None  # the long poll, or in webhook mode the setWebhook call
        self._webhook_deleted = False  # polling: a webhook Telegram still had for the bot was deleted once
        self._hash_key = secrets.token_bytes(16)  # until the token can be read

    def secrets(self) -> list[str]:
        """The token and the webhook secret in their files now, and those read before (a late error
        may quote an old token): what ``redact`` hides."""
        with self._secrets_lock:  # asked by log lines from any thread (a worker's, the loop's)
            for secret in (self.token_file, self.webhook_secret):
                if secret is not None:
                    with contextlib.suppress(SecretFileError):
                        self._kept_secrets[secret.get()] = None
            while len(self._kept_secrets) > MAX_KEPT_SECRETS:
                del self._kept_secrets[next(iter(self._kept_secrets))]
            return list(self._kept_secrets)

    def redact(self, text: str) -> str:
        """``text`` about the channel with its token and secret hidden: every text that reaches status,
        the log or a message passes here (Telegram's error texts may quote the token)."""
        return redact(text, self.secrets())

    # ---- start and stop ----

    def _log_problems(self) -> None:
        for problem in self.problems:
            log.error("Telegram: %s", problem)
        for secret in (self.token_file, self.webhook_secret):
            if secret is not None and (problem := secret.problem()):
                log.error("Telegram: %s", problem)

    async def start(self, poll: bool = True) -> None:
        """Polling mode: the relay (answers, and messages tars starts) and, with ``poll``, the long poll.
        Without it (another machine of the vault polls this bot: tarsd/sync/lease.py) ``start_polling``
        begins it later."""
        self._log_problems()
        self.relay.start()
        if poll:
            self.start_polling()
            log.info("Telegram: polling the Bot API for the bot's messages; %d allowed user(s)", len(self.allowed))
        else:
            log.info(
                "Telegram: not polling (another machine of this vault polls the bot); sending works; %d allowed user(s)", len(self.allowed)
            )

    def start_polling(self) -> None:
        """The long poll, in a task of its own (until ``stop_polling``); messages tars starts are sent without it."""
        if self._poller is None or self._poller.done():
            self._poller = asyncio.create_task(self._poll(), name="telegram-poller")

    async def stop_polling(self) -> None:
        """No more getUpdates (the one under way is cut); what was taken in is still answered."""
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
            self._poller = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Webhook mode: entered when the HTTP listener starts (the webhook is registered with
        Telegram in the background), left when it stops."""
        self._log_problems()
        self.relay.start()
        self._poller = asyncio.create_task(self._register(), name="telegram-set-webhook")
        log.info("Telegram: the webhook is at %s on the HTTP listener; %d allowed user(s)", WEBHOOK_PATH, len(self.allowed))
        try:
            yield
        finally:
            await self.stop()

    async def stop(self) -> None:
        """No more updates are fetched; what is under way ends as the relay's stop says; the client closes."""
        await self.stop_polling()
        await self.relay.stop()
        if self._bot is not None:
            with contextlib.suppress(Exception):
                await self._bot.shutdown()
            self._bot = None

    # ---- the Bot API client ----

    async def _client(self) -> _Bot:
        """The bot for the token in the file now (a new client when the token changed): its getMe
        answered. InvalidToken, SecretFileError, or a network error when it cannot be had."""
        token = self.token_file.get()
        async with self._bot_lock:
            if self._bot is not None and self._bot.token == token:
                return self._bot
            if self._bot is not None:
                with contextlib.suppress(Exception):
                    await self._bot.shutdown()
                self._bot = None
            # Sends and the long poll on separate connection pools, as the library advises: a send never waits behind a poll.
            bot = _Bot(
                token,
                base_url=f"{self.settings.api_url.rstrip('/')}/bot",
                request=HTTPXRequest(connection_pool_size=4, read_timeout=30.0, connect_timeout=10.0),
                get_updates_request=HTTPXRequest(connection_pool_size=1, read_timeout=POLL_READ_SECONDS, connect_timeout=10.0),
            )
            await bot.initialize()  # getMe: proves the token, and names the bot in the log
            log.info("Telegram: the token is the bot @%s's", bot.username)
            self._bot = bot
            return bot

    # ---- polling ----

    async def _poll(self) -> None:
        delay = FIRST_DELAY_SECONDS
        while True:
            try:
                token = self.token_file.get()
            except SecretFileError:
                await asyncio.sleep(TOKEN_CHECK_SECONDS)  # status shows why; a fixed file is read at the next look
                continue
            if token == self._refused:
                await asyncio.sleep(TOKEN_CHECK_SECONDS)  # stopped until the file holds another token: no calls meanwhile
                continue
            try:
                bot = await self._client()
                bot_id = str(bot.id)
                offset = await asyncio.to_thread(self.offsets.get, bot_id)
                answer = await bot.get_update_objects(offset, self.settings.poll_timeout_seconds)
            except InvalidToken as exc:
                self._token_refused(token, exc)
                continue
            except RetryAfter as exc:
                wait = min(MAX_DELAY_SECONDS, _seconds(exc.retry_after))
                self.counters.retries += 1
                log.warning("Telegram: too many requests; polling again in %.0f s, as Telegram asked", wait)
                await asyncio.sleep(wait)
                continue
            except Conflict as exc:
                if not self._webhook_deleted:
                    # A webhook set for the bot (webhook mode before, or another tool): tars is told to poll, so it goes.
                    self._webhook_deleted = True
                    with contextlib.suppress(TelegramError):
                        await bot.delete_webhook()
                        log.warning("Telegram: the bot had a webhook set; deleted it, as [telegram] webhook_url is empty (tars polls)")
                        continue
                self._poll_failed(exc, delay)
                await asyncio.sleep(delay)
                delay = min(MAX_DELAY_SECONDS, delay * 2)
                continue
            except TelegramError as exc:
                self._poll_failed(exc, delay)
                await asyncio.sleep(delay)
                delay = min(MAX_DELAY_SECONDS, delay * 2)
                continue
            except SecretFileError:
                await asyncio.sleep(TOKEN_CHECK_SECONDS)  # the file changed since the look above: status shows why
                continue
            self._refused = self.polling_error = ""
            if await self._take_all(bot, bot_id, answer):
                delay = FIRST_DELAY_SECONDS
            else:
                # Nothing in the answer could be read or confirmed: asked again at once, the same answer would come.
                await asyncio.sleep(delay)
                delay = min(MAX_DELAY_SECONDS, delay * 2)

    async def _take_all(self, bot: _Bot, bot_id: str, answer: object) -> bool:
        """Each update of a getUpdates answer read and taken in on its own, the offset moved past it
        (read or not); False when the answer held updates and none could be confirmed."""
        if not isinstance(answer, list):
            self._unreadable(f"the Bot API answered getUpdates with {type(answer).__name__}, not a list of updates; asking again")
            return False
        confirmed = not answer
        for item in answer:
            update_id = item.get("update_id") if isinstance(item, dict) else None
            if not isinstance(update_id, int) or isinstance(update_id, bool):
                self._unreadable(f"an update without an update_id ({type(item).__name__}) could not be read: skipped")
                continue
            try:
                update = Update.de_json(item, bot)
            except Exception as exc:  # noqa: BLE001 - whatever the library cannot read, one update is skipped, never the poller
                self._unreadable(f"update {update_id} could not be read ({type(exc).__name__}: {exc}): skipped")
            else:
                try:
                    await self._take(bot, update)
                except Exception as exc:
                    # Never the poller's end: the update is skipped (its log says why), the next ones are read.
                    log.exception("Telegram: update %d could not be taken in; skipped", update_id)
                    self.counters.failed(
                        self.redact(f"update {update_id} could not be taken in ({type(exc).__name__}): skipped"), time.time()
                    )
            # After the update is recorded: a restart asks for the next one, and the recorded one is never answered twice.
            await asyncio.to_thread(self.offsets.set, bot_id, update_id + 1)
            confirmed = True
        return confirmed

    def _unreadable(self, why: str) -> None:
        why = self.redact(why)
        self.counters.failed(why, time.time())
        log.warning("Telegram: %s", why)

    def _poll_failed(self, exc: TelegramError, delay: float) -> None:
        why = (
            f"another program is polling this bot's updates, or a webhook is set for it ({exc}): stop the other program, "
            "or delete the webhook (docs/telegram.md)"
            if isinstance(exc, Conflict)
            else f"the Bot API could not be reached or failed ({exc}); trying again in {delay:.1f} s"
        )
        why = self.redact(why)
        self.counters.failed(why, time.time())
        log.warning("Telegram: %s", why)

    def _token_refused(self, token: str, exc: TelegramError) -> None:
        self._refused = token
        doing = "Polling has stopped" if self.webhook is None else "The webhook is not set"
        self.polling_error = self.redact(
            f"Telegram refused the bot token ({exc}): it was revoked in @BotFather or is mistyped. {doing}: "
            f"get the bot's token from @BotFather (/token) and write it to {self.token_file.path} (chmod 600); "
            "tars tries again by itself once the file holds another token"
        )
        self.counters.failed(self.polling_error, time.time())
        log.error("Telegram: %s", self.polling_error)

    # ---- webhook mode ----

    async def _register(self) -> None:
        """setWebhook with the address and the secret token, tried until Telegram takes it."""
        delay = FIRST_DELAY_SECONDS
        url = self.settings.webhook_url
        assert self.webhook_secret is not None  # webhook mode
        while True:
            try:
                token, secret = self.token_file.get(), self.webhook_secret.get()
            except SecretFileError:
                await asyncio.sleep(TOKEN_CHECK_SECONDS)  # status shows why
                continue
            if token == self._refused:
                await asyncio.sleep(TOKEN_CHECK_SECONDS)
                continue
            if not _SECRET_TOKEN.fullmatch(secret):
                self.polling_error = (
                    f"the webhook secret in {self.webhook_secret.path} holds characters Telegram does not accept: "
                    "use 1 to 256 letters, digits, _ and - (e.g. `openssl rand -hex 32`)"
                )
                await asyncio.sleep(TOKEN_CHECK_SECONDS)
                continue
            try:
                bot = await self._client()
                await bot.set_webhook(url, secret_token=secret, allowed_updates=UPDATES)
            except InvalidToken as exc:
                self._token_refused(token, exc)
                continue
            except RetryAfter as exc:
                await asyncio.sleep(min(MAX_DELAY_SECONDS, _seconds(exc.retry_after)))
                continue
            except TelegramError as exc:
                self.polling_error = self.redact(f"Telegram did not take the webhook {url} ({exc}); trying again in {delay:.1f} s")
                self.counters.failed(self.polling_error, time.time())
                log.warning("Telegram: %s", self.polling_error)
                await asyncio.sleep(delay)
                delay = min(MAX_DELAY_SECONDS, delay * 2)
                continue
            self._refused = self.polling_error = ""
            log.info("Telegram: the webhook is set: Telegram posts the bot's updates to %s", url)
            return

    async def _take_posted(self, update: dict) -> None:
        """An update the webhook was given: read and taken in as a polled one is. One the library
        cannot read is skipped (said in the log and status) and answered 200 all the same: posted
        again, it would be just as unreadable."""
        bot = await self._client()
        try:
            parsed = Update.de_json(update, bot)
        except Exception as exc:  # noqa: BLE001 - whatever the library cannot read is one update skipped
            self._unreadable(f"update {update.get('update_id')} could not be read ({type(exc).__name__}: {exc}): skipped")
            return
        if parsed is not None:
            await self._take(bot, parsed)

    async def _take(self, bot: Bot, update: Update) -> None:
        event = self._event(update)
        if event is None:
            return
        query = update.callback_query
        own = query is not None and query.message is not None and query.message.chat.id == query.from_user.id
        if query is not None and own and event.sender in self.allowed:
            # A tap on a question in the user's own chat: the spinner stops and the buttons go, whatever the answer.
            await self._quietly("answer a tap", bot.answer_callback_query(query.id))
            await self._quietly(
                "remove the buttons", bot.edit_message_reply_markup(chat_id=query.message.chat.id, message_id=query.message.message_id)
            )
        await self.relay.take(event)

    def _event(self, update: Update) -> Inbound | None:
        update_id = str(update.update_id)  # unique for the bot: the once-only rule's message id
        query = update.callback_query
        if query is not None:
            return ChoiceIn(str(query.from_user.id), update_id, time.time(), query.data or "")
        message = update.message
        if message is None or message.from_user is None:
            return None
        if message.chat.type != "private":
            # A group the bot was added to: nobody there is answered, not even an allowed user (others would read the answer).
            log.info("Telegram: a message in a %s chat ignored: tars answers only in a private chat with the bot", message.chat.type)
            return None
        sender, at = str(message.from_user.id), message.date.timestamp()
        if message.text is not None:
            return TextIn(sender, update_id, at, message.text)
        return OtherIn(sender, update_id, at, _kind(message), quiet=False)

    async def _quietly(self, what: str, call: Awaitable[object]) -> None:
        try:
            await call
        except TelegramError as exc:
            log.debug("Telegram: could not %s: %s", what, exc)

    # ---- the Channel the relay uses ----

    def format(self, markdown: str) -> list[str]:
        return to_messages(markdown)

    def fits_question(self, text: str) -> bool:
        return len(to_html(text)) <= MAX_MESSAGE_CHARS

    async def send_text(self, to: str, text: str) -> None:
        await self._send(to, text, None)

    async def ask(self, to: str, text: str, buttons: list[Button]) -> None:
        # Callback data is at most 64 bytes: the relay's ids are 24 characters and an answer.
        keyboard = InlineKeyboardMarkup([[InlineKeyboardButton(b.title, callback_data=b.id) for b in buttons]])
        await self._send(to, to_html(text)[:MAX_MESSAGE_CHARS], keyboard)

    async def send_outside_window(self, to: str, markdown: str) -> None:
        # Telegram has no window (reply_window is None): the relay never asks, and this is any message.
        for part in self.format(markdown):
            await self.send_text(to, part)

    async def typing(self, to: str, message_id: str) -> None:
        try:
            bot = await self._client()
            await bot.send_chat_action(chat_id=int(to), action=ChatAction.TYPING)
        except (TelegramError, SecretFileError) as exc:
            log.debug("Telegram: no typing indicator for %s: %s", self.who(to), exc)

    async def _send(self, to: str, text: str, keyboard: InlineKeyboardMarkup | None) -> None:
        try:
            await self._retried(lambda bot: self._send_once(bot, to, text, keyboard))
        except (TelegramError, SecretFileError) as exc:
            self.counters.send_failures += 1
            if isinstance(exc, InvalidToken):
                why = f"Telegram refused the bot token ({exc}): get it from @BotFather (/token) and write it to {self.token_file.path}"
            elif isinstance(exc, Forbidden):
                why = f"Telegram refused a message to {self.who(to)} ({exc}): they blocked the bot, or never started a chat with it"
            elif isinstance(exc, SecretFileError):
                why = f"no message can be sent: {exc}"
            elif isinstance(exc, NetworkError) and not isinstance(exc, BadRequest):
                why = f"a message to {self.who(to)} could not reach the Bot API: {exc}; check the network"
            else:
                why = f"Telegram refused a message to {self.who(to)}: {exc}"
            why = self.redact(why)  # it reaches status, the log, and (a delivery's error) the inbox
            self.counters.failed(why, time.time())
            log.error("Telegram: %s", why)
            raise SendFailed(why) from None
        self.counters.sent += 1

    async def _send_once(self, bot: Bot, to: str, text: str, keyboard: InlineKeyboardMarkup | None) -> Message:
        options = LinkPreviewOptions(is_disabled=True)
        try:
            return await bot.send_message(int(to), text, parse_mode=ParseMode.HTML, reply_markup=keyboard, link_preview_options=options)
        except BadRequest as exc:
            if "can't parse entities" not in str(exc).lower():
                raise
            # Markup Telegram does not take (tags the model's markdown crossed): the same words, unformatted.
            log.warning("Telegram: a reply's formatting was refused (%s); sent as plain text", exc)
            return await bot.send_message(int(to), plain(text), reply_markup=keyboard, link_preview_options=options)

    async def _retried(self, call: Callable[[Bot], Awaitable[object]]) -> object:
        """``call`` with the bot, tried again after a 429 (after Telegram's retry_after), a 5xx or a
        dropped connection, up to MAX_ATTEMPTS times; any other refusal at once."""
        delay = FIRST_DELAY_SECONDS
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                return await call(await self._client())
            except RetryAfter as exc:
                wait, error = min(MAX_DELAY_SECONDS, _seconds(exc.retry_after)), exc
            except BadRequest:
                raise  # a NetworkError to the library, but a refusal: trying again changes nothing
            except NetworkError as exc:
                wait, error = delay, exc
            if attempt == MAX_ATTEMPTS:
                raise error
            self.counters.retries += 1
            log.info("Telegram: the Bot API answered %s; trying again in %.1f s (attempt %d of %d)", error, wait, attempt + 1, MAX_ATTEMPTS)
            await asyncio.sleep(wait)
            delay = min(MAX_DELAY_SECONDS, delay * 2)
        raise AssertionError("unreachable")  # the loop returns or raises

    def who(self, sender: str) -> str:
        """``#`` and 8 hex digits of an HMAC of the user id keyed with the bot token: the same for
        the same user in every line, and no way back to the id without the token."""
        with contextlib.suppress(SecretFileError):
            self._hash_key = self.token_file.get().encode()
        return "#" + hmac.new(self._hash_key, sender.encode(), hashlib.sha256).hexdigest()[:8]

    # ---- status ----

    def status(self) -> ChannelStatus:
        files = [secret for secret in (self.token_file, self.webhook_secret) if secret is not None]
        problems = [*self.problems, *(secret.problem() for secret in files), self.polling_error]
        counters = dataclasses.asdict(self.counters)  # Counters' fields are ChannelStatus's, by name
        counters["last_error"] = self.redact(counters["last_error"])  # said redacted already: and again, whatever set it
        return ChannelStatus(
            name=self.name,
            title="Telegram",
            path=self.path,  # "" when tars polls the Bot API
            receives="" if self.path else "long polling",
            error=self.redact("; ".join(p for p in problems if p)),
            allowed_senders=len(self.allowed),
            **counters,
            questions_waiting=self.relay.questions_waiting(),
        )


def _kind(message: Message) -> str:
    for kind in _KINDS:
        if getattr(message, kind, None):
            return kind.replace("_", " ")
    return "a message that is not text"
