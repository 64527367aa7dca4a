"""One MCP server, kept connected: started (a subprocess on stdio, or streamable HTTP), its tool
list fetched and cached, fetched again on ``notifications/tools/list_changed``, calls made with a
time limit, and, when the connection ends (a crash, a kill, a closed pipe), started again after
a back-off that doubles up to ``restart_max_seconds``. Everything here runs on the tool servers'
own event loop (tarsd/tools/servers.py).

The SDK's ``Client`` does the protocol: the handshake, requests, pagination cursors, the HTTP
session. The transports are tars's own where the SDK's fall short: a stdio server's process, its
exit and its shutdown (tarsd/tools/stdio_transport.py), and long strings cut while they stream in
on both (tarsd/tools/cut_stream.py, tarsd/tools/http_transport.py). ``ClientSessionGroup`` is not used: it names tools by
the server's own name rather than the user's, and one connection's failure is every one's there.
The connection speaks the initialize handshake ("legacy" mode), which every MCP server in use
today answers, and on which ``list_changed`` arrives as a plain notification.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
from mcp import Client, MCPError, types
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CONNECTION_CLOSED

from tarsd import __version__
from tarsd.config.settings import McpConfig, McpServerConfig
from tarsd.setup.private_files import read_env_file, read_headers_file
from tarsd.tools.circuit import Circuit
from tarsd.tools.cut_stream import MAX_MESSAGE_BYTES
from tarsd.tools.http_transport import CuttingTransport
from tarsd.tools.names import server_name_problem
from tarsd.tools.results import ResultText, result_text, unmarked
from tarsd.tools.stdio_transport import stdio_transport

log = logging.getLogger(__name__)

CLIENT_INFO = types.Implementation(name="tarsd", version=__version__)
# A connection that stayed up this long starts its next back-off from the beginning.
HEALTHY_SECONDS = 60.0
MAX_LIST_PAGES = 20  # tools/list pages (cursor after cursor): a server that never stops paging is cut here
MAX_TOOLS = 500  # per server: past this the rest are left out (the model could not choose among them anyway)
STDERR_LINES = 20  # the end of a stdio server's stderr, kept for status (it says why a server died)
STDERR_LINE_CHARS = 500
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)  # as the SDK's own HTTP client: a response stream may stay open


class ConnectionEnded(Exception):
    """The connection ended: the server exited or closed its pipe, or the HTTP session was dropped."""


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """What came of a call. ``text`` is the server's (its result, or its error answer): untrusted,
    for the model only inside a data block. ``note`` is tars's own sentence when the call did not
    reach the server or got no answer; the server's words (its stderr) never go into it."""

    status: str  # ok: the server answered (the tool may still report an error: is_error) | failed | unavailable | cancelled
    text: str = ""
    note: str = ""
    is_error: bool = False
    chars: int = 0  # of the whole result before the cut
    duration: float = 0.0  # seconds, from sending the request to its answer

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(slots=True)
class StderrTail:
    """The last lines a stdio server wrote to stderr, read as they come (so a server that floods
    its stderr never blocks on a full pipe) and kept bounded."""

    lines: deque = field(default_factory=lambda: deque(maxlen=STDERR_LINES))

    def follow(self, fd: int) -> None:
        """Read ``fd`` until end of file, in a thread of its own (the read blocks)."""

        def read() -> None:
            partial = b""
            try:
                while chunk := os.read(fd, 65536):
                    *complete, partial = (partial + chunk).split(b"\n")
                    partial = partial[-STDERR_LINE_CHARS:]  # a line with no end in sight: keep its tail
                    for line in complete[-STDERR_LINES:]:
                        if line.strip():
                            self.lines.append(line.decode("utf-8", "replace")[:STDERR_LINE_CHARS])
            except OSError:
                pass
            finally:
                if partial.strip():
                    self.lines.append(partial.decode("utf-8", "replace")[:STDERR_LINE_CHARS])
                os.close(fd)

        threading.Thread(target=read, name="mcp-stderr", daemon=True).start()

    def last(self) -> str:
        return self.lines[-1] if self.lines else ""


