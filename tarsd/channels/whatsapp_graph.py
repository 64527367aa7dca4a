"""Meta's Graph API, as the WhatsApp channel uses it: ``POST /{phone-number-id}/messages`` to send
a text, a question with reply buttons, a template message, or a read mark with a typing indicator; over httpx, with
the access token from its private file. A message goes to a phone number (``to``) or, for a user
known only by their business-scoped user id, to that BSUID (``recipient``).

A send that meets a 429, a 5xx, one of Meta's throttling codes or a dropped connection is tried
again after a back-off (0.5 s doubling, or the server's Retry-After), up to MAX_ATTEMPTS times;
any other refusal is given up at once with the API's own error text (``GraphError``), which the
channel logs. Meta recommends acting on its error ``code`` rather than the HTTP status: both are
read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import httpx

from tarsd.setup.whatsapp import is_bsuid

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 6
FIRST_DELAY_SECONDS = 0.5
MAX_DELAY_SECONDS = 30.0  # between two attempts, Retry-After included
TIMEOUT = httpx.Timeout(30.0, connect=10.0)
# Meta's codes for "too many, try later": the app's call rate (4), the account's (80007), the
# phone number's throughput (130429), too many messages to one user (131056).
THROTTLED_CODES = frozenset({4, 80007, 130429, 131056})
WINDOW_CLOSED_CODE = 131047  # more than 24 hours since the user's last message: free text refused
TOKEN_CODES = frozenset({0, 190})  # the access token is wrong or expired
# Meta's template errors: 132000 (parameters do not match), 132001 (no such template in that
# language), 132005 (too long once filled), 132007 (policy), 132012 (parameter format), 132015
# and 132016 (paused, disabled), 132018 (a parameter with a line break, a tab or 5+ spaces).
TEMPLATE_CODES = range(132000, 133000)
UNKNOWN_TEMPLATE_CODE = 132001


class GraphError(Exception):
    """A send the API refused (or that never got an answer), as the API described it."""

    def __init__(self, status: int, code: int | None = None, message: str = "", details: str = "", trace: str = ""):
        super().__init__(message)
        self.status = status  # HTTP status; 0 when no answer came
        self.code = code  # Meta's error code
        self.message = message
        self.details = details  # error_data.details: what to fix, in Meta's words
        self.trace = trace  # fbtrace_id, for Meta's support

    def __str__(self) -> str:
        text = self.message or "no answer"
        code = f"(#{self.code}) " if self.code is not None and not text.startswith(f"(#{self.code})") else ""  # Meta's often says it
        details = f": {self.details}" if self.details and self.details not in text else ""
        where = f"HTTP {self.status}" if self.status else "no HTTP answer"
        trace = f", fbtrace_id {self.trace}" if self.trace else ""
        return f"{code}{text}{details} ({where}{trace})"

    @property
    def retryable(self) -> bool:
        return self.status == 0 or self.status == 429 or self.status >= 500 or self.code in THROTTLED_CODES

    @property
    def window_closed(self) -> bool:
        return self.code == WINDOW_CLOSED_CODE

    @property
    def template_refused(self) -> bool:
        return self.code in TEMPLATE_CODES

    @property
    def token_refused(self) -> bool:
        return self.status == 401 or self.code in TOKEN_CODES


def graph_error(response: httpx.Response) -> GraphError:
    """The error a response describes (Meta's ``{"error": {...}}``), or its status when it holds none."""
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return GraphError(response.status_code, None, response.text[:300].strip() or response.reason_phrase)
    data = error.get("error_data")
    details = data.get("details", "") if isinstance(data, dict) else ""
    code = error.get("code")
    return GraphError(
        response.status_code,
        code if isinstance(code, int) else None,
        str(error.get("message", ""))[:500],
        str(details)[:1000],
        str(error.get("fbtrace_id", ""))[:100],
    )


class Graph:
    """Sends for one business number. ``token`` gives the access token (read from its file, again
    when the file changed); ``on_retry`` is told of each attempt made again."""

    def __init__(
        self,
        base_url: str,
        phone_number_id: str,
        token: Callable[[], str],
        on_retry: Callable[[GraphError], None] = lambda _: None,
        client: httpx.AsyncClient | None = None,
        first_delay: float = FIRST_DELAY_SECONDS,
    ):
        self.url = f"{base_url.rstrip('/')}/{phone_number_id}/messages"
        self.token = token
        self.on_retry = on_retry
        self.first_delay = first_delay
        self.client = client or httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False)

    async def aclose(self) -> None:
        await self.client.aclose()

    async def send_text(self, to: str, body: str) -> str:
        """The id Meta gave the message (a wamid)."""
        return await self._send(
            {
                "messaging_product": "whatsapp",
                "recipient_type": "individual",
                **_addressed(to),
                "type": "text",
                "text": {"preview_url": False, "body": body},
            }
        )

    async def send_buttons(self, to: str, body: str, buttons: list[tuple[str, str]]) -> str:
        """An interactive message with reply buttons: (id, title) each, at most three."""
        return await self._send(
            {
                "messaging_product": "whatsapp",
                "recipient_type": "individual",
                **_addressed(to),
                "type": "interactive",
                "interactive": {
                    "type": "button",
                    "body": {"text": body},
                    "action": {"buttons": [{"type": "reply", "reply": {"id": id_, "title": title}} for id_, title in buttons]},
                },
            }
        )

    async def send_template(self, to: str, name: str, language: str, text: str) -> str:
        """A template message (what WhatsApp lets a business send outside the 24-hour window):
        the approved template ``name`` in ``language``, its one body variable {{1}} filled with
        ``text`` (already a valid parameter: whatsapp_text.template_parameter)."""
        return await self._send(
            {
                "messaging_product": "whatsapp",
                "recipient_type": "individual",
                **_addressed(to),
                "type": "template",
                "template": {
                    "name": name,
                    "language": {"code": language},
                    "components": [{"type": "body", "parameters": [{"type": "text", "text": text}]}],
                },
            }
        )

    async def mark_read(self, message_id: str) -> None:
        """Two blue ticks on ``message_id`` and the typing indicator (dismissed by the reply, or
        after 25 s): tried once, as it only tells the user tars is at work."""
        await self._send(
            {"messaging_product": "whatsapp", "status": "read", "message_id": message_id, "typing_indicator": {"type": "text"}},
            attempts=1,
        )

    async def _send(self, payload: dict, attempts: int = MAX_ATTEMPTS) -> str:
        delay = self.first_delay
        for attempt in range(1, attempts + 1):
            try:
                response = await self.client.post(self.url, json=payload, headers={"Authorization": f"Bearer {self.token()}"})
            except httpx.HTTPError as exc:
                error = GraphError(0, None, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
                wait = delay
            else:
                if response.is_success:
                    return _message_id(response)
                error = graph_error(response)
                wait = _retry_after(response, delay)
            if not error.retryable or attempt == attempts:
                raise error
            self.on_retry(error)
            log.info("WhatsApp: the Graph API answered %s; trying again in %.1f s (attempt %d of %d)", error, wait, attempt + 1, attempts)
            await asyncio.sleep(wait)
            delay = min(MAX_DELAY_SECONDS, delay * 2)
        raise AssertionError("unreachable")  # the loop returns or raises


def _addressed(to: str) -> dict[str, str]:
    """Where a message goes, as Meta's Messages API wants it: a phone number in ``to``, a BSUID in
    ``recipient`` (a BSUID in ``to`` would be read as a number: docs/whatsapp.md)."""
    return {"recipient": to} if is_bsuid(to) else {"to": to}


def _retry_after(response: httpx.Response, fallback: float) -> float:
    value = response.headers.get("retry-after", "")
    try:
        seconds = float(value)
    except ValueError:
        return fallback
    return min(MAX_DELAY_SECONDS, max(0.0, seconds)) if seconds == seconds else fallback  # NaN: the fallback


def _message_id(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return ""
    messages = body.get("messages") if isinstance(body, dict) else None
    if isinstance(messages, list) and messages and isinstance(messages[0], dict):
        return str(messages[0].get("id", ""))
    return ""
