"""A fake of Telegram's Bot API on 127.0.0.1, for the Telegram channel: ``/bot{token}/{method}``
in the Bot API's wire format (parameters as a form, JSON or the query string; answers
``{"ok": true, "result": ...}`` or ``{"ok": false, "error_code", "description", "parameters"}``),
recording every call (method, parameters, when, the status answered).

Methods: getMe, getUpdates (long polling: it waits up to ``timeout`` seconds for an update; an
``offset`` confirms, and forgets, every update before it, as Telegram does; 409 while a webhook
is set; and, as Telegram does when two programs poll one bot, a new getUpdates ends the one still
waiting with 409 "terminated by other getUpdates request"), sendMessage, sendChatAction,
answerCallbackQuery, editMessageReplyMarkup, setWebhook and deleteWebhook. It checks what the real API checks
that tars could get wrong: the token (else 401 "Unauthorized"), the chat (a user who never
wrote to the bot cannot be messaged: 403), a message's HTML (only Telegram's tags; every other
``<``, ``>`` and ``&`` escaped, else 400 "can't parse entities"), its length once parsed (4,096),
and an inline keyboard's callback data (1 to 64 bytes).

Tests push updates (``text``, ``tap``, ``photo``, or any object as it is: ``push``), script
failures (``fail``: the next calls of a method answer an error, a 429 with ``retry_after``
included) and answers the library cannot read (``garble``: the next calls of a method answer a
result as given, a dict where a list belongs). ``token`` can be changed to act out a token revoked
in @BotFather, and ``refused_text`` is the description a wrong token gets (``{path}`` and
``{token}`` in it stand for the address asked and the token presented, as an error page of a proxy
in front of the API may quote them). ``restart_update_ids`` numbers the next updates from a new,
lower, id, as Telegram does after a week without updates.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
import threading
import time
from dataclasses import dataclass
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from harness.daemon import wait_for

BOT_ID = 7700112233
BOT = {"id": BOT_ID, "is_bot": True, "first_name": "tars", "username": "tars_test_bot"}
TAGS = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "a", "code", "pre", "blockquote", "tg-spoiler", "span"}
_TAG = re.compile(r"</?([a-zA-Z][a-zA-Z0-9-]*)(\s[^<>]*)?>")
_ENTITY = re.compile(r"&(lt|gt|amp|quot|#\d+|#x[0-9a-fA-F]+);")
_JSON_PARAMETERS = {"reply_markup", "allowed_updates", "link_preview_options", "entities", "reply_parameters"}
_INT_PARAMETERS = {"chat_id", "offset", "limit", "timeout", "message_id"}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        # tarsd closing its connections (or cutting a long poll) when it stops is no error of the fake's.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class EntityError(ValueError):
    pass


class _Parser(HTMLParser):
    """Telegram's HTML: the text it shows, and the first thing it would refuse."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.open: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in TAGS:
            raise EntityError(f'Unsupported start tag "{tag}"')
        self.open.append(tag)

    def handle_endtag(self, tag):
        if not self.open or self.open[-1] != tag:
            raise EntityError(f'Unmatched end tag "{tag}"')
        self.open.pop()

    def handle_data(self, data):
        self.text.append(data)


def parse_html(text: str) -> str:
    """The text Telegram would show for ``text`` in parse_mode HTML; EntityError as Telegram refuses it."""
    at = 0
    while (lt := text.find("<", at)) >= 0:
        if not _TAG.match(text, lt):
            raise EntityError(f"Unexpected character '<' at byte offset {lt}: it must be escaped as &lt;")
        at = lt + 1
    for found in re.finditer("&", text):
        if not _ENTITY.match(text, found.start()):
            raise EntityError(f"Unsupported entity at byte offset {found.start()}: '&' must be escaped as &amp;")
    parser = _Parser()
    parser.feed(text)
    parser.close()
    if parser.open:
        raise EntityError(f'Can\'t find end tag corresponding to start tag "{parser.open[-1]}"')
    return "".join(parser.text)


@dataclass
class Call:
    method: str
    params: dict
    at: float
    status: int  # what the fake answered
    result: object = None


