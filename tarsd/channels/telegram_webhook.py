"""Telegram's webhook, at ``/channels/telegram`` on the HTTP listener, for a user who has a public
HTTPS address ([telegram] webhook_url): Telegram posts each update there instead of tars polling
for it. An ASGI app of its own: the listener's Host and Origin checks stand in front of it, its
bearer token does not (Telegram cannot send it): the secret token is this path's authentication.

Telegram sends the secret given to ``setWebhook`` in the ``X-Telegram-Bot-Api-Secret-Token``
header of every update. The raw body is read (at most MAX_BODY_BYTES; one declared larger is
refused unread) and the header compared in constant time before a byte of the body is parsed: a
missing or wrong one gets 401 and is counted, and nothing goes further. The answer is 200 once the
update is recorded (Telegram posts it again on anything else), before any reply is worked on.
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable

from tarsd.channels.channel import Counters
from tarsd.channels.webhook_answers import CLOSE, RefusalLog, answer, error_body
from tarsd.setup.private_files import SecretFile, SecretFileError

log = logging.getLogger(__name__)


SECRET_HEADER = "x-telegram-bot-api-secret-token"
MAX_BODY_BYTES = 512 * 1024  # an update is a few KB: a text is at most 4,096 characters


class TelegramWebhook:
    """``take`` is given each update's JSON object (the channel records and handles it)."""

    def __init__(self, secret: SecretFile, take: Callable[[dict], Awaitable[None]], counters: Counters):
        self.secret = secret
        self.take = take
        self.counters = counters
        self.refusals = RefusalLog(log, "Telegram", "post")

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return
        if scope.get("method") != "POST":
            return await answer(send, 405, error_body("method_not_allowed", "only POST is answered here", "Telegram posts updates"))
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope.get("headers", [])}
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            self.refusals.refused(f"a body declared over {MAX_BODY_BYTES // 1024} KiB", scope)
            return await answer(send, 413, error_body("too_large", "the body is too large", "Telegram's updates are a few KB"), CLOSE)
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > MAX_BODY_BYTES:
                self.refusals.refused(f"a body over {MAX_BODY_BYTES // 1024} KiB", scope)
                return await answer(send, 413, error_body("too_large", "the body is too large", "Telegram's updates are a few KB"), CLOSE)
            if not message.get("more_body", False):
                break
        try:
            secret = self.secret.get()
        except SecretFileError as exc:
            self.counters.failed(str(exc), time.time())
            log.error("Telegram: an update cannot be checked, so it is refused (Telegram posts it again later): %s", exc)
            return await answer(send, 503, error_body("unavailable", str(exc), "fix the file; Telegram posts the update again"))
        presented = headers.get(SECRET_HEADER, "")
        if not presented or not hmac.compare_digest(presented.encode("utf-8", "replace"), secret.encode("utf-8", "replace")):
            self.counters.bad_signatures += 1
            self.refusals.refused("no secret token" if not presented else "a wrong secret token", scope)
            return await answer(
                send, 401, error_body("unauthorized", "the secret token header is missing or wrong", "only Telegram can post here")
            )
        try:
            update = json.loads(bytes(body))
        except (ValueError, RecursionError) as exc:
            log.warning("Telegram: an update with the right secret is not readable JSON (%s): ignored", type(exc).__name__)
            return await answer(send, 400, error_body("bad_request", "the body is not JSON", "Telegram posts JSON"))
        if not isinstance(update, dict) or not isinstance(update.get("update_id"), int):
            return await answer(send, 400, error_body("bad_request", "the body is not an update", "Telegram posts an Update object"))
        try:
            await self.take(update)
        except Exception:
            log.exception("Telegram: an update could not be recorded; answered 500 so that Telegram posts it again")
            return await answer(send, 500, error_body("internal", "the update could not be recorded", "Telegram posts it again"))
        await answer(send, 200, b"ok", content_type=b"text/plain; charset=utf-8")
