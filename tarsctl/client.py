"""A blocking client for the tarsd socket: connect, greet, send one request, read its replies."""

from __future__ import annotations

import itertools
import os
import pwd
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec

from tarsctl import __version__
from tarsctl.protocol import (
    FINAL_REPLIES,
    HEADER,
    MAX_REPLY_BYTES,
    PROTOCOL_VERSION,
    Cancel,
    Error,
    Hello,
    Message,
    Welcome,
    default_socket_path,
    frame,
    server_decoder,
)

CONNECT_RETRY_SECONDS = 2.0


class DaemonNotRunning(Exception):
    def __init__(self, path: Path, reason: str):
        super().__init__(
            f"tarsd is not running (no answer on {path}: {reason}); start it with `tarsd --vault PATH` or your service manager"
        )
        self.path = path


class PermissionDenied(DaemonNotRunning):
    """The socket, or a folder above it, is not this user's to open: a tarsd may well run there,
    for someone else. Said as such, not as "not running", which would send the user to start one."""

    def __init__(self, path: Path):
        blocked = _first_reachable(path)
        owner = _owner(blocked)
        Exception.__init__(
            self,
            f"permission denied: cannot reach tarsd's socket {path}: {blocked} belongs to {owner}, and tarsd answers only "
            f"the user who runs it; run tarsctl as {owner}, or start a tarsd of your own (tarsd --vault PATH) "
            "with TARS_SOCKET unset or set to a path of yours",
        )
        self.path = path


def _first_reachable(path: Path) -> Path:
    """The socket itself when it can be looked at, else the nearest folder above it that can:
    the one whose permissions keep this user out."""
    for candidate in (path, *path.parents):
        try:
            os.stat(candidate)
            return candidate
        except OSError:
            continue
    return path


def _owner(path: Path) -> str:
    try:
        uid = os.stat(path).st_uid
    except OSError:
        return "another user"
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


class ProtocolError(Exception):
    """The daemon sent something this client cannot read."""


class RemoteError(Exception):
    def __init__(self, error: Error):
        super().__init__(error.message + (f" ({error.hint})" if error.hint else ""))
        self.error = error


class Client:
    def __init__(self, path: Path | None = None, timeout: float | None = None):
        self.path = path or default_socket_path()
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._ids = itertools.count(1)
        self.welcome: Welcome | None = None

    def __enter__(self) -> Client:
        self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def connect(self) -> Welcome:
        try:
            owner = os.stat(self.path).st_uid
        except PermissionError as exc:
            raise PermissionDenied(self.path) from exc
        except OSError:
            owner = os.getuid()  # missing: connect() below says so
        if owner != os.getuid():
            # Someone else's socket could be an impostor collecting your queries.
            raise ProtocolError(f"refusing to talk to {self.path}: it belongs to uid {owner}, not to you; check TARS_SOCKET / --socket")
        self._sock = self._connect_socket()
        try:
            self._send(Hello(protocol=PROTOCOL_VERSION, client=f"tarsctl/{__version__}", capabilities=["progress"]))
        except DaemonNotRunning:
            pass  # closed at once: a refusal ("busy") may be waiting to be read
        reply = self._receive()
        if isinstance(reply, Error):
            raise RemoteError(reply)
        if not isinstance(reply, Welcome):
            raise ProtocolError(f"expected a welcome from tarsd, got {type(reply).__name__}")
        self.welcome = reply
        return reply

    def _connect_socket(self) -> socket.socket:
        # A full listen queue (a burst of clients) refuses a Unix-socket connect with EAGAIN at
        # once: retry for a moment, as the daemon accepts them quickly.
        deadline = time.monotonic() + (CONNECT_RETRY_SECONDS if self.timeout is None else min(self.timeout, CONNECT_RETRY_SECONDS))
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout)
            try:
                sock.connect(str(self.path))
                return sock
            except BlockingIOError as exc:
                sock.close()
                if time.monotonic() >= deadline:
                    raise DaemonNotRunning(self.path, "its queue of new connections stays full (overloaded?)") from exc
                time.sleep(0.01)
            except (FileNotFoundError, ConnectionRefusedError) as exc:
                sock.close()
                raise DaemonNotRunning(self.path, exc.strerror or str(exc)) from exc
            except PermissionError as exc:
                sock.close()
                raise PermissionDenied(self.path) from exc
            except OSError as exc:
                sock.close()
                raise DaemonNotRunning(self.path, str(exc)) from exc

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

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
        if not isinstance(message, Cancel) and self._sock is not None and self._closed_by_daemon():
            self.close()
            self.connect()
        self._send(message)

    def _closed_by_daemon(self) -> bool:
        assert self._sock is not None
        # Non-blocking for the peek: with a timeout set, Python waits for data before recv.
        self._sock.setblocking(False)
        try:
            return self._sock.recv(1, socket.MSG_PEEK) == b""
        except BlockingIOError:
            return False  # open, nothing waiting
        except OSError:
            return True
        finally:
            self._sock.settimeout(self.timeout)

    def receive(self) -> Message:
        """Read one frame from the daemon."""
        return self._receive()

    def _send(self, message: Message) -> None:
        assert self._sock is not None
        try:
            self._sock.sendall(frame(message))
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise DaemonNotRunning(self.path, "the connection closed") from exc

    def _receive(self) -> Message:
        header = self._read_exactly(HEADER.size)
        (length,) = HEADER.unpack(header)
        if length > MAX_REPLY_BYTES:
            raise ProtocolError(f"tarsd announced a {length}-byte reply, over the {MAX_REPLY_BYTES}-byte limit")
        try:
            return server_decoder.decode(self._read_exactly(length))
        except msgspec.DecodeError as exc:
            raise ProtocolError(f"unreadable reply from tarsd: {exc}; is tarsctl the same version as tarsd?") from exc

    def _read_exactly(self, size: int) -> bytes:
        assert self._sock is not None
        chunks, remaining = [], size
        while remaining:
            try:
                chunk = self._sock.recv(min(remaining, 1 << 20))
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                raise DaemonNotRunning(self.path, "tarsd closed the connection (did it stop?)")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)
