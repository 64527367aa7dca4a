"""Meta's webhook for WhatsApp, at ``/channels/whatsapp`` on the HTTP listener: an ASGI app of its
own (the listener's Host and Origin checks stand in front of it; its bearer token does not, as
Meta cannot send it: the signature is this path's authentication).

- ``GET``: Meta's verification when the webhook is set up in its dashboard: ``hub.challenge`` is
  answered only when ``hub.mode`` is ``subscribe`` and ``hub.verify_token`` is the verify token
  (compared in constant time); anything else gets 403.
- ``POST``: a delivery. The raw body is read (at most MAX_BODY_BYTES; one declared larger is refused
  unread; the listener reads it under a deadline and a minimum pace, http_guard) and its ``X-Hub-Signature-256``
  header (``sha256=`` and the hex HMAC-SHA256 of the body with the app secret) compared in constant
  time before a byte of it is parsed: a missing or wrong signature gets 401 and is counted, and
  nothing of the body goes further. A signed body is then read as Meta's payload (``parse``: every
  entry, change, message and status of a batch, whatever their number) and handed on; the answer
  is 200 as soon as the messages are recorded, before any reply is worked on (Meta delivers again
  when it gets no 200 in time).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from tarsd.channels.channel import ChoiceIn, Counters, IdChanged, Inbound, OtherIn, TextIn
from tarsd.channels.webhook_answers import CLOSE, RefusalLog, answer, error_body
from tarsd.setup.private_files import SecretFile, SecretFileError

log = logging.getLogger(__name__)

WEBHOOK_PATH = "/channels/whatsapp"
# A delivery is small: a text is at most 4,096 characters (25 KB as JSON with every one of them
# escaped), media come as ids to fetch, not bytes, and a delivery carries the few messages and
# statuses of one number. 512 KiB holds twenty of the largest texts; a body declared larger is
# refused (413) before a byte of it is read, so nobody can make tarsd read megabytes unsigned.
MAX_BODY_BYTES = 512 * 1024
MAX_CHALLENGE_CHARS = 1000
SIGNATURE_HEADER_NAME = "x-hub-signature-256"
SIGNATURE_PREFIX = "sha256="
# Message types answered with a polite "text only" (the rest of what WhatsApp can send).
QUIET_KINDS = frozenset({"reaction"})  # a reaction is not a message to answer
ID_CHANGES = frozenset({"user_changed_user_id", "user_changed_number"})  # system messages: a user's ids changed


def signature(secret: bytes, body: bytes) -> str:
    """The X-Hub-Signature-256 value Meta sends with ``body``."""
    return SIGNATURE_PREFIX + hmac.new(secret, body, hashlib.sha256).hexdigest()


def signature_ok(secret: bytes, body: bytes, presented: str) -> bool:
    """Whether ``presented`` (the header's value) signs ``body``: compared in constant time."""
    expected = signature(secret, body).encode()
    return hmac.compare_digest(expected, presented.strip().lower().encode("utf-8", errors="replace"))


@dataclass(frozen=True, slots=True)
class StatusNote:
    """What Meta says of a message tars sent: sent, delivered, read, or failed (with its errors)."""

    message_id: str
    status: str
    recipient: str
    errors: list[tuple[int | None, str]] = field(default_factory=list)  # (code, title: details)


@dataclass(slots=True)
class Delivery:
    """One webhook payload, read: the messages people sent, the statuses of what tars sent, and
    what could not be read (logged, never a failure: the rest of a batch still counts)."""

    events: list[Inbound] = field(default_factory=list)
    statuses: list[StatusNote] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    elsewhere: int = 0  # changes for another business number of the same app: not tars's


def _items(value: Any) -> list:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def parse(payload: Any, phone_number_id: str) -> Delivery:
    """Meta's payload (``{"object": "whatsapp_business_account", "entry": [{"changes": [{"field":
    "messages", "value": {...}}]}]}``) as a Delivery. Every list is walked on its own: a batch may hold
    several entries, changes, messages and statuses, in any numbers, and nothing assumes two lists
    are as long as each other."""
    found = Delivery()
    if not isinstance(payload, dict) or payload.get("object") != "whatsapp_business_account":
        found.problems.append("not a WhatsApp Business Account payload")
        return found
    for entry in _items(payload.get("entry")):
        for change in _items(entry.get("changes") if isinstance(entry, dict) else None):
            if not isinstance(change, dict) or change.get("field") != "messages" or not isinstance(change.get("value"), dict):
                found.problems.append(
                    f"a change of a field tars does not use: {str(change.get('field') if isinstance(change, dict) else '?')[:40]}"
                )
                continue
            value = change["value"]
            metadata = value.get("metadata")
            if not isinstance(metadata, dict) or _text(metadata.get("phone_number_id")) != phone_number_id:
                found.elsewhere += 1
                continue
            for message in _items(value.get("messages")):
                event = _message(message)
                if isinstance(event, str):
                    found.problems.append(event)
                else:
                    found.events.append(event)
            for status in _items(value.get("statuses")):
                if isinstance(status, dict):
                    found.statuses.append(
                        StatusNote(
                            _text(status.get("id")),
                            _text(status.get("status")),
                            # A send to a BSUID is reported with recipient_user_id alone.
                            _text(status.get("recipient_id")) or _text(status.get("recipient_user_id")),
                            _errors(status),
                        )
                    )
            for code, text in _errors(value):
                found.problems.append(f"WhatsApp reports an error: ({code}) {text}")
    return found


def _errors(holder: dict) -> list[tuple[int | None, str]]:
    found = []
    for error in _items(holder.get("errors")):
        if isinstance(error, dict):
            code = error.get("code")
            data = error.get("error_data")
            details = _text(data.get("details")) if isinstance(data, dict) else ""
            title = _text(error.get("title")) or _text(error.get("message"))
            found.append((code if isinstance(code, int) else None, f"{title}: {details}" if details else title))
    return found


def _message(message: Any) -> Inbound | str:
    """A message as the relay takes it, or why it cannot be read.

    Its sender is named by ``from`` (their phone number: absent for a user with a WhatsApp
    username whose number Meta does not share) and ``from_user_id`` (their BSUID, in every message
    since April 2026). Replies go to the number when there is one, as Meta recommends, else to the
    BSUID; the message is the user's when either is allowed."""
    if not isinstance(message, dict):
        return "a message that is not an object"
    phone, bsuid = _text(message.get("from")), _text(message.get("from_user_id"))
    message_id, kind = _text(message.get("id")), _text(message.get("type"))
    sender, also = phone or bsuid, (bsuid,) if phone and bsuid and bsuid != phone else ()
    if kind == "system":
        return _system(message, message_id, (phone, bsuid))
    if not sender or not message_id:
        return f"a {kind or 'message'} without its sender or id"
    at = _sent_at(message)
    if kind == "text":
        body = message.get("text")
        text = _text(body.get("body")) if isinstance(body, dict) else ""
        if not text.strip():
            return OtherIn(sender, message_id, at, "empty text", also=also)
        return TextIn(sender, message_id, at, text, also=also)
    if kind == "interactive":
        interactive = message.get("interactive")
        if isinstance(interactive, dict):
            reply = interactive.get(_text(interactive.get("type")))  # button_reply or list_reply
            if isinstance(reply, dict) and _text(reply.get("id")):
                return ChoiceIn(sender, message_id, at, _text(reply.get("id")), also=also)
        return OtherIn(sender, message_id, at, "interactive", also=also)
    return OtherIn(sender, message_id, at, kind or "unknown", quiet=kind in QUIET_KINDS, also=also)


def _sent_at(message: dict) -> float:
    try:
        at = float(_text(message.get("timestamp")) or "nan")
    except ValueError:
        at = float("nan")
    return time.time() if at != at else at  # no usable timestamp: now


def _system(message: dict, message_id: str, sent_by: tuple[str, str]) -> Inbound | str:
    """A system message (Meta's system messages webhook reference, docs/whatsapp.md): a user's id
    changed. ``user_changed_user_id``: a new BSUID (``system.user_id``; the old one in
    ``system.previous_user_id``), no number; ``user_changed_number``: a new number
    (``system.wa_id``) and with it a new BSUID. The old ids are also the message's ``from`` and
    ``from_user_id`` when it carries them. Any other system message is not tars's business."""
    system = message.get("system")
    change = _text(system.get("type")) if isinstance(system, dict) else ""
    if not isinstance(system, dict) or change not in ID_CHANGES:
        return OtherIn(sent_by[0] or sent_by[1] or "unknown", message_id or "system", _sent_at(message), "system", quiet=True)
    new = tuple(dict.fromkeys(i for i in (_text(system.get("wa_id")), _text(system.get("user_id"))) if i))
    old = tuple(dict.fromkeys(i for i in (*sent_by, _text(system.get("previous_user_id"))) if i))
    if not message_id or not old or not new:
        return f"a {change} system message without its old ids, its new ones, or its id"
    return IdChanged(old[0], message_id, _sent_at(message), new, new[0], also=old[1:])


class Webhook:
    """The ASGI app. ``take`` gets each signed delivery, read; it returns once the delivery's
    messages are recorded (an exception there answers 500, so Meta delivers it again)."""

    def __init__(
        self,
        verify_token: SecretFile,
        app_secret: SecretFile,
        phone_number_id: str,
        take: Callable[[Delivery], Awaitable[None]],
        counters: Counters,
    ):
        self.verify_token = verify_token
        self.app_secret = app_secret
        self.phone_number_id = phone_number_id
        self.take = take
        self.counters = counters
        self.refusals = RefusalLog(log, "WhatsApp", "delivery")

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return
        method = scope.get("method", "")
        if method == "GET":
            return await self._verify(scope, send)
        if method == "POST":
            return await self._deliver(scope, receive, send)
        await answer(
            send,
            405,
            error_body("method_not_allowed", f"{method} is not answered here", "Meta sends GET and POST"),
            [(b"allow", b"GET, POST")],
        )

    async def _verify(self, scope: dict, send: Callable) -> None:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        mode = query.get("hub.mode", [""])[0]
        presented = query.get("hub.verify_token", [""])[0]
        challenge = query.get("hub.challenge", [""])[0]
        try:
            token = self.verify_token.get()
        except SecretFileError as exc:
            log.error("WhatsApp: Meta's verification request cannot be answered: %s", exc)
            return await answer(
                send, 503, error_body("unavailable", str(exc), "fix the file, then verify the webhook again in Meta's dashboard")
            )
        token_ok = hmac.compare_digest(presented.encode("utf-8", errors="replace"), token.encode("utf-8", errors="replace"))
        if mode != "subscribe" or not token_ok or not challenge or len(challenge) > MAX_CHALLENGE_CHARS:
            log.warning(
                "WhatsApp: refused a verification request (%s)",
                "wrong mode" if mode != "subscribe" else "wrong verify token" if not token_ok else "no usable challenge",
            )
            return await answer(
                send,
                403,
                error_body(
                    "forbidden",
                    "verification refused",
                    "the verify token in Meta's dashboard must be the one in [whatsapp] verify_token_file",
                ),
            )
        log.info("WhatsApp: Meta verified the webhook")
        await answer(send, 200, challenge.encode(), content_type=b"text/plain; charset=utf-8")

    async def _deliver(self, scope: dict, receive: Callable, send: Callable) -> None:
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope.get("headers", [])}
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            self.refusals.refused(f"a body declared over {MAX_BODY_BYTES // 1024} KiB", scope)
            return await answer(send, 413, _too_large(), CLOSE)
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # gone before the body arrived: nobody to answer, nothing taken
            body += message.get("body", b"")
            if len(body) > MAX_BODY_BYTES:
                self.refusals.refused(f"a body over {MAX_BODY_BYTES // 1024} KiB", scope)
                return await answer(send, 413, _too_large(), CLOSE)
            if not message.get("more_body", False):
                break
        try:
            secret = self.app_secret.get()
        except SecretFileError as exc:
            self.counters.failed(str(exc), time.time())
            log.error("WhatsApp: a delivery cannot be checked, so it is refused (Meta delivers it again later): %s", exc)
            return await answer(send, 503, error_body("unavailable", str(exc), "fix the file; Meta delivers the message again"))
        presented = headers.get(SIGNATURE_HEADER_NAME, "")
        if not presented or not signature_ok(secret.encode("utf-8"), bytes(body), presented):
            self.counters.bad_signatures += 1
            self.refusals.refused("no signature" if not presented else "a wrong signature", scope)
            return await answer(
                send,
                401,
                error_body(
                    "unauthorized",
                    "the X-Hub-Signature-256 header is missing or wrong",
                    "only Meta, signing with the app secret, can deliver here",
                ),
            )
        # Signed: from here on the body is Meta's.
        try:
            payload = json.loads(bytes(body))
        except ValueError as exc:
            log.warning("WhatsApp: a signed delivery is not JSON (%s): ignored", exc)
            return await answer(send, 400, error_body("bad_request", f"the body is not JSON: {exc}", "Meta sends JSON"))
        except RecursionError:
            # Python's parser gives up on nesting deeper than its recursion limit; Meta's payloads
            # are a few levels deep, so this one is not Meta's shape, signed or not.
            log.warning("WhatsApp: a signed delivery is JSON nested too deep to read: ignored")
            return await answer(
                send, 400, error_body("bad_request", "the body is JSON nested too deep to read", "Meta's payloads are a few levels deep")
            )
        delivery = parse(payload, self.phone_number_id)
        try:
            await self.take(delivery)
        except Exception:
            log.exception("WhatsApp: a delivery could not be recorded; answered 500 so that Meta delivers it again")
            return await answer(send, 500, error_body("internal", "the delivery could not be recorded", "Meta delivers it again"))
        await answer(send, 200, b"ok", content_type=b"text/plain; charset=utf-8")


def _too_large() -> bytes:
    return error_body(
        "too_large", f"a delivery over {MAX_BODY_BYTES // 1024} KiB is not read", "Meta's deliveries are a few KB: this is not one"
    )
