"""Long strings cut while a message streams in, so a tool's 50 MB result costs tarsd a bounded
amount of memory and time, on both transports (tarsd/tools/stdio_transport.py reads a stdio
server's lines through it, tarsd/tools/http_transport.py an HTTP server's SSE events and JSON
bodies). Each JSON string longer than ``max_chars`` characters keeps its first ``max_chars`` and
ends with a cut mark (tarsd/tools/results.py), which says how many characters were left out; the
rest of the JSON is copied as it came. The message that comes out is parsed by the SDK as usual.

Memory: the message as cut (up to MAX_MESSAGE_BYTES: past it the message is dropped and answered
with an error) and one chunk. Time: linear, the scanning done by ``re`` and ``bytes`` in C.
"""

from __future__ import annotations

import json
import re

from tarsd.tools.results import cut_mark

CHUNK = 65536
# A message still this large after its strings are cut (thousands of short strings) is not
# passed on: tarsd would hold it, and its parse, whole.
MAX_MESSAGE_BYTES = 8 * 1024 * 1024
# The body of a JSON string from where it starts: plain bytes and whole escapes. It stops at the
# closing quote, or at a backslash whose escape is not all there yet (the chunk ended in it).
_BODY = re.compile(rb'[^"\\]*(?:\\(?:u[0-9a-fA-F]{4}|[^u])[^"\\]*)*')
# Escapes in a body; group 1 is "u" for \uXXXX (6 bytes for 1 character), else empty (2 for 1).
_ESCAPE = re.compile(rb"\\(?:(u)[0-9a-fA-F]{4}|.)", re.S)
_CONTINUATION = bytes(range(0x80, 0xC0))  # UTF-8 bytes that do not start a character
_ID = re.compile(rb'"id"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.){0,200}")')


def characters(body: bytes) -> int:
    """Characters in a part of a JSON string's body that starts and ends between escapes (a
    surrogate pair written as two escapes counts as two)."""
    count = len(body.translate(None, _CONTINUATION))
    if b"\\" in body:
        escapes = _ESCAPE.findall(body)
        count -= len(escapes) + 4 * escapes.count(b"u")
    return count


class JsonCutter:
    """One JSON text, fed in chunks (``feed``), given back cut (``finish``)."""

    def __init__(self, max_chars: int, nonce: str, max_bytes: int = MAX_MESSAGE_BYTES):
        self.max_chars = max_chars
        self.nonce = nonce
        self.max_bytes = max_bytes
        self.out = bytearray()
        self.overflow = False  # the message as cut went past max_bytes: only its start is kept
        self.cuts = 0
        self._in_string = False
        self._pending = b""  # an escape the last chunk ended in the middle of
        self._kept = bytearray()  # the string's body so far, up to a chunk past 2 * max_chars characters
        self._kept_chars = 0
        self._chars = 0

    def _emit(self, data: bytes) -> None:
        if self.overflow:
            return
        self.out += data
        if len(self.out) > self.max_bytes:
            self.overflow = True
            del self.out[self.max_bytes :]

    def feed(self, data: bytes) -> None:
        buffer = self._pending + data if self._pending else data
        self._pending = b""
        position, size = 0, len(buffer)
        while position < size:
            if not self._in_string:
                quote = buffer.find(b'"', position)
                if quote < 0:
                    self._emit(buffer[position:])
                    return
                self._emit(buffer[position : quote + 1])
                self._in_string, self._chars, self._kept_chars = True, 0, 0
                self._kept.clear()
                position = quote + 1
                continue
            end = _BODY.match(buffer, position).end()
            if end > position:
                self._body(buffer[position:end])
            if end == size:
                return
            if buffer[end] == 0x22:  # the closing quote
                self._close()
                position = end + 1
            elif size - end < 6:  # an escape the chunk ended in: completed by the next one
                self._pending = buffer[end:]
                return
            else:  # a malformed escape: passed on as it is (the SDK then refuses the message)
                self._body(buffer[end : end + 2])
                position = end + 2

    def _body(self, body: bytes) -> None:
        count = characters(body)
        self._chars += count
        if self._kept_chars <= 2 * self.max_chars:  # twice: an escaped surrogate pair counts two here, one in Python
            self._kept += body
            self._kept_chars += count

    def _close(self) -> None:
        self._in_string = False
        if self._chars <= self.max_chars:
            self._emit(bytes(self._kept) + b'"')
            return
        try:
            kept = json.loads(b'"' + bytes(self._kept) + b'"')[: self.max_chars]
        except ValueError:  # a malformed string: its start, as text
            kept = bytes(self._kept).decode("utf-8", "replace")[: self.max_chars]
        self.cuts += 1
        self._emit(json.dumps(kept + cut_mark(self.nonce, self._chars - len(kept))).encode()[1:])
        self._kept.clear()

    def finish(self) -> bytes:
        """The message as cut (a string left open is closed as it is: the SDK refuses it)."""
        if self._pending:
            self._body(self._pending)
            self._pending = b""
        if self._in_string:
            self._emit(bytes(self._kept))
        return bytes(self.out)


def too_large(start: bytes, fallback_id: object = None) -> bytes | None:
    """The JSON-RPC error that answers a message too large even when cut (its id read from its
    start), or None when its id cannot be found (a notification: nothing waits for it)."""
    found = _ID.search(start)
    request_id = json.loads(found.group(1)) if found else fallback_id
    if request_id is None:
        return None
    message = (
        f"the result was left out: it is over {MAX_MESSAGE_BYTES // (1024 * 1024)} MB even with each text in it cut "
        "(too many parts for tars to take)"
    )
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32603, "message": message}}).encode()


def cut_message(cutter: JsonCutter, fallback_id: object = None) -> bytes | None:
    """The finished message, or the error that replaces one too large (None: drop it)."""
    data = cutter.finish()
    return too_large(data, fallback_id) if cutter.overflow else data
