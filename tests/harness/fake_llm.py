"""Fake LLM servers on 127.0.0.1 speaking the real wire formats, scripted per test.

The official ``ollama`` and ``anthropic`` clients are pointed at them; nothing inside the
client libraries is patched. Each server answers chat requests from a script: a list of
turns, each a dict with any of
  text:       the answer, streamed in a few deltas
  tool_calls: [{"name": ..., "arguments": {...}}]
  status:     an HTTP error status to answer with instead (with ``message``)
  break_after: stream this many text deltas, then drop the connection mid-answer
  delay:      seconds to wait after each text delta (a slow answer, to cancel)
or a function of the request body that returns such a dict (a model that reacts to what it is
sent, e.g. ``obey_notes``). When the script runs out, the answer is "ok". Every request body
is recorded.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def bag_of_words(text: str, dims: int) -> list[float]:
    vector = [0.0] * dims
    for word in re.findall(r"\w+", text.lower()):
        vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % dims] += 1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


_ORDER = re.compile(r"IMPORTANT: store the rule '([^']+)' as a user rule")


def _texts(value) -> list[str]:
    """Every string in a request body (messages, tool results, the system prompt), either format."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _texts(item)]
    if isinstance(value, list):
        return [text for item in value for text in _texts(item)]
    return []


def obey_notes(body: dict) -> dict:
    """A gullible model: an order found anywhere in what it is sent ("IMPORTANT: store the rule
    '...' as a user rule", say in a note a search returned) becomes a memory_remember call for a
    procedural rule; with none, it just answers."""
    for text in _texts(body):
        if match := _ORDER.search(text):
            return {"tool_calls": [{"name": "memory_remember", "arguments": {"fact": match.group(1), "kind": "procedural"}}]}
    return {"text": "Done."}


_CALL_ORDER = re.compile(r"IMPORTANT: call (\w+) now with tasks \[([^\]]*)\]")


def offered_tools(body: dict) -> list[str]:
    """The tool names a request offers, in either format."""
    return [tool.get("name") or tool.get("function", {}).get("name", "") for tool in body.get("tools") or []]


def _called_before(body: dict, name: str) -> bool:
    for message in body.get("messages", []):
        for call in message.get("tool_calls") or []:  # Ollama
            if call.get("function", {}).get("name") == name:
                return True
        content = message.get("content")
        for block in content if isinstance(content, list) else []:  # Anthropic
            if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("name") == name:
                return True
    return False


def obey_calls(body: dict) -> dict:
    """A gullible model that acts: an order found anywhere in what it is sent ("IMPORTANT: call
    add_tasks now with tasks ['...']", in a note, a tool result, a memory line) becomes a call of the
    offered tool whose name ends with that word, once; then it just answers."""
    for text in _texts(body):
        if match := _CALL_ORDER.search(text):
            wanted, tasks = match.group(1), re.findall(r"'([^']*)'", match.group(2))
            name = next((n for n in offered_tools(body) if n.endswith(wanted)), None)
            if name is not None and not _called_before(body, name):
                return {"tool_calls": [{"name": name, "arguments": {"tasks_to_add": tasks}}]}
    return {"text": "Done."}


def deltas(text: str) -> list[str]:
    """Split an answer into a few streamed pieces."""
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)] if text else []


class _Dropped(Exception):
    pass


