"""The HTTP door's listener, on tarsd's own event loop: ``HttpDoor`` starts and stops it (after
and before the socket server, main.py), checks the settings and the token file first, and runs
uvicorn hardened against a neighbour holding the door shut (deadlines for a request's headers and
body, caps on open connections per client and in all, sized to the file descriptors left, and
for a webhook's unauthenticated bodies a budget of their own and a minimum pace).

Loaded only when ``[http] enabled`` is true (main.py imports this module then, and only then:
FastAPI, pydantic and uvicorn never enter a daemon that does not serve HTTP). What the listener
serves is the app (http_app) behind the guard (http_middleware); each request goes to the socket
server's dispatcher, with an ``_HttpPeer`` as its client.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import resource
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from tarsctl.authority import Principal
from tarsctl.protocol import (
    HttpStatus,
    Message,
)
from tarsd.serve.handlers.common import Peer
from tarsd.serve.http_app import MountFactory, build_app
from tarsd.serve.http_guard import (
    PUBLIC_READERS,
    ConnectionGate,
    FailureLimiter,
    HostPolicy,
    body_too_slow,
    bracketed,
    client_key,
    is_loopback,
    page_url,
)
from tarsd.serve.http_middleware import CALLER, Counters, Guard
from tarsd.serve.http_token import TokenCheck
from tarsd.serve.socket_server import FD_RESERVE
from tarsd.setup.http_tokens import TokenError, ensure_token

if TYPE_CHECKING:
    from tarsd.config.settings import HttpConfig
    from tarsd.serve.socket_server import Server

log = logging.getLogger(__name__)

# How many connections asyncio accepts at once before any is looked at; the kernel's queue of
# connections not accepted yet.
ACCEPT_BACKLOG = 64
LISTEN_QUEUE = 1024
CROWDED_LOG_SECONDS = 60.0  # at most one log line a minute about connections closed to make room
# How long new connections over a cap stay open before those that make room are chosen: long
# enough for a burst of them to be read (a real request is then in progress and stays), short
# enough that they cost little. A client sends its request as soon as it connects.
ADMIT_GRACE_SECONDS = 0.05
ADMIT_SLACK = 2 * ACCEPT_BACKLOG  # connections over a cap for that moment: two turns of the loop's accepting
LINGER_SECONDS = 1.0  # how long the rest of an unauthenticated body answered early is taken in and dropped
PACE_CHECK_SECONDS = 0.5  # how often an unauthenticated body's pace is looked at
STOP_GRACE_SECONDS = 2.0  # open requests get this long to finish when tarsd stops; then they are cancelled
CLOSE_TIMEOUT_SECONDS = 3.0


class _GuardedH11(H11Protocol):
    """uvicorn's HTTP/1.1 connection with the two things it lacks against a neighbour holding the
    door shut (slowloris): a deadline for a request's headers and one for its body (uvicorn has
    only a keep-alive timeout, and every byte received cancels it), and the caps on open
    connections per client and in all (``ConnectionGate``), checked as each connection is accepted,
    before it can cost more than its file descriptor."""

    gate: ConnectionGate  # set on the subclass that HttpDoor.start makes
    header_timeout: float
    body_timeout: float
    public_paths: tuple[str, ...] = ()  # paths that authenticate their requests themselves, from the body (a webhook)
    warned_at = float("-inf")  # when the caps were last said to be reached, in the log
    trimming: asyncio.TimerHandle | None = None  # the gate's trim, due a moment after connections over a cap came
    readers_warned_at = float("-inf")  # when unauthenticated bodies were last said to be at their budget

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = None
        self._reading: object = None  # the h11 state the running deadline is for
        self._pace: asyncio.TimerHandle | None = None  # while an unauthenticated body is read: its pace's check
        self._pace_started, self._pace_bytes = 0.0, 0
        self._lingering = False  # answered before its body was read: the rest is dropped, then the connection closed
        client = client_key(self.client[0] if self.client else "unknown")
        self._made_room(self.gate.admit(self, client, self.loop.time()), client)
        if self.gate.crowded(client) and type(self).trimming is None:
            type(self).trimming = self.loop.call_later(ADMIT_GRACE_SECONDS, self._trim, client)
        if not transport.is_closing():
            self._watch()

    def _trim(self, client: str) -> None:
        type(self).trimming = None
        self._made_room(self.gate.trim(came_before=self.loop.time() - ADMIT_GRACE_SECONDS), client)
        if self.gate.crowded():  # some came too lately to be judged yet, or requests are in progress
            type(self).trimming = self.loop.call_later(ADMIT_GRACE_SECONDS, self._trim, client)

    def _made_room(self, closing: list, client: str) -> None:
        for connection in closing:
            connection.transport.close()
        if closing and self.loop.time() - type(self).warned_at > CROWDED_LOG_SECONDS:
            type(self).warned_at = self.loop.time()
            log.warning(
                "HTTP: a new connection from %s found the connections at their cap (%d per client, %d in all): "
                "closing the longest idle to make room (a stuck client, or someone holding the door; said once a minute)",
                client,
                self.gate.per_client,
                self.gate.total,
            )

    def connection_lost(self, exc: Exception | None) -> None:
        self.gate.release(self)
        self._unwatch()
        self._stop_pace()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return  # the rest of a body already answered: dropped unread
        if self._pace is not None:
            self._pace_bytes += len(data)
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        if self._public() and self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
            # Answered before its body was read (413): nothing more of it is wanted, and a sender
            # nobody knows gets no connection to go on dribbling into. The answer's end is marked
            # at once and the connection closed a moment later: closed at once, the bytes still
            # coming in would make the kernel reset it, and the sender might never see the 413.
            self._lingering = True
            if self.transport.can_write_eof():
                self.transport.write_eof()
            self.loop.call_later(LINGER_SECONDS, self.transport.close)
        super().on_response_complete()
        self._watch()

    def _public(self) -> bool:
        """Whether the request in progress is one that authenticates itself from its body."""
        if self.cycle is None:
            return False
        path = self.cycle.scope.get("path", "")
        return any(path == own or path.startswith(own + "/") for own in self.public_paths)

    def _watch(self) -> None:
        """After anything that moves the connection on: is a request in progress (not to be closed
        to make room), is it an unauthenticated body being read (closable, under its own budget
        and pace), and is a request being read (under a deadline)?"""
        if self.cycle is None or self.cycle.response_complete:
            self.gate.idle(self)
            self._stop_pace()
        elif self.conn.their_state is h11.SEND_BODY and self._public() and not self.transport.is_closing():
            self._read_public()
        else:
            self.gate.busy(self)
            self._stop_pace()
        state = self.conn.their_state
        if self.transport.is_closing() or state not in (h11.IDLE, h11.SEND_BODY):
            return self._unwatch()
        if state is h11.IDLE and self.timeout_keep_alive_task is not None:
            return self._unwatch()  # between requests, before any byte of the next: uvicorn's keep-alive timeout
        if state is not self._reading:  # a new phase: the headers (from the first byte), then the body
            self._unwatch()
            self._reading = state
            limit = self.header_timeout if state is h11.IDLE else self.body_timeout
            self._deadline = self.loop.call_later(limit, self._too_slow)

    def _unwatch(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline, self._reading = None, None

    def _too_slow(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            what = "headers" if self._reading is h11.IDLE else "body"
            log.debug("HTTP: closed a connection from %s: its request's %s were too slow to arrive", self.client, what)
            self.transport.close()

    def _read_public(self) -> None:
        """The body of a request nobody has authenticated yet is being read: it takes one of the
        gate's places for such bodies (closing the one reading longest when they are taken) and
        must keep a minimum pace (``body_too_slow``), checked every PACE_CHECK_SECONDS."""
        closing = self.gate.reading(self)
        for connection in closing:
            connection.transport.close()
        if closing and self.loop.time() - type(self).readers_warned_at > CROWDED_LOG_SECONDS:
            type(self).readers_warned_at = self.loop.time()
            log.warning(
                "HTTP: %d unauthenticated request bodies (a webhook's) were being read at once: closing the one "
                "reading longest to make room (someone holding the webhook, or a very slow sender; said once a minute)",
                self.gate.readers,
            )
        if self._pace is None:
            self._pace_started, self._pace_bytes = self.loop.time(), 0
            self._pace = self.loop.call_later(PACE_CHECK_SECONDS, self._check_pace)

    def _check_pace(self) -> None:
        self._pace = None
        if self.transport.is_closing() or self.cycle is None or self.cycle.response_complete:
            return
        if self.conn.their_state is not h11.SEND_BODY:
            return
        if not self.flow.read_paused and body_too_slow(self._pace_bytes, self.loop.time() - self._pace_started):
            log.debug("HTTP: closed a connection from %s: an unauthenticated body too slow to arrive", self.client)
            self.transport.close()
            return
        # Paused: tarsd is not taking the bytes (its buffer is full), so the sender is not to blame.
        self._pace = self.loop.call_later(PACE_CHECK_SECONDS, self._check_pace)

    def _stop_pace(self) -> None:
        if self._pace is not None:
            self._pace.cancel()
            self._pace = None


def connection_budget(configured: int, socket_connections: int) -> int:
    """HTTP connections open at once: the configured number, less when file descriptors are
    short. The Unix socket's own connections and the daemon's reserve (the database, the
    watcher, the model) come first, so that an HTTP flood never stops tarsctl; so do the
    connections accepted but not yet closed in a flood: asyncio accepts up to the backlog at
    each turn of the loop, and a connection over the cap is closed three turns later; and so do
    the connections a moment over the caps (the gate's slack) and the unauthenticated bodies
    being read (the gate's readers, outside the caps)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return configured
    return max(8, min(configured, soft - FD_RESERVE - socket_connections - 4 * ACCEPT_BACKLOG - ADMIT_SLACK - PUBLIC_READERS))


def _usable_token(path: Path, what: str) -> TokenCheck:
    """The check of the token in ``path``, made there first when there is none; HttpStartError
    when the file cannot be used (others can read it, another owner, too short)."""
    token = TokenCheck(path, what)
    if token.error:
        ensure_token(path)
        token = TokenCheck(path, what)
    if token.error:
        raise HttpStartError(token.error)
    return token


class _Uvicorn(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self):
        # tarsd owns SIGTERM and SIGINT (main.py) and stops this server itself.
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        # asyncio listens with the backlog it accepts at once (ACCEPT_BACKLOG, kept small for the
        # file descriptors); the kernel's queue is made longer again, so that in a flood of
        # connections a real one is queued rather than dropped (a dropped SYN waits 1 s or more).
        for sock in sockets or []:
            sock.listen(LISTEN_QUEUE)


def listen(host: str, port: int, backlog: int) -> socket.socket:
    """A listening TCP socket: bound here, so a taken port is a clear error and port 0 gets a real port."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class HttpStartError(Exception):
    """The listener cannot start; the message says why and what to do."""


class _HttpPeer(Peer):
    """The client of one HTTP request. It sends no frames after its request: a chat ends early
    when the stream is closed (the request is cancelled) or when tarsd stops (``stopping``)."""

    door = "http"

    def __init__(self, stopping: asyncio.Future, principal: Principal):
        self.stopping = stopping
        self.principal = principal

    def read_ahead(self) -> asyncio.Future:
        return self.stopping


@dataclass
class HttpDoor:
    """The HTTP listener: started after the socket server, stopped before it (main.py)."""

    server: Server
    settings: HttpConfig
    token_file: Path
    mounts: list[MountFactory] = field(default_factory=list)
    url: str = ""
    counters: Counters = field(default_factory=Counters)
    # The MCP clients' token (tarsctl mcp token): None, no such token is accepted (tests of the door alone).
    mcp_token_file: Path | None = None

    def __post_init__(self) -> None:
        self._ids = itertools.count(1)
        self._task: asyncio.Task | None = None
        self._uvicorn: _Uvicorn | None = None
        self._stopping: asyncio.Future | None = None
        self._lifespans = contextlib.AsyncExitStack()
        self.gate: ConnectionGate | None = None

    def dispatch(self, request: Message, principal: Principal | None = None) -> AsyncIterator[Message]:
        """Run ``request`` as ``principal``; by default as whoever the guard found the caller to be
        (from its token). A mount that always serves one kind of caller names it (MCP: an MCP client)."""
        assert self._stopping is not None
        request.id = next(self._ids)
        return self.server.dispatch(request, _HttpPeer(self._stopping, CALLER.get() if principal is None else principal))

    async def start(self) -> None:
        settings = self.settings
        host = settings.host.strip()
        lan = not is_loopback(host)
        if lan and not settings.lan:
            raise HttpStartError(
                f"[http] host = {host!r} would serve beyond this machine: set [http] lan = true as well to mean it "
                '(and read the README on TLS: a reverse proxy or Tailscale), or use host = "127.0.0.1"'
            )
        try:
            token = _usable_token(self.token_file, "HTTP")
            mcp_token = None if self.mcp_token_file is None else _usable_token(self.mcp_token_file, "MCP")
            limiter = FailureLimiter(settings.auth_failures_burst, settings.auth_failures_per_second)
            total = connection_budget(settings.max_connections, self.server.max_connections)
            self.gate = ConnectionGate(min(settings.max_connections_per_client, total), total, slack=ADMIT_SLACK)
            if not (settings.header_timeout_seconds > 0 and settings.body_timeout_seconds > 0):
                raise ValueError(
                    "[http] header_timeout_seconds and body_timeout_seconds must be above 0 "
                    f"(got {settings.header_timeout_seconds}, {settings.body_timeout_seconds})"
                )
        except (OSError, ValueError, TokenError) as exc:
            raise HttpStartError(str(exc)) from exc
        try:
            sock = listen(host, settings.port, backlog=ACCEPT_BACKLOG)
        except OSError as exc:
            raise HttpStartError(
                f"cannot listen on {bracketed(host)}:{settings.port}: {exc.strerror or exc}; "
                "set [http] port to a free port (or stop what uses it)"
            ) from exc
        port = sock.getsockname()[1]
        policy = HostPolicy(port, host, settings.hostnames, settings.origins)
        self.url = page_url(host, port)
        loop = asyncio.get_running_loop()
        self._stopping = loop.create_future()
        mounts = [factory(self.dispatch) for factory in self.mounts]
        own = tuple(mount.path for mount in mounts if mount.authenticates)
        app = Guard(build_app(self.dispatch, self._stopping, mounts), policy, token, limiter, self.counters, own, mcp_token)
        protocol = type(
            "GuardedH11",
            (_GuardedH11,),
            {
                "gate": self.gate,
                "header_timeout": settings.header_timeout_seconds,
                "body_timeout": settings.body_timeout_seconds,
                "public_paths": own,
            },
        )
        config = uvicorn.Config(
            app,
            lifespan="off",
            http=protocol,
            ws="none",
            log_config=None,  # tarsd's logging; no access log (paths and addresses only; tokens never travel in URLs)
            access_log=False,
            server_header=False,
            backlog=ACCEPT_BACKLOG,
            proxy_headers=False,  # the peer address is the one rate-limited; a local process could forge X-Forwarded-For
            # No limit_concurrency: it answers 503 to every request while as many connections are
            # open, however idle; the gate caps connections instead, closing idle ones to make room.
            timeout_graceful_shutdown=STOP_GRACE_SECONDS,
        )
        try:
            for mount in mounts:
                if mount.lifespan is not None:
                    await self._lifespans.enter_async_context(mount.lifespan())
        except Exception:
            sock.close()
            raise
        logging.getLogger("uvicorn.error").setLevel(logging.WARNING)  # its "started" and "shutting down" lines: tarsd says so
        self._uvicorn = _Uvicorn(config)
        self._task = asyncio.create_task(self._uvicorn.serve(sockets=[sock]), name="http")
        self._task.add_done_callback(_report_end)
        if lan:
            log.warning(
                "the HTTP API listens on %s:%d, beyond this machine, over plain HTTP: the token and your notes cross the "
                "network unencrypted. Put it behind a reverse proxy with TLS, or reach it over Tailscale (README).",
                bracketed(host),
                port,
            )
        log.info("HTTP API and web page on %s (the token: `tarsctl http token`)", self.url)

    async def close(self) -> None:
        """Chats in progress end (cancelled, with their chat_done), other streams get an error event,
        new connections are refused; whatever is still open after a moment is cancelled."""
        if self._stopping is not None and not self._stopping.done():
            self._stopping.set_result(None)
        if self._uvicorn is not None and self._task is not None:
            self._uvicorn.should_exit = True
            try:
                await asyncio.wait_for(asyncio.shield(self._task), CLOSE_TIMEOUT_SECONDS)
            except TimeoutError:
                self._uvicorn.force_exit = True
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await self._task
        with contextlib.suppress(Exception):
            await self._lifespans.aclose()

    def describe(self) -> HttpStatus:
        return HttpStatus(
            enabled=True,
            url=self.url,
            lan=not is_loopback(self.settings.host.strip()),
            requests=self.counters.requests,
            auth_failures=self.counters.auth_failures,
            rate_limited=self.counters.rate_limited,
        )


def _report_end(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the HTTP listener failed: %r", task.exception())
