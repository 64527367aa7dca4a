"""A blocking client for the tarsd socket: connect, greet, send one request, read its replies."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import msgspec

from tarsctl import __version__
from tarsctl.protocol import (
    FINAL_REPLIES,
    Cancel,
    Error,
    Hello,
    Message,
    Welcome,
    encoder,
    server_decoder,
)

# Where a caller catches them: the connection's own errors are transport.py's.
from tarsctl.transport import (  # noqa: F401
    PROTOCOL_VERSION,
    DaemonNotRunning,
    FrameSocket,
    PermissionDenied,
    ProtocolError,
)


class RemoteError(Exception):
    def __init__(self, error: Error):
        super().__init__(error.message + (f" ({error.hint})" if error.hint else ""))
        self.error = error


class Client:
    """Typed messages (protocol.py, msgpack bodies) over one connection to tarsd."""

    def __init__(self, path: Path | None = None, timeout: float | None = None, acts_as: str = ""):
        self._frames = FrameSocket(path, timeout)
        self.acts_as = acts_as  # "mcp_client": this connection has an MCP client's rights only (tarsctl/authority.py)
        self.path = self._frames.path
        self.timeout = timeout
        self._ids = itertools.count(1)
        self.welcome: Welcome | None = None

    def __enter__(self) -> Client:
        self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def connect(self) -> Welcome:
        self._frames.open()
        try:
            self._send(Hello(protocol=PROTOCOL_VERSION, client=f"tarsctl/{__version__}", capabilities=["progress"], acts_as=self.acts_as))
        except DaemonNotRunning:
            pass  # closed at once: a refusal ("busy") may be waiting to be read
        reply = self._receive()
        if isinstance(reply, Error):
            raise RemoteError(reply)
        if not isinstance(reply, Welcome):
            raise ProtocolError(f"expected a welcome from tarsd, got {type(reply).__name__}")
        self.welcome = reply
        return reply

    def close(self) -> None:
        self._frames.close()

    def next_id(self) -> int:
        return next(self._ids)

    def stream(self, request: Message) -> Iterator[Message]:
        """Send a request and yield its replies; the last one is final (a result or an Error)."""
        self.send(request)
        while True:
            reply = self._receive()
            yield reply
            if isinstance(reply, FINAL_REPLIES):
                return

    def call(self, request: Message) -> Message:
        """Send a request and return its final reply, raising RemoteError for an Error."""
        for reply in self.stream(request):
            if isinstance(reply, Error):
                raise RemoteError(reply)
            last = reply
        return last

    def send(self, message: Message) -> None:
        """Send one frame (a request, or a cancel while a chat streams). A new request on a
        connection tarsd closed for being idle reconnects first."""
        if not isinstance(message, Cancel) and self._frames.is_open and self._frames.closed_by_daemon():
            self.close()
            self.connect()
        self._send(message)

    def receive(self) -> Message:
        """Read one frame from the daemon."""
        return self._receive()

    def _send(self, message: Message) -> None:
        self._frames.send(encoder.encode(message))

    def _receive(self) -> Message:
        try:
            return server_decoder.decode(self._frames.receive())
        except msgspec.DecodeError as exc:
            raise ProtocolError(f"unreadable reply from tarsd: {exc}; is tarsctl the same version as tarsd?") from exc