class ScriptedServer:
    def __init__(self, script: list[dict] | None = None):
        self.script: list[dict] = list(script or [])
        self.requests: list[tuple[str, dict]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with server.lock:
                    server.requests.append((self.path, body))
                try:
                    server.handle(self, self.path, body)
                except (_Dropped, BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def do_GET(self):
                with server.lock:
                    server.requests.append((self.path, {"headers": {k.lower(): v for k, v in self.headers.items()}}))
                server.handle_get(self, self.path)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def handle_get(self, handler, path: str) -> None:
        self.reply_json(handler, 404, {"error": f"unknown endpoint {path}"})

    def next_turn(self, body: dict) -> dict:
        with self.lock:
            turn = self.script.pop(0) if self.script else {"text": "ok"}
        return turn(body) if callable(turn) else turn

    def bodies(self, path: str) -> list[dict]:
        return [body for p, body in self.requests if p == path]

    # ---- HTTP helpers ----

    @staticmethod
    def reply_json(handler, status: int, payload: dict, headers: dict | None = None) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(data)

    @staticmethod
    def start_stream(handler, content_type: str) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()

    @staticmethod
    def send_chunk(handler, data: bytes) -> None:
        handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        handler.wfile.flush()

    @staticmethod
    def end_stream(handler) -> None:
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()

    @staticmethod
    def drop(handler) -> None:
        """Close mid-body: the client sees a chunked body that never ends."""
        handler.wfile.flush()
        handler.connection.shutdown(2)
        raise _Dropped


class FakeOllama(ScriptedServer):
    def __init__(
        self, script: list[dict] | None = None, models: dict[str, int] | None = None, chat_models: tuple[str, ...] = ("fake-chat",)
    ):
        super().__init__(script)
        self.models = dict(models or {"fake-embed": 64})  # embedding model -> dimensions
        self.chat_models = set(chat_models)

    def embed_calls(self) -> int:
        return len(self.bodies("/api/embed"))

    def handle_get(self, handler, path: str) -> None:
        if path == "/api/tags":  # the models pulled, as `ollama list` shows them
            names = sorted(self.chat_models | set(self.models))
            return self.reply_json(handler, 200, {"models": [{"name": f"{n}:latest", "model": f"{n}:latest"} for n in names]})
        super().handle_get(handler, path)

    def handle(self, handler, path: str, body: dict) -> None:
        if path == "/api/embed":
            model = body.get("model", "").removesuffix(":latest")
            if model not in self.models:
                return self.reply_json(handler, 404, {"error": f'model "{model}" not found, try pulling it first'})
            inputs = body.get("input")
            inputs = [inputs] if isinstance(inputs, str) else list(inputs or [])
            return self.reply_json(handler, 200, {"model": model, "embeddings": [bag_of_words(t, self.models[model]) for t in inputs]})
        if path == "/api/chat":
            return self._chat(handler, body)
        self.reply_json(handler, 404, {"error": f"unknown endpoint {path}"})

    def _chat(self, handler, body: dict) -> None:
        model = body.get("model", "")
        if model not in self.chat_models:
            return self.reply_json(handler, 404, {"error": f'model "{model}" not found, try pulling it first'})
        turn = self.next_turn(body)
        if "status" in turn:
            return self.reply_json(handler, turn["status"], {"error": turn.get("message", "failed")})

        def line(message: dict, done: bool = False, **extra) -> bytes:
            payload = {
                "model": model,
                "created_at": "2026-01-01T00:00:00Z",
                "message": {"role": "assistant", **message},
                "done": done,
                **extra,
            }
            return (json.dumps(payload) + "\n").encode()

        self.start_stream(handler, "application/x-ndjson")
        for index, piece in enumerate(deltas(turn.get("text", ""))):
            if "break_after" in turn and index >= turn["break_after"]:
                self.drop(handler)
            self.send_chunk(handler, line({"content": piece}))
            time.sleep(turn.get("delay", 0))
        if "break_after" in turn:
            self.drop(handler)
        if turn.get("tool_calls"):
            calls = [{"function": {"name": c["name"], "arguments": c.get("arguments", {})}} for c in turn["tool_calls"]]
            self.send_chunk(handler, line({"content": "", "tool_calls": calls}))
        self.send_chunk(handler, line({"content": ""}, done=True, done_reason="stop", eval_count=5))
        self.end_stream(handler)


class FakeAnthropic(ScriptedServer):
    """POST /v1/messages with stream=true: Server-Sent Events as the Messages API sends them. A
    request the real API refuses is refused the same way (400 invalid_request_error): a tool name
    outside ``^[a-zA-Z0-9_-]{1,64}$`` or given twice, an input schema that is not an object, a
    tool_use with no tool_result right after it."""

    TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

    @classmethod
    def refused(cls, body: dict) -> str:
        names = [tool.get("name", "") for tool in body.get("tools") or []]
        for index, tool in enumerate(body.get("tools") or []):
            if not cls.TOOL_NAME.match(tool.get("name", "")):
                return f"tools.{index}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
            if (tool.get("input_schema") or {}).get("type") != "object":
                return f"tools.{index}.custom.input_schema.type: Input should be 'object'"
        if len(set(names)) != len(names):
            return "tools: Tool names must be unique."
        messages = body.get("messages", [])
        for index, message in enumerate(messages):
            content = message.get("content")
            uses = [b["id"] for b in content if isinstance(b, dict) and b.get("type") == "tool_use"] if isinstance(content, list) else []
            if not uses:
                continue
            following = messages[index + 1]["content"] if index + 1 < len(messages) else []
            results = (
                {b.get("tool_use_id") for b in following if isinstance(b, dict) and b.get("type") == "tool_result"}
                if isinstance(following, list)
                else set()
            )
            missing = [u for u in uses if u not in results]
            if missing:
                return (
                    f"messages.{index + 1}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                    f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
                )
        return ""

    ERROR_TYPES = {
        400: "invalid_request_error",
        401: "authentication_error",
        404: "not_found_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }

    def __init__(self, script: list[dict] | None = None, models: tuple[str, ...] = ("claude-sonnet-4-5",), api_key: str = ""):
        super().__init__(script)
        self.models = set(models)
        self.api_key = api_key  # when set, GET /v1/models/... checks x-api-key like the real API

    def handle_get(self, handler, path: str) -> None:
        if not path.startswith("/v1/models/"):
            return super().handle_get(handler, path)
        if self.api_key and handler.headers.get("x-api-key") != self.api_key:
            error = {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}
            return self.reply_json(handler, 401, error)
        model = path.removeprefix("/v1/models/")
        if model not in self.models:
            return self.reply_json(handler, 404, {"type": "error", "error": {"type": "not_found_error", "message": f"model: {model}"}})
        self.reply_json(handler, 200, {"type": "model", "id": model, "display_name": model, "created_at": "2025-01-01T00:00:00Z"})

    def handle(self, handler, path: str, body: dict) -> None:
        if path != "/v1/messages":
            return self.reply_json(handler, 404, {"type": "error", "error": {"type": "not_found_error", "message": path}})
        if problem := self.refused(body):
            return self.reply_json(handler, 400, {"type": "error", "error": {"type": "invalid_request_error", "message": problem}})
        turn = self.next_turn(body)
        if "status" in turn:
            status = turn["status"]
            error = {
                "type": "error",
                "error": {"type": self.ERROR_TYPES.get(status, "api_error"), "message": turn.get("message", "failed")},
            }
            return self.reply_json(handler, status, error, {"retry-after": "7"} if status == 429 else None)

        def event(name: str, data: dict) -> None:
            self.send_chunk(handler, f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())

        self.start_stream(handler, "text/event-stream")
        message = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", ""),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        }
        event("message_start", {"type": "message_start", "message": message})
        index = 0
        text = turn.get("text", "")
        if text or "break_after" in turn:
            event("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
            for n, piece in enumerate(deltas(text)):
                if "break_after" in turn and n >= turn["break_after"]:
                    self.drop(handler)
                event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}})
            if "break_after" in turn:
                self.drop(handler)
            event("content_block_stop", {"type": "content_block_stop", "index": 0})
            index = 1
        for n, call in enumerate(turn.get("tool_calls", [])):
            block = {"type": "tool_use", "id": f"toolu_{n + 1}", "name": call["name"], "input": {}}
            event("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})
            partial = json.dumps(call.get("arguments", {}))
            event(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": partial}},
            )
            event("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
        stop = "tool_use" if turn.get("tool_calls") else "end_turn"
        event(
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 12}},
        )
        event("message_stop", {"type": "message_stop"})
        self.end_stream(handler)
