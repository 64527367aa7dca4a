"""Frames over tarsd's Unix socket, whatever their body: where the socket is, connecting (the
owner check, a retry while the listen queue is full), and a frame's 4-byte big-endian length
around a body of bytes. The message types and their msgpack bodies are in protocol.py and
client.py; the JSON bodies of tarsctl's quick path (quick.py) ride on the same frames.
socket_path.py has the address as a Path and the rule for the socket's folder.

It imports only the standard library, and not pathlib (3 ms of tarsctl's start): paths are
strings here. It opens its socket with ``_socket``, the C module under ``socket``: the Python
wrapper turns every constant into an enum member on import (2.3 ms of a 30 ms search on the
Intel box of docs/benchmarks.md), and one connection needs none of its extras.
"""

from __future__ import annotations

import _socket
import os
import pwd
import struct
import sys
import time

PROTOCOL_VERSION = 1
# Requests are small; replies carry search results with their text.
MAX_REQUEST_BYTES = 1 << 20
MAX_REPLY_BYTES = 64 << 20
HEADER = struct.Struct(">I")
SUN_PATH_MAX = 104 if sys.platform == "darwin" else 108
CONNECT_RETRY_SECONDS = 2.0


class DaemonNotRunning(Exception):
    def __init__(self, path: str | os.PathLike, reason: str):
        super().__init__(
            f"tarsd is not running (no answer on {path}: {reason}); start it with `tarsd --vault PATH` or your service manager"
        )
        self.path = path


class PermissionDenied(DaemonNotRunning):
    """The socket, or a folder above it, is not this user's to open: a tarsd may well run there,
    for someone else. Said as such, not as "not running", which would send the user to start one."""

    def __init__(self, path: str | os.PathLike):
        blocked = _first_reachable(path)
        owner = _owner(blocked)
        Exception.__init__(
            self,
            f"permission denied: cannot reach tarsd's socket {path}: {blocked} belongs to {owner}, and tarsd answers only "
            f"the user who runs it; run tarsctl as {owner}, or start a tarsd of your own (tarsd --vault PATH) "
            "with TARS_SOCKET unset or set to a path of yours",
        )
        self.path = path


class ProtocolError(Exception):
    """The daemon sent something this client cannot read."""


def _first_reachable(path: str | os.PathLike) -> str:
    """The socket itself when it can be looked at, else the nearest folder above it that can:
    the one whose permissions keep this user out."""
    candidate = os.fspath(path)
    while True:
        try:
            os.stat(candidate)
            return candidate
        except OSError:
            parent = os.path.dirname(os.path.abspath(candidate))
            if parent == candidate:
                return os.fspath(path)
            candidate = parent


def _owner(path: str) -> str:
    try:
        uid = os.stat(path).st_uid
    except OSError:
        return "another user"
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


class FrameSocket:
    """One connection to tarsd, carrying frames of bytes."""

    def __init__(self, path: str | os.PathLike | None = None, timeout: float | None = None):
        self.path = path or default_socket_address()
        self.timeout = timeout
        self._sock: _socket.socket | None = None

    @property
    def is_open(self) -> bool:
        return self._sock is not None

    def open(self) -> None:
        try:
            owner = os.stat(self.path).st_uid
        except PermissionError as exc:
            raise PermissionDenied(self.path) from exc
        except OSError:
            owner = os.getuid()  # missing: connect() below says so
        if owner != os.getuid():
            # Someone else's socket could be an impostor collecting your queries.
            raise ProtocolError(f"refusing to talk to {self.path}: it belongs to uid {owner}, not to you; check TARS_SOCKET / --socket")
        self._sock = self._connect()

    def _connect(self) -> _socket.socket:
        # A full listen queue (a burst of clients) refuses a Unix-socket connect with EAGAIN at
        # once: retry for a moment, as the daemon accepts them quickly.
        deadline = time.monotonic() + (CONNECT_RETRY_SECONDS if self.timeout is None else min(self.timeout, CONNECT_RETRY_SECONDS))
        while True:
            sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
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

    def send(self, body: bytes) -> None:
        assert self._sock is not None
        try:
            self._sock.sendall(HEADER.pack(len(body)) + body)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise DaemonNotRunning(self.path, "the connection closed") from exc

    def receive(self) -> bytes:
        """The next frame's body."""
        (length,) = HEADER.unpack(self._read_exactly(HEADER.size))
        if length > MAX_REPLY_BYTES:
            raise ProtocolError(f"tarsd announced a {length}-byte reply, over the {MAX_REPLY_BYTES}-byte limit")
        return self._read_exactly(length)

    def closed_by_daemon(self) -> bool:
        assert self._sock is not None
        # Non-blocking for the peek: with a timeout set, Python waits for data before recv.
        self._sock.setblocking(False)
        try:
            return self._sock.recv(1, _socket.MSG_PEEK) == b""
        except BlockingIOError:
            return False  # open, nothing waiting
        except OSError:
            return True
        finally:
            self._sock.settimeout(self.timeout)

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


def default_socket_address() -> str:
    """``$TARS_SOCKET``, else ``$XDG_RUNTIME_DIR/tars/tarsd.sock`` on Linux, else a short
    per-user path under /tmp (macOS's $TMPDIR is too long for a socket address)."""
    if os.environ.get("TARS_SOCKET"):
        return os.path.expanduser(os.environ["TARS_SOCKET"])
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and sys.platform != "darwin":
        return os.path.join(runtime, "tars", "tarsd.sock")
    return f"/tmp/tars-{os.getuid()}/tarsd.sock"