class FakeTelegram:
    def __init__(self, token: str):
        self.token = token
        self.calls: list[Call] = []
        self.updates: list[dict] = []  # not yet confirmed by an offset
        self.failures: dict[str, list[dict]] = {}
        self.garbled: dict[str, list[object]] = {}  # method -> results answered as they are, instead of the real ones
        self.refused_text = "Unauthorized"
        self.known_chats: set[int] = set()  # users who wrote to the bot: only they can be messaged
        self.messages: dict[int, dict] = {}  # message_id -> a message the bot sent
        self.questions: list[dict] = []  # messages sent with buttons, as sent
        self.webhook: dict | None = None  # what setWebhook was given: url, secret_token, allowed_updates
        self._polls = itertools.count(1)  # each getUpdates's number: a newer one ends the one waiting (409)
        self._newest_poll = 0
        self.cond = threading.Condition()
        self._update_ids = itertools.count(500_000)
        self._message_ids = itertools.count(1)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # The headers and the body are two writes: with Nagle's algorithm the body waits for the
            # client's delayed ACK of the headers (40 ms a response), which Telegram's servers do not add.
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def do_GET(self):
                self.do_POST()

            def do_POST(self):
                url = urlsplit(self.path)
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                params = _params(url.query, raw, self.headers.get("Content-Type", ""))
                status, payload, headers = fake.answer(url.path, params)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeTelegram:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        with self.cond:
            self.cond.notify_all()
        self.httpd.shutdown()
        self.httpd.server_close()

    # ---- the API ----

    @staticmethod
    def error(status: int, description: str, retry_after: int | None = None) -> tuple[int, dict, dict]:
        body: dict = {"ok": False, "error_code": status, "description": description}
        if retry_after is not None:
            body["parameters"] = {"retry_after": retry_after}
        return status, body, {}

    def answer(self, path: str, params: dict) -> tuple[int, dict, dict]:
        found = re.fullmatch(r"/bot([^/]+)/(\w+)", path)
        if not found:
            return self.error(404, "Not Found")
        token, method = found.groups()
        if token != self.token:
            status, body, headers = self.error(401, self.refused_text.format(path=path, token=token))
        else:
            status, body, headers = self._method(method, params)
        with self.cond:
            self.calls.append(Call(method, params, time.time(), status, body.get("result")))
        return status, body, headers

    def _method(self, method: str, params: dict) -> tuple[int, dict, dict]:
        with self.cond:
            scripted = self.failures.get(method)
            failure = scripted.pop(0) if scripted else None
        if failure is not None:
            return self.error(failure["status"], failure.get("description", "Internal Server Error"), failure.get("retry_after"))
        with self.cond:
            scripted_results = self.garbled.get(method)
            garbled = scripted_results.pop(0) if scripted_results else None
        if garbled is not None:
            return 200, {"ok": True, "result": garbled}, {}
        handler = {
            "getMe": lambda p: BOT,
            "getUpdates": self._get_updates,
            "sendMessage": self._send_message,
            "sendChatAction": self._chat_action,
            "answerCallbackQuery": lambda p: True,
            "editMessageReplyMarkup": self._edit_markup,
            "setWebhook": self._set_webhook,
            "deleteWebhook": self._delete_webhook,
        }.get(method)
        if handler is None:
            return self.error(404, "Not Found: method not found")
        try:
            return 200, {"ok": True, "result": handler(params)}, {}
        except _Refused as exc:
            return self.error(exc.status, exc.description)

    def _set_webhook(self, params: dict) -> bool:
        url, secret = params.get("url", ""), params.get("secret_token", "")
        if not url.startswith("https://"):
            raise _Refused(400, "Bad Request: bad webhook: An HTTPS URL must be provided for webhook")
        if secret and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", secret):
            raise _Refused(400, "Bad Request: secret token contains unallowed characters")
        self.webhook = {"url": url, "secret_token": secret, "allowed_updates": params.get("allowed_updates")}
        return True

    def _delete_webhook(self, params: dict) -> bool:
        self.webhook = None
        return True

    def _get_updates(self, params: dict) -> list[dict]:
        if self.webhook is not None:
            raise _Refused(
                409, "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"
            )
        offset, timeout = params.get("offset"), float(params.get("timeout") or 0)
        allowed = params.get("allowed_updates")
        end = time.monotonic() + timeout
        with self.cond:
            number = self._newest_poll = next(self._polls)
            self.cond.notify_all()  # a poll still waiting sees it is no longer the newest
            if offset is not None:
                self.updates = [u for u in self.updates if u["update_id"] >= offset]  # confirmed: gone for good
            while True:
                if number != self._newest_poll:
                    raise _Refused(409, "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running")
                ready = [u for u in self.updates if not allowed or any(k in u for k in allowed)]
                if ready or time.monotonic() >= end:
                    return ready[: int(params.get("limit") or 100)]
                self.cond.wait(end - time.monotonic())

    def _send_message(self, params: dict) -> dict:
        chat_id = params.get("chat_id")
        if chat_id not in self.known_chats:
            raise _Refused(403, "Forbidden: bot can't initiate conversation with a user")
        text = params.get("text", "")
        if params.get("parse_mode") == "HTML":
            try:
                shown = parse_html(text)
            except EntityError as exc:
                raise _Refused(400, f"Bad Request: can't parse entities: {exc}") from None
        else:
            shown = text
        if not shown.strip():
            raise _Refused(400, "Bad Request: message text is empty")
        if len(shown.encode("utf-16-le")) // 2 > 4096:
            raise _Refused(400, "Bad Request: message is too long")
        markup = params.get("reply_markup")
        if markup is not None:
            for row in markup.get("inline_keyboard", []):
                for button in row:
                    data = button.get("callback_data", "")
                    if not 1 <= len(data.encode()) <= 64:
                        raise _Refused(400, "Bad Request: BUTTON_DATA_INVALID")
        message = {
            "message_id": next(self._message_ids),
            "from": BOT,
            "chat": {"id": chat_id, "type": "private", "first_name": "User"},
            "date": int(time.time()),
            "text": shown,
            "html": text,  # not Telegram's: what tars sent, for the tests
        }
        if markup is not None:
            message["reply_markup"] = markup
            self.questions.append({**message, "at": time.time()})
        self.messages[message["message_id"]] = message
        return {k: v for k, v in message.items() if k != "html"}

    def _chat_action(self, params: dict) -> bool:
        if params.get("chat_id") not in self.known_chats:
            raise _Refused(403, "Forbidden: bot can't initiate conversation with a user")
        if params.get("action") not in ("typing", "upload_photo", "record_voice", "upload_document"):
            raise _Refused(400, "Bad Request: wrong parameter action in request")
        return True

    def _edit_markup(self, params: dict) -> dict:
        message = self.messages.get(params.get("message_id"))
        if message is None or message["chat"]["id"] != params.get("chat_id"):
            raise _Refused(400, "Bad Request: message to edit not found")
        markup = params.get("reply_markup")
        if markup is None and "reply_markup" not in message:
            raise _Refused(400, "Bad Request: message is not modified")
        if markup is None:
            message.pop("reply_markup", None)
        else:
            message["reply_markup"] = markup
        return {k: v for k, v in message.items() if k != "html"}

    # ---- what a test does ----

    def push(self, update: dict) -> int:
        """Queue ``update`` as it is (an update_id is added when it has none); returns its id."""
        return self._push(update)

    def garble(self, method: str, result: object, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` answer ``{"ok": true, "result": result}``, whatever it is."""
        with self.cond:
            self.garbled.setdefault(method, []).extend([result] * times)

    def restart_update_ids(self, start: int) -> None:
        """The next updates are numbered from ``start`` (Telegram: at random after a week without updates)."""
        with self.cond:
            self._update_ids = itertools.count(start)

    def _push(self, update: dict) -> int:
        with self.cond:
            if "update_id" not in update:
                update["update_id"] = next(self._update_ids)
            self.updates.append(update)
            self.cond.notify_all()
        return update["update_id"]

    @staticmethod
    def user(user_id: int) -> dict:
        return {"id": user_id, "is_bot": False, "first_name": f"User{user_id % 1000}", "language_code": "en"}

    def text(self, user_id: int, text: str, chat_type: str = "private", chat_id: int | None = None) -> int:
        """A user writes ``text`` to the bot; returns the update's id."""
        return self._push(self.text_update(user_id, text, chat_type, chat_id))

    def text_update(self, user_id: int, text: str, chat_type: str = "private", chat_id: int | None = None) -> dict:
        """The update a message from ``user_id`` is, with an id of its own, not queued (for webhook mode: post it)."""
        if chat_type == "private":
            self.known_chats.add(user_id)
        chat = {"id": user_id if chat_id is None else chat_id, "type": chat_type}
        chat.update({"first_name": "User"} if chat_type == "private" else {"title": "A group"})
        message = {"message_id": next(self._message_ids), "from": self.user(user_id), "chat": chat, "date": int(time.time()), "text": text}
        return {"update_id": next(self._update_ids), "message": message}

    def photo(self, user_id: int) -> int:
        self.known_chats.add(user_id)
        chat = {"id": user_id, "type": "private", "first_name": "User"}
        photo = [{"file_id": "AgAD1", "file_unique_id": "u1", "width": 90, "height": 90}]
        message = {
            "message_id": next(self._message_ids),
            "from": self.user(user_id),
            "chat": chat,
            "date": int(time.time()),
            "photo": photo,
        }
        return self._push({"message": message})

    def tap(self, user_id: int, message: dict, data: str) -> int:
        """``user_id`` taps the button with ``data`` on ``message`` (one the bot sent)."""
        query = {
            "id": f"cbq{next(self._message_ids)}",
            "from": self.user(user_id),
            "message": {k: v for k, v in message.items() if k != "html"},
            "chat_instance": "-1234",
            "data": data,
        }
        return self._push({"callback_query": query})

    def fail(self, method: str, status: int, description: str, retry_after: int | None = None, times: int = 1) -> None:
        with self.cond:
            self.failures.setdefault(method, []).extend(
                [{"status": status, "description": description, "retry_after": retry_after}] * times
            )

    # ---- what tars did ----

    def called(self, method: str, since: float = 0.0) -> list[Call]:
        with self.cond:
            return [c for c in self.calls if c.method == method and c.at >= since]

    def sent(self, chat_id: int, since: float = 0.0) -> list[dict]:
        """The messages the bot sent to ``chat_id`` (accepted), in order: Telegram's message, with "html" as sent."""
        with self.cond:
            found = [c.result["message_id"] for c in self.calls if c.method == "sendMessage" and c.status == 200 and c.at >= since]
            return [self.messages[m] for m in found if self.messages[m]["chat"]["id"] == chat_id]

    def texts(self, chat_id: int, since: float = 0.0) -> list[str]:
        return [m["text"] for m in self.sent(chat_id, since)]

    def wait_texts(self, chat_id: int, count: int, since: float = 0.0, deadline: float = 60.0) -> list[str]:
        return wait_for(
            lambda: len(self.texts(chat_id, since)) >= count and self.texts(chat_id, since), f"{count} message(s) to {chat_id}", deadline
        )

    def wait_question(self, chat_id: int, since: float = 0.0) -> dict:
        """The last message with buttons sent to ``chat_id``, as sent (its buttons kept, even once taken away)."""

        def found():
            with self.cond:
                asked = [q for q in self.questions if q["chat"]["id"] == chat_id and q["at"] >= since]
            return asked[-1] if asked else None

        return wait_for(found, f"a question sent to {chat_id}")

    def pending(self) -> int:
        """Updates Telegram still holds (not confirmed by an offset)."""
        with self.cond:
            return len(self.updates)


class _Refused(Exception):
    def __init__(self, status: int, description: str):
        super().__init__(description)
        self.status, self.description = status, description


def _params(query: str, raw: bytes, content_type: str) -> dict:
    """A call's parameters, as the Bot API reads them: the query string, a form (each value a
    string, JSON for objects), or a JSON body."""
    params: dict = dict(parse_qsl(query))
    if raw and "json" in content_type:
        params.update(json.loads(raw))
        return params
    if raw and "multipart" in content_type:
        raise ValueError("multipart is not spoken by this fake")
    for key, value in parse_qsl(raw.decode()):
        if key in _JSON_PARAMETERS:
            params[key] = json.loads(value)
        elif key in _INT_PARAMETERS:
            params[key] = int(value)
        else:
            params[key] = value
    return params
