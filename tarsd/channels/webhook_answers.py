"""What a messenger's webhook (WhatsApp's, Telegram's) answers over ASGI, and how it logs the posts
it refuses: an error body in the doors' shape, a whole response in two sends, and at most one log
line a minute about refused posts (a flood of bad signatures must not flood the journal too)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

REFUSAL_LOG_SECONDS = 60.0  # at most one log line a minute about refused posts
# With an answer given before the body was read (413): the door closes such a connection right after
# it (tarsd/serve/http.py), so the answer says so, and no client sends its next request on it.
CLOSE = [(b"connection", b"close")]


def error_body(code: str, message: str, hint: str) -> bytes:
    """An error as every door writes one: {type: error, code, message, hint}."""
    return json.dumps({"type": "error", "code": code, "message": message, "hint": hint}).encode()


async def answer(
    send: Callable, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None, content_type: bytes = b"application/json"
) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class RefusalLog:
    """Logs refused posts to ``log`` as "<title>: refused a <what> from <client> with <why>", at most
    once a minute, counting the ones in between."""

    def __init__(self, log: logging.Logger, title: str, what: str):
        self.log, self.title, self.what = log, title, what
        self._logged_at = float("-inf")
        self._unlogged = 0

    def refused(self, why: str, scope: dict) -> None:
        self._unlogged += 1
        now = time.monotonic()
        if now - self._logged_at < REFUSAL_LOG_SECONDS:
            return
        self._logged_at = now
        client = (scope.get("client") or ("unknown", 0))[0]
        more = f" ({self._unlogged - 1} more since the last line)" if self._unlogged > 1 else ""
        self._unlogged = 0
        self.log.warning(
            "%s: refused a %s from %s with %s%s: nothing of it was read (at most one such line a minute)",
            self.title,
            self.what,
            client,
            why,
            more,
        )
