"""The WhatsApp channel, on Meta's official WhatsApp Business Cloud API ([whatsapp] in the config,
docs/whatsapp.md): the webhook (whatsapp_webhook) takes Meta's deliveries in, the relay answers
them, and replies go out through the Graph API (whatsapp_graph) in WhatsApp's formatting
(whatsapp_text).

Its three secrets are files of mode 0600 (by default beside the config file): the verify token
(what Meta's dashboard sends back when the webhook is set up), the app secret (which signs every
delivery) and the access token (which sends the replies). Numbers and business-scoped user ids
(BSUIDs) are never written to the log: a sender is ``#`` and a short keyed hash of their id.

A reply WhatsApp refuses because the 24-hour window has closed (more than a day since the user's
last message: free text is allowed only within it) is said in the log and in ``tarsctl status``,
whether the API refuses the send itself or reports the failure later in a status delivery. A
message tars starts (a routine's, a reminder) outside the window goes as the approved template of
[whatsapp] template, or not at all (docs/whatsapp.md#templates).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path

from tarsctl.protocol import ChannelStatus
from tarsd.channels.channel import Button, Counters, SendFailed, WindowClosed
from tarsd.channels.relay import Relay, ServerDispatch
from tarsd.channels.seen import SeenMessages
from tarsd.channels.whatsapp_graph import UNKNOWN_TEMPLATE_CODE, WINDOW_CLOSED_CODE, Graph, GraphError
from tarsd.channels.whatsapp_text import MAX_MESSAGE_CHARS, split, template_parameter, to_whatsapp
from tarsd.channels.whatsapp_webhook import WEBHOOK_PATH, Delivery, Webhook
from tarsd.config.settings import WhatsAppConfig
from tarsd.setup.private_files import SecretFile, SecretFileError
from tarsd.setup.whatsapp import addresses, allowed_senders, config_problems, secret_paths
from tarsd.store.database import Store

log = logging.getLogger(__name__)

MAX_QUESTION_CHARS = 1024  # an interactive message's body
MAX_BUTTON_TITLE_CHARS = 20
REPLY_WINDOW_SECONDS = 24 * 3600.0  # free text (and buttons) only within a day of the user's last message


class WhatsApp:
    """The channel (``tarsd.channels.channel.Channel``) and its webhook (``webhook``, an ASGI app
    for the HTTP listener, with ``running`` as its lifespan)."""

    name = "whatsapp"
    title = "WhatsApp"
    path = WEBHOOK_PATH
    reply_window = REPLY_WINDOW_SECONDS

    def __init__(self, settings: WhatsAppConfig, config_file: Path, store: Store, dispatch: ServerDispatch):
        self.settings = settings
        self.counters = Counters()
        self.secrets = {key: SecretFile(*found) for key, found in secret_paths(settings, config_file).items()}
        # Phone numbers and BSUIDs: a message is answered when either id it carries is here.
        self.allowed = allowed_senders(settings.allowed_senders)[0]
        self.problems = config_problems(settings)
        self._hash_key = secrets.token_bytes(16)  # until the app secret can be read
        self.graph = Graph(settings.graph_url, settings.phone_number_id, self.secrets["access_token_file"].get, self._retried)
        # The list's ids in the order written (a number or a BSUID: either can be sent to): what tars
        # starts goes to the first, the owner.
        self.relay = Relay(
            self,
            self.title,
            dispatch,
            SeenMessages(store),
            self.allowed,
            allow_list="[whatsapp] allowed_senders",
            addresses=addresses(settings.allowed_senders),
        )
        self.webhook = Webhook(
            self.secrets["verify_token_file"], self.secrets["app_secret_file"], settings.phone_number_id, self._take, self.counters
        )

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Entered when the HTTP listener starts, left when it stops."""
        for problem in self.problems:
            log.error("WhatsApp: %s", problem)
        for secret in self.secrets.values():
            if problem := secret.problem():
                log.error("WhatsApp: %s", problem)
        self.relay.start()
        log.info(
            "WhatsApp: the webhook is at %s on the HTTP listener; %d allowed sender(s)",
            WEBHOOK_PATH,
            len(self.allowed),
        )
        try:
            yield
        finally:
            await self.relay.stop()
            await self.graph.aclose()

    # ---- what Meta delivers ----

    async def _take(self, delivery: Delivery) -> None:
        for problem in delivery.problems:
            log.warning("WhatsApp: part of a delivery was not read: %s", problem)
        if delivery.elsewhere:
            log.info("WhatsApp: %d change(s) for another business number of the app ignored", delivery.elsewhere)
        for status in delivery.statuses:
            if status.status == "failed":
                self._failed_later(status.recipient, status.errors)
        for event in delivery.events:
            await self.relay.take(event)

    def _failed_later(self, recipient: str, errors: list[tuple[int | None, str]]) -> None:
        """A message the API took but could not deliver, as a status delivery reports it."""
        now = time.time()
        for code, text in errors or [(None, "no reason given")]:
            self.counters.send_failures += 1
            if code == WINDOW_CLOSED_CODE:
                why = self._window_closed(recipient, f"(#{code}) {text}")
            else:
                # Not the message's id: a wamid holds the recipient's number, base64-encoded.
                why = f"WhatsApp could not deliver a message to {self.who(recipient)}: (#{code}) {text}"
            self.counters.failed(why, now)
            log.error("%s", why)

    def _window_closed(self, recipient: str, error: str) -> str:
        self.counters.window_closed += 1
        self.counters.window_closed_at = time.time()
        return (
            f"WhatsApp refused a reply to {self.who(recipient)} outside the 24-hour window ({error}): free text is allowed only "
            "within 24 hours of the user's last message; a message from that phone opens the window again"
        )

    # ---- the Channel the relay uses ----

    def format(self, markdown: str) -> list[str]:
        return split(to_whatsapp(markdown), MAX_MESSAGE_CHARS)

    def fits_question(self, text: str) -> bool:
        return len(to_whatsapp(text)) <= MAX_QUESTION_CHARS

    async def send_text(self, to: str, text: str) -> None:
        await self._send(to, self.graph.send_text(to, text))

    async def ask(self, to: str, text: str, buttons: list[Button]) -> None:
        body = to_whatsapp(text)[:MAX_QUESTION_CHARS]
        await self._send(to, self.graph.send_buttons(to, body, [(b.id, b.title[:MAX_BUTTON_TITLE_CHARS]) for b in buttons]))

    async def send_outside_window(self, to: str, markdown: str) -> None:
        """The one message WhatsApp lets a business start outside the 24-hour window: the approved
        template of [whatsapp] template, its variable the message flattened to one line."""
        template, language = self.settings.template, self.settings.template_language
        if not template:
            self.counters.send_failures += 1
            self.counters.window_closed += 1
            self.counters.window_closed_at = now = time.time()
            why = (
                f"a message tars started for {self.who(to)} was not sent: it is outside WhatsApp's 24-hour window (a day or more "
                "since their last message, or none yet) and no [whatsapp] template is set: see docs/whatsapp.md#templates to "
                "set one up; a message from that phone opens the window again"
            )
            self.counters.failed(why, now)
            log.error("WhatsApp: %s", why)
            raise SendFailed(why)
        text = template_parameter(to_whatsapp(markdown))
        await self._send(to, self.graph.send_template(to, template, language, text))

    async def typing(self, to: str, message_id: str) -> None:
        try:
            await self.graph.mark_read(message_id)
        except (GraphError, SecretFileError) as exc:
            log.debug("WhatsApp: no read mark and typing indicator for %s: %s", self.who(to), exc)

    async def _send(self, to: str, sending) -> None:
        try:
            await sending
        except (GraphError, SecretFileError) as exc:
            self.counters.send_failures += 1
            if isinstance(exc, GraphError) and exc.window_closed:
                why = self._window_closed(to, str(exc))
            elif isinstance(exc, GraphError) and exc.code == UNKNOWN_TEMPLATE_CODE:
                template = f"{self.settings.template!r} in {self.settings.template_language!r}"
                why = (
                    f"WhatsApp knows no approved template {template} ({exc}): set [whatsapp] template and template_language "
                    "to an approved template's name and language in WhatsApp Manager (docs/whatsapp.md#templates)"
                )
            elif isinstance(exc, GraphError) and exc.template_refused:
                why = (
                    f"WhatsApp refused the template message to {self.who(to)} ({exc}): the template in WhatsApp Manager must be "
                    "approved, active, and have exactly one body variable {{1}} (docs/whatsapp.md#templates)"
                )
            elif isinstance(exc, GraphError) and exc.token_refused:
                where = self.secrets["access_token_file"].path
                why = f"the Graph API refused the access token ({exc}): put a valid permanent token in {where}"
            elif isinstance(exc, GraphError) and exc.status == 0:
                # No answer at all (DNS, no network, a timeout): nobody refused anything.
                why = f"a message to {self.who(to)} could not reach the Graph API: {exc.message or 'no answer'}; check the network"
            elif isinstance(exc, GraphError):
                why = f"WhatsApp refused a message to {self.who(to)}: {exc}"
            else:
                why = f"no message can be sent: {exc}"
            self.counters.failed(why, time.time())
            log.error("WhatsApp: %s", why)
            # The window's own refusal is told apart: a message tars starts can still go as the template.
            raise (WindowClosed if isinstance(exc, GraphError) and exc.window_closed else SendFailed)(why) from None
        self.counters.sent += 1

    def _retried(self, error: GraphError) -> None:
        self.counters.retries += 1

    def who(self, sender: str) -> str:
        """``#`` and 8 hex digits of an HMAC of the id (a number or a BSUID) keyed with the app
        secret: the same for the same id in every line, and no way back to it without the secret."""
        with contextlib.suppress(SecretFileError):
            self._hash_key = self.secrets["app_secret_file"].get().encode()
        return "#" + hmac.new(self._hash_key, sender.encode(), hashlib.sha256).hexdigest()[:8]

    # ---- status ----

    def status(self) -> ChannelStatus:
        problems = list(self.problems) + [p for p in (secret.problem() for secret in self.secrets.values()) if p]
        return ChannelStatus(
            name=self.name,
            title=self.title,
            path=WEBHOOK_PATH,
            error="; ".join(problems),
            allowed_senders=len(self.allowed),
            **dataclasses.asdict(self.counters),  # Counters' fields are ChannelStatus's, by name
            questions_waiting=self.relay.questions_waiting(),
            template=self.settings.template,
        )
