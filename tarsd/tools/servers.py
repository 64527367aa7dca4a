"""All configured MCP servers: their connections run on an event loop of their own, in one
thread started after tarsd is READY, so no server (a slow start, a flood, a 10 MB result to
parse) ever holds up the socket, search or a chat that uses none of them. Chat threads call
into it (``call``), doors read its state (``describe``).

The catalog is what the model is offered: every tool of every server that is not denied, named
``server_tool`` (tarsd/tools/names.py), with its schema and a description cut to
``max_description_chars``; it is made again whenever a server's tool list or the user's rules
change. The mcp SDK is imported only when a server is configured.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tarsd.config.settings import McpConfig
from tarsd.tools.names import exposed_name
from tarsd.tools.policy import DENY, Policy, decide, unmatched_patterns
from tarsd.tools.rules import AlwaysRules, RulesFileError

if TYPE_CHECKING:
    from tarsd.tools.connection import CallOutcome, ServerConnection

log = logging.getLogger(__name__)

# For the servers to stop when tarsd stops: past the stdio transport's SIGTERM (stdin closed, 0.5 s to
# flush and 2 s to exit), so a server that ignores its closed stdin is gone too.
STOP_SECONDS = 3.0
RECENT_CALLS = 50  # kept for status and `tarsctl tools`
MAX_SCHEMA_CHARS = 20_000  # a tool whose input schema is larger than this is not offered (status says so)
ARGUMENT_LOG_CHARS = 300


@dataclass(frozen=True, slots=True)
class OfferedTool:
    name: str  # as the model knows it
    server: str
    tool: str  # as the server lists it
    title: str
    description: str  # cut to max_description_chars
    schema: dict
    read_only: bool
    policy: Policy
    problem: str = ""  # why it is not offered although not denied (a schema the providers cannot take)


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One call of another server's tool and what came of it, for status and the session log."""

    at: float
    conversation: str
    server: str
    tool: str
    arguments: str  # JSON, cut
    outcome: str  # ok | error | failed | unavailable | denied | timed_out | not_asked | cancelled | refused
    approved_by: str
    duration_ms: float
    chars: int


@dataclass(frozen=True, slots=True)
class ServerView:
    """A server as status and `tarsctl tools` show it (read from another thread: copies only)."""

    name: str
    transport: str
    target: str  # the command or the URL
    enabled: bool
    state: str
    error: str
    error_at: float
    restarts: int
    next_start_at: float
    connected_at: float
    server_info: str
    circuit: str
    circuit_failures: int
    circuit_reason: str
    circuit_retry_at: float
    tools: list[OfferedTool]
    stderr: list[str]
    pattern_warnings: list[str]  # allow/ask/deny patterns that match none of the tools a ready server lists


def plain_schema(schema: object) -> dict:
    """An input schema the providers take: a JSON object schema (MCP requires it; a server that
    sends something else gets an empty object schema rather than a refused request)."""
    if isinstance(schema, dict) and schema.get("type") == "object":
        return schema
    return {"type": "object", "properties": {}}


