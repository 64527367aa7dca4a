"""An HTTP server's responses with their long strings cut as they stream in: an httpx transport
(the SDK takes our own httpx client, and the client takes a transport) that passes each request
on and reads the answer through tarsd/tools/cut_stream.py:

- ``text/event-stream``: each event's ``data`` (a JSON-RPC message) is cut, its other fields
  (``id``, ``event``, ``retry``, comments) are passed as they came; so an event stays far below
  the SDK's limit on an event's size (1 MiB), past which the SDK drops the whole connection.
- ``application/json``: the body is cut as one message.

Anything else passes untouched. Responses are asked for without compression (``Accept-Encoding:
identity``): the cut reads the bytes as they come; a compressed one (against the ask) is not cut.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx2

from tarsd.tools.cut_stream import JsonCutter, cut_message

MAX_FIELD_BYTES = 65536  # an SSE line other than data (an id, an event name) past this is cut short


class CuttingTransport(httpx2.AsyncBaseTransport):
    def __init__(self, inner: httpx2.AsyncBaseTransport, max_chars: int, nonce: str):
        self.inner = inner
        self.max_chars = max_chars
        self.nonce = nonce

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Accept-Encoding"] = "identity"
        response = await self.inner.handle_async_request(request)
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if response.headers.get("content-encoding", "identity").lower() != "identity" or kind not in (
            "text/event-stream",
            "application/json",
        ):
            return response
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() != "content-length"]
        request_id = _request_id(request)
        if kind == "application/json":
            stream = _Cut(response, self._json(response, request_id))
        else:
            stream = _Cut(response, self._events(response, request_id))
        return httpx2.Response(response.status_code, headers=headers, stream=stream, extensions=response.extensions, request=request)

    async def _json(self, response: httpx2.Response, request_id: object) -> AsyncIterator[bytes]:
        cutter = JsonCutter(self.max_chars, self.nonce)
        async for chunk in response.aiter_raw():
            cutter.feed(chunk)
        data = cut_message(cutter, request_id)
        if data is not None:
            yield data

    async def _events(self, response: httpx2.Response, request_id: object) -> AsyncIterator[bytes]:
        events = SseCutter(self.max_chars, self.nonce, request_id)
        async for chunk in response.aiter_raw():
            if out := events.feed(chunk):
                yield out
        if out := events.finish():
            yield out

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Cut(httpx2.AsyncByteStream):
    def __init__(self, response: httpx2.Response, chunks: AsyncIterator[bytes]):
        self.response = response
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.chunks:
            yield chunk

    async def aclose(self) -> None:
        await self.response.aclose()


def _request_id(request: httpx2.Request) -> object:
    """The JSON-RPC id of a POSTed request: answers a too-large response whose own id is lost."""
    try:
        body = json.loads(request.content) if request.method == "POST" else None
    except (ValueError, httpx2.RequestNotRead):
        return None
    return body.get("id") if isinstance(body, dict) else None


class SseCutter:
    """A stream of server-sent events, fed in chunks, given back event by event with each one's
    data cut. Lines end in LF or CRLF (a lone CR, which the format also allows, is not taken)."""

    def __init__(self, max_chars: int, nonce: str, request_id: object = None):
        self.max_chars = max_chars
        self.nonce = nonce
        self.request_id = request_id
        self._line = bytearray()  # the current line, while it is not data
        self._in_data = False  # the current line is data: its value goes to the cutter
        self._fields = bytearray()  # the event's other lines, as they came
        self._cutter: JsonCutter = JsonCutter(max_chars, nonce)
        self._has_data = False

    def feed(self, chunk: bytes) -> bytes:
        out = bytearray()
        position, size = 0, len(chunk)
        while position < size:
            newline = chunk.find(b"\n", position)
            end = size if newline < 0 else newline
            if not self._in_data and len(self._line) < 5:  # enough of the line to know whether it is data
                take = min(end, position + 5 - len(self._line))
                self._line += chunk[position:take]
                position = take
                if self._line == b"data:":
                    self._line.clear()
                    self._in_data = True
                    self._start_data()
            if self._in_data:
                self._cutter.feed(chunk[position:end])  # a CR before the LF is JSON whitespace: harmless
            elif len(self._line) < MAX_FIELD_BYTES:
                self._line += chunk[position : min(end, position + MAX_FIELD_BYTES - len(self._line))]
            if newline < 0:
                break
            position = newline + 1
            if self._in_data:
                self._in_data = False
                continue
            line = bytes(self._line).rstrip(b"\r")
            self._line.clear()
            if line:
                self._fields += line + b"\n"
            else:
                out += self._event()
        return bytes(out)

    def _start_data(self) -> None:
        if self._has_data:
            self._cutter.feed(b"\n")  # a second data line: joined by a newline, as the format says
        self._has_data = True

    def _event(self) -> bytes:
        fields, cutter, has_data = bytes(self._fields), self._cutter, self._has_data
        self._fields.clear()
        self._cutter, self._has_data = JsonCutter(self.max_chars, self.nonce), False
        if not has_data:
            return fields + b"\n"
        data = cut_message(cutter, self.request_id)
        return fields + (b"data: " + data + b"\n" if data is not None else b"") + b"\n"

    def finish(self) -> bytes:
        """The last event, when the stream ended without the blank line that ends it."""
        return self._event() if self._fields or self._has_data else b""
