"""A fake of Meta's Graph API on 127.0.0.1, for the WhatsApp channel: ``POST
/{version}/{phone-number-id}/messages`` in Meta's wire format, answering as the Cloud API does
and recording every request (path, headers, body, when); and ``GET /{version}/{phone-number-id}``,
the business number's own node (what ``tarsctl doctor`` asks).

A message goes to a phone number in ``to`` or to a business-scoped user id in ``recipient`` (Meta:
``to`` wins when both are given); a BSUID in ``to`` is refused, as Meta cannot read it as a number.

It checks what the real API checks that tars could get wrong: the bearer token (else 401 with
code 190), the phone number id in the path, ``messaging_product``, a text body of at most 4,096
characters, an interactive message's body (1,024) and its one to three reply buttons (titles of
at most 20 characters, ids of at most 256, all different). Refusals are Meta's error JSON
(``{"error": {"message", "type", "code", "error_data": {"messaging_product", "details"},
"fbtrace_id"}}``).

Template messages are checked as Meta checks them: the template must be one the fake knows
(``templates``: name -> its languages; else 404 with code 132001), with a language code, and
exactly one body parameter (132000) of text without a line break, a tab or five spaces in a row, at
most 1,024 characters (else 132018). ``closed`` holds the recipients whose 24-hour window has
closed: a text or an interactive message to them is refused with 131047, a template goes through.

``script`` scripts the answers to the next sends (texts and interactive messages, not read
marks): each a dict with ``status`` and optionally ``code``, ``message``, ``details`` and
``retry_after`` (a Retry-After header), or ``{"delay": seconds}`` to answer late. When the script is
empty, sends succeed.
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness.daemon import wait_for

VERSION = "v21.0"


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        # tarsd closing its kept-alive connections when it stops is no error of the fake's.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@dataclass
class Sent:
    path: str
    headers: dict[str, str]
    body: dict
    at: float
    status: int  # what the fake answered


class FakeGraph:
    def __init__(self, phone_number_id: str, token: str, templates: dict[str, set[str]] | None = None):
        self.phone_number_id = phone_number_id
        self.token = token
        self.templates = templates or {}  # approved templates: name -> language codes
        self.closed: set[str] = set()  # recipients outside the 24-hour window
        self.script: list[dict] = []
        self.requests: list[Sent] = []
        self.lock = threading.Lock()
        self._ids = itertools.count(1)
        graph = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                status, payload, _ = graph.node(self.path, self.headers)
                with graph.lock:
                    graph.requests.append(Sent(self.path, {k.lower(): v for k, v in self.headers.items()}, {}, time.time(), status))
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"unreadable": raw.decode(errors="replace")}
                status, payload, headers = graph.answer(self.path, self.headers, body)
                with graph.lock:
                    graph.requests.append(Sent(self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.time(), status))
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/{VERSION}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeGraph:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # ---- Meta's answers ----

    @staticmethod
    def error(status: int, code: int, message: str, details: str = "", kind: str = "OAuthException") -> tuple[int, dict, dict]:
        error = {"message": message, "type": kind, "code": code, "fbtrace_id": "AbCdEfGhIjK"}
        if details:
            error["error_data"] = {"messaging_product": "whatsapp", "details": details}
        return status, {"error": error}, {}

    def node(self, path: str, headers) -> tuple[int, dict, dict]:
        """``GET /{version}/{phone-number-id}``: the business number, as the Cloud API describes it."""
        if headers.get("Authorization") != f"Bearer {self.token}":
            return self.error(401, 190, "Invalid OAuth access token - Cannot parse access token")
        asked = path.split("?")[0].rstrip("/").split("/")[-1]
        if path.split("?")[0] != f"/{VERSION}/{self.phone_number_id}":
            return self.error(
                400,
                100,
                f"Unsupported get request. Object with ID '{asked}' does not exist, cannot be loaded due to missing permissions, "
                "or does not support this operation.",
                kind="GraphMethodException",
            )
        return (
            200,
            {
                "verified_name": "Test Number",
                "display_phone_number": "15550783881",
                "id": self.phone_number_id,
                "quality_rating": "GREEN",
            },
            {},
        )

    def answer(self, path: str, headers, body: dict) -> tuple[int, dict, dict]:
        if headers.get("Authorization") != f"Bearer {self.token}":
            return self.error(401, 190, "Invalid OAuth access token - Cannot parse access token")
        if path != f"/{VERSION}/{self.phone_number_id}/messages":
            return self.error(400, 100, f"Unsupported post request. Object with ID '{path.split('/')[2:3]}' does not exist")
        if body.get("messaging_product") != "whatsapp":
            return self.error(400, 100, "(#100) The parameter messaging_product is required.")
        if body.get("status") == "read":
            return 200, {"success": True}, {}
        problem = self.refused(body)
        if problem:
            return self.error(400, 100, "(#100) Invalid parameter", problem)
        if body.get("type") == "template":
            refusal = self.template_refused(body.get("template") or {})
            if refusal is not None:
                return refusal
        elif _to(body) in self.closed:
            return self.error(
                400,
                131047,
                "(#131047) Re-engagement message",
                "Message failed to send because more than 24 hours have passed since the customer last replied to this number.",
            )
        with self.lock:
            scripted = self.script.pop(0) if self.script else None
        if scripted is not None:
            time.sleep(scripted.get("delay", 0))
            if "status" in scripted:
                status = scripted["status"]
                answer = self.error(
                    status, scripted.get("code", 131000), scripted.get("message", "Something went wrong"), scripted.get("details", "")
                )
                if "retry_after" in scripted:
                    answer[2]["Retry-After"] = str(scripted["retry_after"])
                return answer
        to = body.get("to", "")
        contact = {"input": to, "wa_id": to} if to else {"input": body["recipient"], "user_id": body["recipient"]}
        return (
            200,
            {
                "messaging_product": "whatsapp",
                "contacts": [contact],
                "messages": [{"id": f"wamid.fake{next(self._ids)}"}],
            },
            {},
        )

    @staticmethod
    def refused(body: dict) -> str:
        """What the real API would refuse in a send, in its words; "" when nothing."""
        kind = body.get("type")
        if not body.get("to") and not body.get("recipient"):
            return "The parameter to is required."
        if body.get("to") and "." in body["to"]:
            return "Param to must be a phone number: send to a business-scoped user ID in recipient."
        if kind == "text":
            text = (body.get("text") or {}).get("body", "")
            if not text:
                return "The parameter text['body'] is required."
            if len(text) > 4096:
                return "Param text['body'] must be at most 4096 characters long."
            return ""
        if kind == "interactive":
            interactive = body.get("interactive") or {}
            text = (interactive.get("body") or {}).get("text", "")
            buttons = (interactive.get("action") or {}).get("buttons") or []
            if interactive.get("type") != "button":
                return "Param interactive['type'] must be one of {button, list, ...}"
            if not text or len(text) > 1024:
                return "Param interactive['body']['text'] must be between 1 and 1024 characters long."
            if not 1 <= len(buttons) <= 3:
                return "Param interactive['action']['buttons'] must have between 1 and 3 elements."
            ids = [b.get("reply", {}).get("id", "") for b in buttons]
            titles = [b.get("reply", {}).get("title", "") for b in buttons]
            if any(b.get("type") != "reply" for b in buttons):
                return "Param interactive['action']['buttons'][0]['type'] must be reply"
            if any(not t or len(t) > 20 for t in titles) or len(set(titles)) != len(titles):
                return "Button titles must be unique, non-empty, and at most 20 characters long."
            if any(not i or len(i) > 256 for i in ids) or len(set(ids)) != len(ids):
                return "Button ids must be unique, non-empty, and at most 256 characters long."
            return ""
        if kind == "template":
            template = body.get("template")
            if not isinstance(template, dict) or not template.get("name"):
                return "The parameter template['name'] is required."
            language = template.get("language")
            if not isinstance(language, dict) or not language.get("code"):
                return "The parameter template['language']['code'] is required."
            return ""
        return f"Param type must be one of text, interactive, template, ... (got {kind!r})"

    def template_refused(self, template: dict) -> tuple[int, dict, dict] | None:
        """Meta's answer to a template message it refuses; None when it takes it."""
        name, language = template["name"], template["language"]["code"]
        if language not in self.templates.get(name, set()):
            return self.error(
                404,
                132001,
                "(#132001) Template name does not exist in the translation",
                f"template name ({name}) does not exist in {language}",
            )
        components = template.get("components") or []
        bodies = [c for c in components if isinstance(c, dict) and c.get("type") == "body"]
        parameters = [p for c in bodies for p in c.get("parameters") or []]
        if len(bodies) != 1 or len(parameters) != 1 or not isinstance(parameters[0], dict) or parameters[0].get("type") != "text":
            return self.error(
                400,
                132000,
                "(#132000) Number of parameters does not match the expected number of params",
                f"body: number of localizable_params ({len(parameters)}) does not match the expected number of params (1)",
            )
        text = parameters[0].get("text")
        if not isinstance(text, str) or not text or "\n" in text or "\t" in text or "     " in text:
            return self.error(
                400,
                132018,
                "(#132018) There was an issue with the parameters in your template.",
                "Param text cannot have new-line/tab characters or more than 4 consecutive spaces",
            )
        if len(text) > 1024:
            return self.error(
                400, 132018, "(#132018) There was an issue with the parameters in your template.", "Param text is too long (1024 at most)"
            )
        return None

    # ---- what tars sent ----

    def sends(self, to: str | None = None, since: float = 0.0) -> list[Sent]:
        """Texts and interactive messages (not read marks) tars sent (to ``to``), answered or not."""
        with self.lock:
            return [s for s in self.requests if "type" in s.body and s.at >= since and (to is None or _to(s.body) == to)]

    def texts(self, to: str, since: float = 0.0) -> list[str]:
        """The bodies of the text messages Meta accepted for ``to``, in order."""
        return [s.body["text"]["body"] for s in self.sends(to, since) if s.body.get("type") == "text" and s.status == 200]

    def questions(self, to: str, since: float = 0.0) -> list[dict]:
        """The interactive messages Meta accepted for ``to``: their "interactive" object."""
        return [s.body["interactive"] for s in self.sends(to, since) if s.body.get("type") == "interactive" and s.status == 200]

    def templates_sent(self, to: str, since: float = 0.0) -> list[dict]:
        """The template messages Meta accepted for ``to``: their "template" object."""
        return [s.body["template"] for s in self.sends(to, since) if s.body.get("type") == "template" and s.status == 200]

    def reads(self, since: float = 0.0) -> list[Sent]:
        with self.lock:
            return [s for s in self.requests if s.body.get("status") == "read" and s.at >= since]

    def wait_texts(self, to: str, count: int, since: float = 0.0, deadline: float = 60.0) -> list[str]:
        return wait_for(lambda: len(self.texts(to, since)) >= count and self.texts(to, since), f"{count} text(s) sent to {to}", deadline)

    def wait_question(self, to: str, since: float = 0.0) -> dict:
        return wait_for(lambda: self.questions(to, since) and self.questions(to, since)[-1], f"a question sent to {to}")


def _to(body: dict) -> str:
    """Whom a send is for: ``to`` when given (Meta: it wins), else ``recipient``."""
    return body.get("to") or body.get("recipient", "")