class OncePerMinute(logging.Filter):
    """Lets one "Failed to parse" record a minute through: the stdio transport logs each line a
    server writes to stdout that is not a protocol message, and a server that prints its own logs
    there would fill tarsd's log. The count of the others goes with the next one let through; the
    other records pass as they are."""

    def __init__(self) -> None:
        super().__init__()
        self.last = float("-inf")
        self.dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("Failed to parse"):
            return True
        now = time.monotonic()
        if now - self.last < 60.0:
            self.dropped += 1
            return False
        if self.dropped:
            record.msg = f"{record.msg} ({self.dropped} more like it in the last minute)"
        self.last, self.dropped = now, 0
        record.exc_info, record.exc_text = None, None  # the line's parse error, not a bug in tars
        return True


_STDIO_LOG = logging.getLogger("tarsd.tools.stdio_transport")
if not any(isinstance(f, OncePerMinute) for f in _STDIO_LOG.filters):
    _STDIO_LOG.addFilter(OncePerMinute())


class _EndWatch:
    """The transport's read stream, passed through, that sets ``ended`` when the stream ends: the
    SDK's ``ReadStream`` protocol (mcp/shared/_stream_protocols.py), so the session reads it as it
    would the stream itself. That end is how a server that dies while idle is noticed at once."""

    def __init__(self, stream: Any, ended: asyncio.Event):
        self._stream = stream
        self._ended = ended

    async def receive(self) -> Any:
        try:
            return await self._stream.receive()
        except BaseException as exc:
            if not isinstance(exc, asyncio.CancelledError):
                self._ended.set()
            raise

    def __aiter__(self) -> _EndWatch:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        self._ended.set()
        await self._stream.aclose()

    async def __aenter__(self) -> _EndWatch:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:  # last_context and anything else the session looks for
        return getattr(self._stream, name)


