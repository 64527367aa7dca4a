"""The Unix socket door: the listener (its path, its permissions, the peer's uid, the cap on
connections and file descriptors), the hello exchange, and the framing of each connection
(a 4-byte length and a body, bounded in size and time; the body msgpack or, when the hello
was JSON, JSON: codecs.py). What a request means is not
here: each one goes to ``tarsd.serve.handlers.dispatch``.

Each connection is its own task, so a slow or vanished client only ever blocks itself.
A malformed frame gets a typed Error and closes that one connection; the daemon keeps
serving everyone else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource
import socket
import struct
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

from tarsctl.authority import AUTHORITY, Principal
from tarsctl.protocol import Error, Hello, Message, Welcome
from tarsctl.socket_path import socket_dir_problem
from tarsctl.transport import HEADER, MAX_REQUEST_BYTES, PROTOCOL_VERSION, SUN_PATH_MAX
from tarsd import __version__
from tarsd.serve.codecs import MSGPACK, Codec, codec_of
from tarsd.serve.handlers import dispatch
from tarsd.serve.handlers.common import Peer, RequestError
from tarsd.serve.parts import DaemonParts

log = logging.getLogger(__name__)

CAPABILITIES = [
    "search",
    "index",
    "status",
    "progress",
    "stop",
    "chat",
    "cancel",
    "remember",
    "feedback",
    "review",
    "forget",
    "remember_modes",
    "links",
    "related",
    "read_note",
    "sessions",
    "conversations",
    "pending_rules",
    "conversation_history",
    "tools",
    "tool_approvals",
    "memory_review",  # memory_review, memory_proposals, decide_memory_proposals, memory_undo
]
WRITE_TIMEOUT_SECONDS = 30.0
ACCEPT_BACKLOG = 128
REFUSAL_READ_SECONDS = 1.0
# File descriptors kept for SQLite, the watcher, the model and logs, whatever clients do.
FD_RESERVE = 160
ACCEPT_ERROR_LOG_SECONDS = 60.0


def raise_fd_limit() -> int:
    """Raise the soft limit on open files to the hard limit (many clients, many readers);
    returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else 65536
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass
    return soft


def connection_cap(configured: int) -> int:
    """Connections tarsd accepts at once: the configured number, less if file descriptors are short."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return configured
    return max(8, min(configured, soft - FD_RESERVE))


class AcceptErrorFilter:
    """asyncio logs every failed accept (EMFILE) with a traceback: once a minute is enough."""

    def __init__(self) -> None:
        self.last = float("-inf")
        self.suppressed = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict) -> None:
        message = str(context.get("message", ""))
        if "accept" not in message:
            loop.default_exception_handler(context)
            return
        now = time.monotonic()
        if now - self.last < ACCEPT_ERROR_LOG_SECONDS:
            self.suppressed += 1
            return
        extra = f" ({self.suppressed} more since the last report)" if self.suppressed else ""
        log.error("cannot accept connections: %s%s; tarsd keeps serving open ones", context.get("exception", message), extra)
        self.last, self.suppressed = now, 0


def lowered_principal(acts_as: str) -> Principal:
    """The connection's principal: the user at the terminal, unless the hello lowers it to a
    principal with fewer rights (tarsctl mcp says it is an MCP client). Raising it is refused."""
    if not acts_as:
        return Principal.TERMINAL
    try:
        wanted = Principal(acts_as)
    except ValueError:
        raise RequestError("bad_request", f"hello: acts_as {acts_as!r} is no principal", "see docs/security.md") from None
    if not AUTHORITY[wanted] <= AUTHORITY[Principal.TERMINAL]:
        raise RequestError("forbidden", f"hello: a socket client cannot act as {acts_as}", "leave acts_as empty")
    return wanted


class SocketInUse(Exception):
    pass


class UnsafeSocketDir(Exception):
    pass


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end (SO_PEERCRED / LOCAL_PEERCRED)."""
    try:
        if sys.platform.startswith("linux"):
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            return struct.unpack("3i", creds)[1]
        if sys.platform == "darwin":
            # struct xucred { u_int cr_version; uid_t cr_uid; short cr_ngroups; gid_t cr_groups[16]; }
            creds = sock.getsockopt(0, 0x001, struct.calcsize("IIh16I"))  # SOL_LOCAL, LOCAL_PEERCRED
            return struct.unpack_from("II", creds)[1]
    except OSError:
        return None
    return None


def prepare_socket_path(path: Path) -> None:
    """Check the address fits and its directory is safe, create that directory private if it
    is missing (a directory tars did not create is never changed), and clear a stale socket.
    Raises SocketInUse if a live daemon answers there, UnsafeSocketDir for an unsafe folder."""
    if len(os.fsencode(path)) >= SUN_PATH_MAX:
        raise SocketInUse(
            f"the socket path {path} is {len(os.fsencode(path))} bytes, over the {SUN_PATH_MAX - 1}-byte limit; "
            "set [daemon] socket or TARS_SOCKET to a shorter path"
        )
    problem = socket_dir_problem(path)
    if problem is not None:
        raise UnsafeSocketDir(f"refusing to listen on {path}: {problem}")
    directory = path.parent
    if not directory.exists():
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(directory, 0o700)  # mkdir's mode is masked by the umask
    if not path.exists() and not path.is_symlink():
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
    except OSError:
        path.unlink(missing_ok=True)  # nobody listening: a stale socket from a killed daemon
        return
    finally:
        probe.close()
    raise SocketInUse(
        f"another tarsd is already listening on {path}; stop it with `tarsctl stop`, or give this one another [daemon] socket"
    )