class ToolServers:
    def __init__(self, settings: McpConfig, rules: AlwaysRules | None = None, reserved: frozenset[str] = frozenset()):
        """``reserved``: tars's own tool names, never given to another server's tool."""
        self.settings = settings
        self.rules = rules
        self.reserved = reserved
        self.connections: dict[str, ServerConnection] = {}
        if settings.servers:
            from tarsd.tools.connection import ServerConnection  # the SDK loads only when a server is configured

            for name in sorted(settings.servers):
                connection = ServerConnection(name, settings.servers[name], settings)
                connection.on_tools_changed = self._remake_catalog
                self.connections[name] = connection
        self._lock = threading.Lock()
        self._remaking = threading.Lock()
        self._catalog: dict[str, OfferedTool] = {}
        self._all: dict[str, list[OfferedTool]] = {}
        self._recent: deque[CallRecord] = deque(maxlen=RECENT_CALLS)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._stopping_since: float | None = None

    # ---- the loop of their own ----

    def start(self) -> None:
        """Start every enabled server in the background; returns at once."""
        if not self.connections or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run_loop, name="mcp-clients", daemon=True)
        self._thread.start()
        self._started.wait(5)

    def _run_loop(self) -> None:
        try:
            asyncio.run(self._main())
        except Exception:  # a bug here must never take tarsd down: its status says the servers stopped
            log.exception("the MCP client loop failed")

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._started.set()
        tasks = [asyncio.create_task(c.run(self._stop), name=f"mcp-{c.name}") for c in self.connections.values()]
        await self._stop.wait()
        # Cancelled, not only told: a server still starting (or one that never answers its handshake)
        # is waited on inside the SDK. Its shutdown (stdin closed, then the kill) is shielded and bounded.
        for connection in self.connections.values():
            connection.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def begin_stop(self) -> None:
        """Ask every server to stop, without waiting: the stdio transport closes each one's stdin, then (about
        2 s later) sends its process group SIGTERM, and SIGKILL 2 s after that. tarsd asks first
        thing when it stops and waits (``stop``) last, so this runs beside the rest of its stop."""
        if self._loop is not None and self._stop is not None and self._stopping_since is None:
            self._stopping_since = time.monotonic()
            self._loop.call_soon_threadsafe(self._stop.set)

    def stop(self) -> None:
        """Stop every server, waiting at most STOP_SECONDS from the stop's start."""
        if self._thread is None:
            return
        self.begin_stop()
        assert self._stopping_since is not None
        self._thread.join(max(0.0, self._stopping_since + STOP_SECONDS - time.monotonic()))
        if self._thread.is_alive():
            log.warning("MCP servers still stopping after %.1f s: left to the transport's kill", STOP_SECONDS)

    def wait_ready(self, timeout: float) -> bool:
        """True once every server has connected or failed once (for doctor): none still starting."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(c.ready.is_set() or c.state != "starting" for c in self.connections.values()):
                return True
            time.sleep(0.05)
        return False

    # ---- the catalog ----

    def _remake_catalog(self) -> None:
        # One at a time: the tool servers' loop (a list changed) and a chat thread (the rules file
        # changed) may both remake it, and the later one must see the other's input.
        with self._remaking:
            self._make_catalog()

    def _make_catalog(self) -> None:
        taken = set(self.reserved)
        catalog: dict[str, OfferedTool] = {}
        everything: dict[str, list[OfferedTool]] = {}
        for name, connection in self.connections.items():
            always = self.rules.allowed(name) if self.rules is not None else set()
            listed: list[OfferedTool] = []
            for tool in connection.tools:
                annotations = tool.annotations
                read_only = bool(annotations is not None and annotations.read_only_hint)
                policy = decide(tool.name, read_only, connection.settings, always)
                schema = plain_schema(tool.input_schema)
                problem = ""
                if len(json.dumps(schema)) > MAX_SCHEMA_CHARS:
                    problem = f"its input schema is over {MAX_SCHEMA_CHARS:,} characters: not offered to the model"
                description = " ".join(connection.description(tool).split())
                if len(description) > self.settings.max_description_chars:
                    description = description[: self.settings.max_description_chars - 1] + "…"
                exposed = "" if policy.action == DENY or problem else exposed_name(name, tool.name, taken)
                offered = OfferedTool(
                    exposed,
                    name,
                    tool.name,
                    (annotations.title if annotations else None) or tool.title or "",
                    description,
                    schema,
                    read_only,
                    policy,
                    problem,
                )
                listed.append(offered)
                if exposed:
                    taken.add(exposed)
                    catalog[exposed] = offered
            everything[name] = listed
        with self._lock:
            self._catalog, self._all = catalog, everything

    def _rules_changed(self) -> None:
        if self.rules is not None and self.rules.refresh():
            self._remake_catalog()

    def offered(self) -> dict[str, OfferedTool]:
        """The tools the model may be offered now, by the name it knows them by."""
        self._rules_changed()
        with self._lock:
            return dict(self._catalog)

    def policy_now(self, server: str, tool: str) -> Policy | None:
        self._rules_changed()
        with self._lock:
            found = next((t for t in self._all.get(server, []) if t.tool == tool), None)
        return None if found is None else found.policy

    def allow_always(self, server: str, tool: str) -> str:
        """The user answered "always": an allow rule in the rules file, in force at once. Returns
        "" when it is kept, else why not (a rules file that cannot be read is never written over)."""
        if self.rules is None:
            raise ValueError("no rules file to keep an always answer in")
        try:
            self.rules.add(server, tool)
        except RulesFileError as exc:
            log.warning("the user allowed %s %s from now on, but %s", server, tool, exc)
            return str(exc)
        self._remake_catalog()
        log.info("the user allowed %s %s from now on (%s)", server, tool, self.rules.path)
        return ""

    def unavailable(self) -> list[tuple[str, str]]:
        """(server, why) for each enabled server whose tools cannot be called now, for the model: in
        tars's own words only (a server's error text or stderr is not for the model's prompt)."""
        said = {
            "starting": "still starting",
            "restarting": "stopped; being started again",
            "failed": "could not be started (`tarsctl tools` says why)",
            "misconfigured": "configured wrongly (`tarsctl tools` says why)",
        }
        found = []
        for name, connection in self.connections.items():
            if connection.state in said:
                found.append((name, said[connection.state]))
            elif connection.state == "ready" and (circuit := connection.circuit.describe()).state == "open":
                found.append((name, f"failing: {circuit.failures} calls in a row failed"))
        return found

    # ---- calls (from chat threads) ----

    def call(self, server: str, tool: str, arguments: dict, cancel: threading.Event) -> CallOutcome:
        from tarsd.tools.connection import CallOutcome

        connection = self.connections.get(server)
        if connection is None or self._loop is None:
            return CallOutcome("unavailable", note=f"the server {server} is not running")
        future = asyncio.run_coroutine_threadsafe(connection.call(tool, arguments), self._loop)
        while True:
            try:
                return future.result(timeout=0.1)
            except concurrent.futures.TimeoutError:
                if cancel.is_set():
                    future.cancel()  # the SDK tells the server the request is cancelled
                    return CallOutcome("cancelled", note="cancelled by the user while it ran")

    def record(self, record: CallRecord) -> None:
        with self._lock:
            self._recent.append(record)

    def recent(self, limit: int) -> list[CallRecord]:
        with self._lock:
            return list(self._recent)[-limit:][::-1]

    # ---- state, for people ----

    def describe(self) -> list[ServerView]:
        self._rules_changed()
        with self._lock:
            everything = {name: list(tools) for name, tools in self._all.items()}
        views = []
        for name, connection in self.connections.items():
            circuit = connection.circuit.describe()
            settings = connection.settings
            views.append(
                ServerView(
                    name=name,
                    transport=connection.transport,
                    target=settings.url or " ".join(settings.command),
                    enabled=settings.enabled,
                    state=connection.state,
                    error=connection.error,
                    error_at=connection.error_at,
                    restarts=connection.restarts,
                    next_start_at=connection.next_start_at,
                    connected_at=connection.connected_at,
                    server_info=connection.server_info,
                    circuit=circuit.state,
                    circuit_failures=circuit.failures,
                    circuit_reason=circuit.reason,
                    circuit_retry_at=circuit.retry_at,
                    tools=everything.get(name, []),
                    stderr=list(connection.stderr.lines)[-5:],
                    # Only once the server listed its tools: before that no pattern can be judged.
                    pattern_warnings=unmatched_patterns(settings, [t.tool for t in everything.get(name, [])])
                    if connection.state == "ready"
                    else [],
                )
            )
        return views


def arguments_for_log(arguments: dict) -> str:
    text = json.dumps(arguments, ensure_ascii=False)
    return text if len(text) <= ARGUMENT_LOG_CHARS else text[: ARGUMENT_LOG_CHARS - 1] + "…"