class ServerConnection:
    """One configured server and its connection (every method runs on the tool servers' loop,
    except the plain reads of its state by ``describe`` from other threads)."""

    def __init__(self, name: str, settings: McpServerConfig, mcp: McpConfig):
        self.name = name
        self.settings = settings
        self.mcp = mcp
        self.transport = "http" if settings.url else "stdio"
        self.state = "stopped" if not settings.enabled else "starting"  # starting | ready | restarting | failed | stopped | misconfigured
        self.error = self.config_problem()  # the last problem, for status (kept after a restart: it says why)
        self.error_at = time.time() if self.error else 0.0
        if self.error:
            self.state = "misconfigured"
        self.tools: list[types.Tool] = []  # the last list fetched (kept while the server restarts)
        self.restarts = 0
        self.connected_at = 0.0
        self.next_start_at = 0.0
        self.server_info = ""
        self.stderr = StderrTail()
        self.circuit = Circuit(mcp.failures_to_open, mcp.open_seconds)
        self.on_tools_changed = lambda: None  # set by the servers: the catalog is made again
        self._client: Client | None = None
        self._scope: anyio.CancelScope | None = None
        self._ended = asyncio.Event()
        self._relist = asyncio.Event()
        # In the cut marks of long strings cut while they stream in (tarsd/tools/cut_stream.py):
        # random, so no server can make its own text read as a cut.
        self.nonce = secrets.token_hex(8)
        self.ready = asyncio.Event()  # set once the tools are listed (again after each restart)

    @property
    def timeout(self) -> float:
        return self.mcp.call_timeout_seconds if self.settings.timeout_seconds is None else self.settings.timeout_seconds

    def config_problem(self) -> str:
        settings = self.settings
        if problem := server_name_problem(self.name):
            return problem
        if bool(settings.command) == bool(settings.url):
            return f"[mcp.servers.{self.name}] needs exactly one of command (a program on stdio) and url (streamable HTTP)"
        if settings.url and not settings.url.startswith(("http://", "https://")):
            return f"[mcp.servers.{self.name}] url must start with http:// or https://, not {settings.url!r}"
        if settings.command and not settings.command[0].strip():
            return f"[mcp.servers.{self.name}] command starts with an empty program name"
        if settings.url and (settings.command or settings.env or settings.env_file or settings.cwd):
            return f"[mcp.servers.{self.name}] env, env_file and cwd are for a command; a url server takes headers_file"
        if settings.command and settings.headers_file:
            return f"[mcp.servers.{self.name}] headers_file is for a url server; a command takes env_file"
        return ""

    # ---- the connection's life ----

    async def run(self, stop: asyncio.Event) -> None:
        """Connect, serve, and connect again after each end, until ``stop``."""
        if self.state in ("misconfigured", "stopped"):
            return
        delay = self.mcp.restart_seconds
        while not stop.is_set():
            began = time.monotonic()
            try:
                await self._serve(stop)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure of a server is its state, never tarsd's
                self.error, self.error_at = self._describe_failure(exc), time.time()
                log.warning("MCP server %s: %s", self.name, self.error)
            finally:
                self._client = None
                self.ready.clear()
            if stop.is_set():
                break
            if time.monotonic() - began > HEALTHY_SECONDS:
                delay = self.mcp.restart_seconds
            self.state = "restarting" if self.tools else "failed"
            self.next_start_at = time.time() + delay
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
            delay = min(delay * 2, self.mcp.restart_max_seconds)
            self.restarts += 1
        self.state = "stopped"

    async def _serve(self, stop: asyncio.Event) -> None:
        """One connection, from its start to its end. It runs in an anyio cancel scope, not under
        asyncio's own timeout or task.cancel(): the stdio transport shields a server's shutdown
        (stdin closed, then the kill) from anyio's cancellation only, and a native cancel would leave the
        process running. The scope's deadline is the start timeout until the tools are listed."""
        self._ended = asyncio.Event()
        with anyio.CancelScope(deadline=anyio.current_time() + self.mcp.start_timeout_seconds) as scope:
            self._scope = scope
            try:
                await self._connect_and_serve(stop, scope)
            finally:
                self._scope = None
        if scope.cancelled_caught and not stop.is_set():
            raise TimeoutError

    def cancel(self) -> None:
        """Stop the connection now, whatever it is doing (tarsd is stopping); on the servers' loop."""
        if self._scope is not None:
            self._scope.cancel()

    async def _connect_and_serve(self, stop: asyncio.Event, scope: anyio.CancelScope) -> None:
        async with contextlib.AsyncExitStack() as stack:
            transport = await self._transport(stack)
            client = Client(
                _watched(transport, self._ended),
                mode="legacy",
                cache=None,  # the list is cached here, and fetched again on list_changed
                client_info=CLIENT_INFO,
                message_handler=self._on_message,
            )
            await stack.enter_async_context(client)
            await self._list_tools(client)
            scope.deadline = math.inf  # started: no time limit from now on
            info = client.server_info
            self.server_info = f"{info.name} {info.version}" if info is not None else ""
            self._client = client
            self.connected_at = time.time()
            self.state, self.next_start_at = "ready", 0.0  # the last error stays: status shows why it restarted
            self.ready.set()
            log.info("MCP server %s ready: %d tools (%s)", self.name, len(self.tools), self.server_info or self.transport)
            while True:
                waits = [asyncio.ensure_future(event.wait()) for event in (stop, self._ended, self._relist)]
                try:
                    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for waiting in waits:
                        waiting.cancel()
                if stop.is_set():
                    return
                if self._ended.is_set():
                    raise ConnectionEnded("the connection ended (the server exited or closed it)")
                self._relist.clear()
                try:
                    with anyio.fail_after(self.mcp.start_timeout_seconds):
                        await self._list_tools(client)
                except (TimeoutError, MCPError) as exc:
                    log.warning("MCP server %s: could not fetch its changed tool list: %s", self.name, exc)

    async def _transport(self, stack: contextlib.AsyncExitStack):
        """The transport (an async context manager giving the Client its streams) for this server, its secrets read now."""
        settings = self.settings  # a secrets file that cannot be used raises SecretFileError, which says why
        if settings.url:
            headers = read_headers_file(settings.headers_file) if settings.headers_file else {}
            cutting = CuttingTransport(httpx2.AsyncHTTPTransport(), self.mcp.max_result_chars, self.nonce)
            http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=HTTP_TIMEOUT, transport=cutting))
            # Events arrive cut (CuttingTransport): the SDK's own limit on an event's size (1 MiB,
            # past which it drops the connection) is set to what a cut message may be.
            return streamable_http_client(settings.url, http_client=http, max_sse_event_size=MAX_MESSAGE_BYTES + 65536)
        env = dict(settings.env)
        if settings.env_file:
            env.update(read_env_file(settings.env_file))
        # stderr goes through a pipe of ours, read as it comes: its last lines say why a server died.
        read_end, write_end = os.pipe()
        self.stderr = StderrTail()
        self.stderr.follow(read_end)
        errlog = os.fdopen(write_end, "w")
        stack.callback(errlog.close)  # the child holds its own copy: ours is closed when this connection ends
        return stdio_transport(
            settings.command[0],
            list(settings.command[1:]),
            env or None,
            settings.cwd or None,
            errlog,
            self.mcp.max_result_chars,
            self.nonce,
        )

    async def _list_tools(self, client: Client) -> None:
        tools: list[types.Tool] = []
        cursor = None
        for _ in range(MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor or len(tools) >= MAX_TOOLS:
                break
        if len(tools) > MAX_TOOLS:
            log.warning("MCP server %s lists %d tools: the first %d are used", self.name, len(tools), MAX_TOOLS)
        self.tools = tools[:MAX_TOOLS]
        self.on_tools_changed()

    def description(self, tool: types.Tool) -> str:
        """The tool's description, without the mark of a cut made while it streamed in (one over
        max_result_chars): the catalog cuts it far shorter anyway."""
        return unmarked(tool.description or "", self.nonce)[0]

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._relist.set()
        elif isinstance(message, Exception):
            log.debug("MCP server %s sent something unreadable: %s", self.name, message)

    def _describe_failure(self, exc: BaseException) -> str:
        if isinstance(exc, TimeoutError):
            what = f"did not start and list its tools within {self.mcp.start_timeout_seconds:g} s"
        elif isinstance(exc, FileNotFoundError):
            what = f"cannot start {self.settings.command[0]!r}: no such program (is it installed, and on tarsd's PATH?)"
        elif isinstance(exc, PermissionError):
            what = f"cannot start {self.settings.command[0]!r}: permission denied"
        elif isinstance(exc, httpx2.HTTPError):
            what = f"cannot reach {self.settings.url}: {exc}"
        elif isinstance(exc, BaseExceptionGroup):
            inner = exc.exceptions[0] if exc.exceptions else exc
            return self._describe_failure(inner)
        else:
            what = str(exc) or type(exc).__name__
        said = self.stderr.last() if self.transport == "stdio" else ""
        return what + (f"; its last words on stderr: {said!r}" if said else "")

    # ---- calls ----

    async def call(self, tool: str, arguments: dict) -> CallOutcome:
        """Call ``tool``; never raises: a server that is down, hangs or fails gives an outcome saying so."""
        client = self._client
        if client is None:
            when = f"; it is tried again at {time.strftime('%H:%M:%S', time.localtime(self.next_start_at))}" if self.next_start_at else ""
            return CallOutcome("unavailable", note=f"the server {self.name} is not connected ({self.state}{when})")
        if (refusal := self.circuit.admit()) is not None:
            return CallOutcome("unavailable", note=f"the server {self.name} is {refusal}")
        began = time.monotonic()
        try:
            with anyio.fail_after(self.timeout):
                result = await client.call_tool(tool, arguments)
        except TimeoutError:
            return self._failed(f"no answer within {self.timeout:g} s: the call was abandoned", began)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self._ended.set()
                return self._failed("the server stopped during the call; it is started again", began)
            # An error answer from a working server (an unknown tool, arguments it refuses).
            self.circuit.succeeded()
            message, left_out = unmarked(exc.message, self.nonce)
            return CallOutcome("ok", text=message, is_error=True, chars=len(message) + left_out, duration=time.monotonic() - began)
        except Exception as exc:  # noqa: BLE001 - a result the SDK cannot read, a transport error
            return self._failed(f"the call failed: {type(exc).__name__}: {exc}", began)
        self.circuit.succeeded()
        text: ResultText = result_text(result, self.mcp.max_result_chars, self.nonce)
        return CallOutcome("ok", text=text.text, is_error=text.is_error, chars=text.chars, duration=time.monotonic() - began)

    def _failed(self, reason: str, began: float) -> CallOutcome:
        self.circuit.failed(reason)
        said = self.stderr.last() if self.transport == "stdio" else ""
        self.error, self.error_at = reason + (f"; its last words on stderr: {said!r}" if said else ""), time.time()
        return CallOutcome("failed", note=reason, duration=time.monotonic() - began)


@contextlib.asynccontextmanager
async def _watched(transport, ended: asyncio.Event):
    """``transport`` with its read stream watched for its end (``_EndWatch``)."""
    async with transport as (read_stream, write_stream):
        yield _EndWatch(read_stream, ended), write_stream