class _Connection(Peer):
    """Reads frames for one socket connection. During a chat the next frame is read ahead (it may
    be a cancel); a frame read ahead that is not a cancel is kept for the request loop."""

    def __init__(self, server: Server, reader: asyncio.StreamReader, codec: Codec):
        self.server = server
        self.reader = reader
        self.codec = codec
        self.pending: asyncio.Future | None = None

    async def next(self, idle_timeout: float | None = None) -> Message | None:
        """The next request, or None when the client is gone (or stayed silent past ``idle_timeout``)."""
        if self.pending is not None:
            pending, self.pending = self.pending, None
            return await pending
        try:
            return await asyncio.wait_for(self._read(), idle_timeout)
        except TimeoutError:
            return None  # an idle client frees its place; tarsctl reconnects on its own

    def read_ahead(self) -> asyncio.Future:
        if self.pending is None:
            self.pending = asyncio.ensure_future(self._read())
        return self.pending

    async def _read(self) -> Message | None:
        body = await self.server._read_body(self.reader)
        return None if body is None else self.codec.decode(body)

    def close(self) -> None:
        if self.pending is not None and not self.pending.done():
            self.pending.cancel()


class Server:
    """The listener on the Unix socket and its connections; each request read goes to the
    handlers (``dispatch``), each reply back as a frame."""

    def __init__(self, daemon: DaemonParts):
        self.daemon = daemon
        self.server: asyncio.AbstractServer | None = None
        self.connections = 0  # accepted since start
        self.refused = 0  # refused for being over the cap
        self.max_connections = 0
        self._tasks: set[asyncio.Task] = set()

    async def start(self, path: Path) -> None:
        prepare_socket_path(path)
        self.max_connections = connection_cap(self.daemon.config.daemon.max_connections)
        old = os.umask(0o077)
        try:
            self.server = await asyncio.start_unix_server(
                self._connection, path=str(path), limit=MAX_REQUEST_BYTES + HEADER.size, backlog=ACCEPT_BACKLOG
            )
        finally:
            os.umask(old)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self.server.wait_closed()

    # ---- one connection ----

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        self.connections += 1
        try:
            uid = peer_uid(writer.get_extra_info("socket"))
            if uid is not None and uid != os.getuid():
                await self._send(
                    writer,
                    Error(code="forbidden", message=f"uid {uid} may not use this tarsd", hint="run tarsctl as the user who runs tarsd"),
                )
                return
            if len(self._tasks) > self.max_connections:
                # Refuse rather than run out of file descriptors, which indexing needs too. The
                # hello is read first: closing on unread data would reset the connection and
                # lose the refusal on its way.
                self.refused += 1
                codec = MSGPACK
                with contextlib.suppress(Exception):
                    hello = await asyncio.wait_for(self._read_body(reader), REFUSAL_READ_SECONDS)
                    codec = codec_of(hello or b"")
                await self._send(
                    writer,
                    Error(
                        code="busy",
                        message=f"tarsd has {self.max_connections} connections open, the most it takes",
                        hint="try again in a moment; idle connections are closed after a while",
                    ),
                    codec,
                )
                return
            await self._converse(reader, writer)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away, perhaps mid-frame: nothing to answer
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("connection handler failed")
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _converse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        settings = self.daemon.config.daemon
        codec = MSGPACK  # until the hello says otherwise
        try:
            try:
                body = await asyncio.wait_for(self._read_body(reader), settings.hello_timeout_seconds)
            except TimeoutError:
                raise RequestError(
                    "timeout", f"no hello within {settings.hello_timeout_seconds:g} s", "send a hello frame first (docs/protocol.md)"
                ) from None
            if body is None:
                return
            codec = codec_of(body)
            hello = codec.decode(body)
            if not isinstance(hello, Hello):
                raise RequestError(
                    "bad_request", f"the first message must be hello, not {type(hello).__name__.lower()}", "see docs/protocol.md"
                )
            principal = lowered_principal(hello.acts_as)
            await self._send(writer, Welcome(protocol=PROTOCOL_VERSION, server=f"tarsd/{__version__}", capabilities=CAPABILITIES), codec)
            connection = _Connection(self, reader, codec)
            connection.principal = principal
            try:
                while True:
                    request = await connection.next(settings.idle_timeout_seconds)
                    if request is None:
                        return
                    async for reply in self.dispatch(request, connection):
                        await self._send(writer, reply, codec)
            finally:
                connection.close()
        except RequestError as exc:
            # The stream may be out of step after a bad frame: answer, then close.
            await self._send(writer, exc.error, codec)

    async def _read_body(self, reader: asyncio.StreamReader) -> bytes | None:
        """The next frame's body; None for a clean close between frames."""
        try:
            header = await reader.readexactly(HEADER.size)
        except asyncio.IncompleteReadError as exc:
            if not exc.partial:
                return None  # a clean close between frames
            raise
        (length,) = HEADER.unpack(header)
        if length > MAX_REQUEST_BYTES:
            raise RequestError(
                "too_large",
                f"a frame of {length} bytes is over the {MAX_REQUEST_BYTES}-byte limit",
                "frames are a 4-byte big-endian length and a msgpack body",
            )
        return await reader.readexactly(length)

    async def _send(self, writer: asyncio.StreamWriter, message: Message, codec: Codec = MSGPACK) -> None:
        writer.write(codec.frame(message))
        await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_SECONDS)

    def dispatch(self, request: Message, peer: Peer) -> AsyncIterator[Message]:
        """A request's replies, from its handler (tarsd/serve/handlers): the HTTP door comes in here too."""
        return dispatch(self.daemon, request, peer)
