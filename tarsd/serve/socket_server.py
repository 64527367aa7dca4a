"""The Unix socket server: framing, the hello exchange, peer checks and request dispatch.

Each connection is its own task, so a slow or vanished client only ever blocks itself.
SQLite and embedding work runs in threads, off the event loop. A malformed frame gets a
typed Error and closes that one connection; the daemon keeps serving everyone else.
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
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec

from tarsctl.protocol import (
    HEADER,
    MAX_REQUEST_BYTES,
    PROTOCOL_VERSION,
    SUN_PATH_MAX,
    ApplyReview,
    Cancel,
    Chat,
    ChatDelta,
    ChatDone,
    ConversationEnded,
    ConversationHistory,
    ConversationInfo,
    ConversationList,
    ConversationMessages,
    DecideRule,
    EndConversation,
    Error,
    Explain,
    Feedback,
    FeedbackSaved,
    Forget,
    Forgotten,
    Hello,
    Hit,
    Index,
    IndexDone,
    LinkHit,
    Links,
    LinksReply,
    ListConversations,
    MemoryCandidate,
    Message,
    NoteText,
    PendingRule,
    PendingRules,
    PendingRulesReply,
    Ping,
    Pong,
    Progress,
    ReadNote,
    Related,
    RelatedNote,
    RelatedReply,
    Remember,
    Remembered,
    Review,
    ReviewApplied,
    ReviewProposals,
    RuleDecided,
    Search,
    SearchResults,
    Sessions,
    SessionsReply,
    ShownMessage,
    Status,
    Stop,
    Stopping,
    ToolActivity,
    Welcome,
    client_decoder,
    frame,
    socket_dir_problem,
)
from tarsd import __version__
from tarsd.chat.conversations import ConversationStore
from tarsd.chat.providers import ProviderError
from tarsd.chat.tools import tool_summary
from tarsd.index.sync_queue import SyncFailed
from tarsd.markdown.tags import normalise as normalise_tag
from tarsd.memory import sessions
from tarsd.search.searcher import LINK_BOOST, LINK_BOOST_CAP, MODES, TITLE_BOOST, Candidate, SearchError
from tarsd.serve.parts import DaemonParts
from tarsd.serve.status import build_status, coverage
from tarsd.store.database import Filter
from tarsd.vault.files import MEMORY_TYPES, OutsideVault, memory_type, vault_relative
from tarsd.vault.notes import NoteError, read_lines
from tarsd.vault.root import VaultMissing

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
]
TOOL_RESULT_PREVIEW = 300
WRITE_TIMEOUT_SECONDS = 30.0
VECTOR_PROGRESS_SECONDS = 0.5
# A hit carries its chunk's text: at most this many characters, so 1,000 hits stay far below
# the 64 MiB reply cap.
MAX_HIT_TEXT = 16_000
# A conversation read back: each text and the whole reply bounded (a pasted note can be long).
HISTORY_MESSAGE_CHARS = 20_000
HISTORY_CHARS = 200_000
ACCEPT_BACKLOG = 128
REFUSAL_READ_SECONDS = 1.0
# File descriptors kept for SQLite, the watcher, the model and logs, whatever clients do.
FD_RESERVE = 160
ACCEPT_ERROR_LOG_SECONDS = 60.0


def explain(c: Candidate) -> Explain:
    return Explain(
        keyword_rank=c.keyword_rank,
        bm25=round(c.bm25, 4),
        coverage=round(c.coverage, 4),
        title_coverage=round(c.title_coverage, 4),
        vector_rank=c.vector_rank,
        cosine=round(c.cosine, 4),
        title_boost=round(TITLE_BOOST * c.title_coverage, 4),
        link_boost=round(LINK_BOOST * min(c.linked_from, LINK_BOOST_CAP), 4),
        linked_from=c.linked_from,
        fused=round(c.fused, 4),
    )


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


class FrameError(Exception):
    def __init__(self, code: str, message: str, hint: str = ""):
        super().__init__(message)
        self.error = Error(code=code, message=message, hint=hint)


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


class Peer:
    """What a handler may ask of the client it answers, whichever door it came in by: during a
    chat, the client's next frame, read ahead (a Cancel, or None once the client is gone)."""

    pending: asyncio.Future | None = None

    def read_ahead(self) -> asyncio.Future:
        raise NotImplementedError


class _Connection(Peer):
    """Reads frames for one socket connection. During a chat the next frame is read ahead (it may
    be a cancel); a frame read ahead that is not a cancel is kept for the request loop."""

    def __init__(self, server: Server, reader: asyncio.StreamReader):
        self.server = server
        self.reader = reader
        self.pending: asyncio.Future | None = None

    async def next(self, idle_timeout: float | None = None) -> Message | None:
        """The next request, or None when the client is gone (or stayed silent past ``idle_timeout``)."""
        if self.pending is not None:
            pending, self.pending = self.pending, None
            return await pending
        try:
            return await asyncio.wait_for(self.server._read(self.reader), idle_timeout)
        except TimeoutError:
            return None  # an idle client frees its place; tarsctl reconnects on its own

    def read_ahead(self) -> asyncio.Future:
        if self.pending is None:
            self.pending = asyncio.ensure_future(self.server._read(self.reader))
        return self.pending

    def close(self) -> None:
        if self.pending is not None and not self.pending.done():
            self.pending.cancel()


class Server:
    def __init__(self, daemon: DaemonParts):
        self.daemon = daemon
        self.server: asyncio.AbstractServer | None = None
        self.connections = 0  # accepted since start
        self.refused = 0  # refused for being over the cap
        self.max_connections = 0
        self._tasks: set[asyncio.Task] = set()
        self._handlers: dict[type, Callable[[Any, Peer], AsyncIterator[Message]]] = {
            Ping: self._ping,
            Search: self._search,
            Index: self._index,
            Status: self._status,
            Stop: self._stop,
            Chat: self._chat,
            Cancel: self._cancel,
            EndConversation: self._end_conversation,
            Remember: self._remember,
            Forget: self._forget,
            Feedback: self._feedback,
            Review: self._review,
            ApplyReview: self._apply_review,
            Links: self._links,
            Related: self._related,
            ReadNote: self._read_note,
            Sessions: self._sessions,
            ListConversations: self._list_conversations,
            ConversationHistory: self._conversation_history,
            PendingRules: self._pending_rules,
            DecideRule: self._decide_rule,
        }

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
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._read(reader), REFUSAL_READ_SECONDS)
                await self._send(
                    writer,
                    Error(
                        code="busy",
                        message=f"tarsd has {self.max_connections} connections open, the most it takes",
                        hint="try again in a moment; idle connections are closed after a while",
                    ),
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
        try:
            try:
                hello = await asyncio.wait_for(self._read(reader), settings.hello_timeout_seconds)
            except TimeoutError:
                raise FrameError(
                    "timeout", f"no hello within {settings.hello_timeout_seconds:g} s", "send a hello frame first (docs/protocol.md)"
                ) from None
            if hello is None:
                return
            if not isinstance(hello, Hello):
                raise FrameError(
                    "bad_request", f"the first message must be hello, not {type(hello).__name__.lower()}", "see docs/protocol.md"
                )
            await self._send(writer, Welcome(protocol=PROTOCOL_VERSION, server=f"tarsd/{__version__}", capabilities=CAPABILITIES))
            connection = _Connection(self, reader)
            try:
                while True:
                    request = await connection.next(settings.idle_timeout_seconds)
                    if request is None:
                        return
                    async for reply in self.dispatch(request, connection):
                        await self._send(writer, reply)
            finally:
                connection.close()
        except FrameError as exc:
            # The stream may be out of step after a bad frame: answer, then close.
            await self._send(writer, exc.error)

    async def _read(self, reader: asyncio.StreamReader) -> Message | None:
        try:
            header = await reader.readexactly(HEADER.size)
        except asyncio.IncompleteReadError as exc:
            if not exc.partial:
                return None  # a clean close between frames
            raise
        (length,) = HEADER.unpack(header)
        if length > MAX_REQUEST_BYTES:
            raise FrameError(
                "too_large",
                f"a frame of {length} bytes is over the {MAX_REQUEST_BYTES}-byte limit",
                "frames are a 4-byte big-endian length and a msgpack body",
            )
        body = await reader.readexactly(length)
        try:
            return client_decoder.decode(body)
        except msgspec.ValidationError as exc:
            raise FrameError("bad_request", f"invalid request: {exc}", "check the message against docs/protocol.md") from exc
        except msgspec.DecodeError as exc:
            raise FrameError(
                "bad_frame", f"the frame body is not msgpack: {exc}", "frames are a 4-byte big-endian length and a msgpack body"
            ) from exc
        except UnicodeDecodeError as exc:
            raise FrameError("bad_frame", f"a string in the frame is not valid UTF-8: {exc.reason}", "encode strings as UTF-8") from exc
        except RecursionError as exc:
            raise FrameError("bad_frame", "the frame is nested too deeply", "requests are flat maps (docs/protocol.md)") from exc

    async def _send(self, writer: asyncio.StreamWriter, message: Message) -> None:
        writer.write(frame(message))
        await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_SECONDS)

    # ---- requests ----

    async def dispatch(self, request: Message, peer: Peer) -> AsyncIterator[Message]:
        """A request's replies: stream events, then one final reply (an Error for anything that
        went wrong). The one way into the handlers, for the socket and the HTTP door alike."""
        request_id = getattr(request, "id", 0)
        handler = self._handlers.get(type(request))
        try:
            if handler is None:
                yield Error(id=request_id, code="bad_request", message=f"{type(request).__name__.lower()} is not a request here")
                return
            async for reply in handler(request, peer):
                yield reply
        except FrameError as exc:
            exc.error.id = request_id
            yield exc.error
        except ProviderError as exc:
            yield Error(id=request_id, code=exc.code, message=exc.message, hint=exc.hint)
        except SyncFailed as exc:
            yield Error(
                id=request_id, code="index_failed", message=str(exc), hint="`tarsctl status` shows the state; tars retries on its own"
            )
        except OutsideVault as exc:
            yield Error(id=request_id, code="bad_request", message=str(exc), hint=exc.hint)
        except VaultMissing as exc:
            yield Error(id=request_id, code="vault_missing", message=str(exc), hint=exc.hint)
        except OSError as exc:  # a full disk, a read-only vault, a file locked by another program
            message = f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc)
            log.warning("request %s failed: %s", type(request).__name__, message)
            hint = "check the free space and the permissions there, then try again; nothing was half written"
            yield Error(id=request_id, code="io_error", message=message, hint=hint)
        except ValueError as exc:  # a memory text refused says what to do in its hint (tarsd/memory/text.py)
            yield Error(id=request_id, code="bad_request", message=str(exc), hint=getattr(exc, "hint", ""))
        except Exception as exc:
            log.exception("request %s failed", type(request).__name__)
            yield Error(id=request_id, code="internal", message=f"{type(exc).__name__}: {exc}", hint="see the tarsd log for details")

    # One handler per request type; each is an async generator of replies (the last is final).

    async def _ping(self, request: Ping, _peer: Peer) -> AsyncIterator[Message]:
        yield Pong(id=request.id, server=f"tarsd/{__version__}", uptime=time.time() - self.daemon.started_at)

    async def _status(self, request: Status, _peer: Peer) -> AsyncIterator[Message]:
        yield await asyncio.to_thread(build_status, self.daemon, request)

    async def _stop(self, request: Stop, _peer: Peer) -> AsyncIterator[Message]:
        yield Stopping(id=request.id)
        self.daemon.request_stop("stop requested by a client")

    async def _cancel(self, _request: Cancel, _peer: Peer) -> AsyncIterator[Message]:
        return  # arrived after its chat had finished: nothing left to cancel, nothing to answer
        yield

    async def _end_conversation(self, request: EndConversation, _peer: Peer) -> AsyncIterator[Message]:
        result = await asyncio.to_thread(self.daemon.assistant.end, request.conversation, request.provider, request.model)
        yield ConversationEnded(id=request.id, session_log=result.session_log, warnings=result.warnings)

    async def _remember(self, request: Remember, _peer: Peer) -> AsyncIterator[Message]:
        done = await asyncio.to_thread(
            self.daemon.assistant.memory.remember,
            request.fact,
            request.kind,
            request.section,
            request.mode,
            request.replace_line,
            request.conversation,
            request.by_model,
        )
        yield Remembered(
            id=request.id,
            added=done.added,
            path=done.path,
            section=done.section,
            duplicate_of=done.duplicate_of,
            status=done.status,
            similar=done.similar,
            reason=done.reason,
            replaced=done.replaced,
            line=done.line,
        )

    async def _forget(self, request: Forget, _peer: Peer) -> AsyncIterator[Message]:
        done = await asyncio.to_thread(
            self.daemon.assistant.memory.forget, request.text, request.kind, request.confirm_line, request.limit, request.by_model
        )
        candidates = [MemoryCandidate(c.line, c.section, c.line_number, c.score, c.provenance) for c in done.candidates]
        yield Forgotten(id=request.id, path=done.path, candidates=candidates, removed=done.removed)

    async def _feedback(self, request: Feedback, _peer: Peer) -> AsyncIterator[Message]:
        path = await asyncio.to_thread(self.daemon.assistant.feedback, request.conversation, request.good, request.note)
        yield FeedbackSaved(id=request.id, path=path)

    async def _review(self, request: Review, _peer: Peer) -> AsyncIterator[Message]:
        rules, anything = await asyncio.to_thread(self.daemon.assistant.review, request.provider, request.model)
        yield ReviewProposals(id=request.id, rules=rules, nothing_to_review=not anything)

    async def _apply_review(self, request: ApplyReview, _peer: Peer) -> AsyncIterator[Message]:
        added, archived = await asyncio.to_thread(self.daemon.assistant.apply_review, request.rules)
        yield ReviewApplied(id=request.id, added=added, archived=archived)

    async def _pending_rules(self, request: PendingRules, _peer: Peer) -> AsyncIterator[Message]:
        waiting = await asyncio.to_thread(self.daemon.assistant.pending_rules)
        rules = [PendingRule(p.id, p.rule, p.conversation, p.proposed_at) for p in waiting]
        yield PendingRulesReply(id=request.id, rules=rules, path=self.daemon.config.memory.procedural_file)

    async def _decide_rule(self, request: DecideRule, _peer: Peer) -> AsyncIterator[Message]:
        proposal, written = await asyncio.to_thread(self.daemon.assistant.decide_rule, request.rule_id, request.approve)
        yield RuleDecided(
            id=request.id,
            rule_id=proposal.id,
            rule=proposal.rule,
            approved=request.approve,
            status=written.status if written is not None else "rejected",
            path=written.path if written is not None else "",
        )

    async def _search(self, request: Search, _peer: Peer) -> AsyncIterator[Message]:
        yield await self._search_reply(request)

    async def _search_reply(self, request: Search) -> Message:
        if not request.query.strip():
            return Error(id=request.id, code="bad_request", message="the query is empty", hint="give words to search for")
        if request.mode not in MODES:
            return Error(id=request.id, code="bad_request", message=f"unknown mode {request.mode!r}", hint=f"use one of {', '.join(MODES)}")
        unknown = [t for t in request.types if t not in MEMORY_TYPES]
        if unknown:
            return Error(
                id=request.id, code="bad_request", message=f"unknown memory type {unknown[0]!r}", hint=f"use {', '.join(MEMORY_TYPES)}"
            )
        if request.limit < 1 or request.limit > 1000:
            return Error(id=request.id, code="bad_request", message=f"limit must be 1..1000, not {request.limit}")
        started = time.perf_counter()
        settled = await self._settle()
        where = Filter(
            memory_types=tuple(request.types),
            path_prefix=request.path,
            tags=tuple(tag for tag in map(normalise_tag, request.tags) if tag),
            since_ns=None if request.since is None else int(request.since * 1e9),
            before_ns=None if request.before is None else int(request.before * 1e9),
        )
        try:
            response = await asyncio.to_thread(
                self.daemon.engine.searcher.search,
                request.query,
                mode=request.mode,
                limit=request.limit,
                min_score=request.min_score,
                where=where,
                per_file=not request.all_chunks,
                explain=request.explain,
            )
        except SearchError as exc:
            return Error(
                id=request.id, code="unavailable", message=str(exc), hint="use --mode fts, or see `tarsctl status` for the embedder"
            )
        warnings = list(response.warnings)
        if not settled:
            warnings.append("some notes saved a moment ago were still being indexed: search again for them")
        hits = [
            Hit(
                path=r.path,
                title=r.title,
                heading_path=r.heading_path,
                start_line=r.start_line,
                end_line=r.end_line,
                snippet=r.snippet,
                score=r.score,
                band=r.band,
                memory_type=r.memory_type,
                text=r.text[:MAX_HIT_TEXT],  # chunks are bounded; this also bounds any older, larger row
                explain=None if r.explain is None else explain(r.explain),
            )
            for r in response.results
        ]
        elapsed = (time.perf_counter() - started) * 1000
        return SearchResults(
            id=request.id,
            mode=response.mode,
            results=hits,
            warnings=warnings,
            elapsed_ms=round(elapsed, 2),
            coverage=coverage(self.daemon.queue, self.daemon.engine, self.daemon.watcher),
        )

    async def _settle(self) -> bool:
        """Commit every save made before this search (a hook that saves, then searches, finds
        its save): let the watcher catch up, then finish the paths queued. Bounded in time."""
        budget = self.daemon.config.daemon.settle_ms / 1000
        deadline = time.monotonic() + budget
        await self.daemon.watcher.caught_up(budget)
        return await self.daemon.queue.settle(max(0.0, deadline - time.monotonic()))

    async def _links(self, request: Links, _peer: Peer) -> AsyncIterator[Message]:
        graph = self.daemon.engine.graph
        if request.direction not in ("out", "in", "unresolved"):
            raise FrameError("bad_request", f"unknown direction {request.direction!r}", "use out, in or unresolved")
        note = ""
        if request.direction == "unresolved":
            rows = await asyncio.to_thread(graph.unresolved)
        else:
            note = await asyncio.to_thread(self._find_note, request.note)
            rows = await asyncio.to_thread(graph.links_from if request.direction == "out" else graph.links_to, note)
        hits = [LinkHit(r.source, r.line, r.kind, r.target, r.heading, r.label, r.resolved or "") for r in rows]
        yield LinksReply(id=request.id, note=note, direction=request.direction, links=hits)

    async def _related(self, request: Related, _peer: Peer) -> AsyncIterator[Message]:
        note = await asyncio.to_thread(self._find_note, request.note)
        neighbours = await asyncio.to_thread(self.daemon.engine.graph.related, note, request.limit)
        yield RelatedReply(id=request.id, note=note, notes=[RelatedNote(n.path, n.title, n.similarity, n.linked) for n in neighbours])

    async def _list_conversations(self, request: ListConversations, _peer: Peer) -> AsyncIterator[Message]:
        found, total = await asyncio.to_thread(self.daemon.assistant.conversations.overview, request.limit, request.archived)
        conversations = [
            ConversationInfo(
                c.id, c.created_at, c.updated_at, c.messages, c.unlogged, c.compacted, c.title, ConversationStore.is_archived(c.id)
            )
            for c in found
        ]
        yield ConversationList(id=request.id, conversations=conversations, total=total)

    async def _conversation_history(self, request: ConversationHistory, _peer: Peer) -> AsyncIterator[Message]:
        conversations = self.daemon.assistant.conversations
        found = await asyncio.to_thread(conversations.history, request.conversation, request.limit, HISTORY_CHARS, HISTORY_MESSAGE_CHARS)
        yield ConversationMessages(
            id=request.id,
            conversation=request.conversation,
            found=found.found,
            messages=[ShownMessage(m.role, m.text, m.tools, m.at, m.cut) for m in found.messages],
            omitted=found.omitted,
            compacted=found.compacted,
            summary=found.summary,
        )

    def _vault_relative(self, path: str) -> str:
        try:
            return vault_relative(self.daemon.vault, path)
        except OutsideVault as exc:
            raise FrameError("bad_request", str(exc), exc.hint) from None

    def _find_note(self, name: str) -> str:
        """A note given by path (absolute or in the vault), file name or alias; FrameError if none."""
        if not name.strip():
            raise FrameError("bad_request", "no note given", "give a note's path, file name or alias")
        candidate = Path(name)
        if candidate.is_absolute() or name.endswith(".md"):
            name = self._vault_relative(name)
        found = self.daemon.engine.graph.find_note(name)
        if found is None:
            raise FrameError("not_found", f"no note in the index is called {name!r}", "give a note's path, file name or alias")
        return found

    async def _read_note(self, request: ReadNote, _peer: Peer) -> AsyncIterator[Message]:
        yield await asyncio.to_thread(self._note_text, request)

    def _note_text(self, request: ReadNote) -> Message:
        config = self.daemon.config
        path = request.path
        if request.memory:
            files = {"semantic": config.memory.semantic_file, "procedural": config.memory.procedural_file}
            if request.memory not in files or request.path:
                message = f"memory must be semantic or procedural, with no path, not {request.memory!r}"
                return Error(id=request.id, code="bad_request", message=message)
            path = files[request.memory]
        try:
            note = read_lines(
                self.daemon.vault,
                path,
                start_line=request.start_line,
                end_line=request.end_line,
                heading=request.heading,
                max_chars=request.max_chars,
                max_bytes=int(config.vault.max_file_mb * 1_000_000),
                missing_ok=bool(request.memory),  # nothing remembered yet: an empty memory file
            )
        except NoteError as exc:
            return Error(id=request.id, code=exc.code, message=exc.message, hint=exc.hint)
        return NoteText(
            id=request.id,
            path=note.path,
            title=note.title,
            start_line=note.start_line,
            end_line=note.end_line,
            lines=note.lines,
            total_lines=note.total_lines,
            truncated=note.truncated,
            heading=note.heading,
            memory_type=memory_type(note.path, config.vault),
            problem=note.problem,
        )

    async def _sessions(self, request: Sessions, _peer: Peer) -> AsyncIterator[Message]:
        vault, config = self.daemon.vault, self.daemon.config
        max_bytes = int(config.vault.max_file_mb * 1_000_000)
        if not request.query.strip():
            logs, total = await asyncio.to_thread(sessions.recent, vault, config.vault, request.limit, max_bytes)
            yield SessionsReply(id=request.id, sessions=logs, total=total)
            return
        search = Search(id=request.id, query=request.query, mode=request.mode, limit=request.limit, types=["episodic"])
        reply = await self._search_reply(search)
        if isinstance(reply, Error):
            yield reply
            return
        logs = await asyncio.to_thread(sessions.dated_hits, vault, reply.results, max_bytes)
        yield SessionsReply(id=request.id, sessions=logs, mode=reply.mode, warnings=reply.warnings, coverage=reply.coverage)

    async def _index(self, request: Index, _peer: Peer) -> AsyncIterator[Message]:
        paths = None
        if request.paths:
            paths = [self._vault_relative(p) for p in request.paths]
        events: asyncio.Queue[Message | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def progress(phase: str, done: int, total: int) -> None:
            loop.call_soon_threadsafe(events.put_nowait, Progress(id=request.id, phase=phase, done=done, total=total))

        queue = self.daemon.queue
        job, position = queue.enqueue(paths, full=request.full, progress=progress)
        if position.running or position.ahead:
            ahead = [f"a {position.running}" if position.running else "", f"{position.ahead} queued request(s)" if position.ahead else ""]
            yield Progress(
                id=request.id, phase="queued", done=0, total=position.ahead, message="queued behind " + " and ".join(filter(None, ahead))
            )
        job.add_done_callback(lambda _: events.put_nowait(None))
        while (event := await events.get()) is not None:
            yield event
        report = job.result()  # SyncFailed goes to dispatch, which answers with its cause
        if request.wait and self.daemon.engine.embedder.enabled:
            async for event in self._wait_for_vectors(request.id):
                yield event
            report.pending_vectors = await asyncio.to_thread(self.daemon.engine.store.pending_count)
            embedder = self.daemon.engine.embedder
            report.embedder_error = embedder.unavailable_reason() if report.pending_vectors and not embedder.ready else None
        yield IndexDone(
            id=request.id,
            scanned=report.scanned,
            indexed=report.indexed,
            unchanged=report.unchanged,
            deleted=report.deleted,
            skipped=report.skipped,
            chunks=report.chunks,
            vectors_embedded=report.vectors_embedded,
            vectors_from_cache=report.vectors_from_cache,
            pending_vectors=report.pending_vectors,
            seconds=round(report.seconds, 3),
            embedder_error=report.embedder_error or "",
            problems=report.problems,
        )

    async def _wait_for_vectors(self, request_id: int) -> AsyncIterator[Message]:
        """Embed progress until no vector is pending, or the model is not there to make them."""
        embedder, store = self.daemon.engine.embedder, self.daemon.engine.store
        total = None
        while True:
            pending = await asyncio.to_thread(store.pending_count)
            total = pending if total is None else max(total, pending)
            if pending == 0:
                yield Progress(id=request_id, phase="embed", done=total, total=total)
                return
            if embedder.state == "unavailable":
                return  # IndexDone says why, with the count still pending
            message = "waiting for the embedding model to load" if embedder.state == "loading" else ""
            yield Progress(id=request_id, phase="embed", done=total - pending, total=total, message=message)
            await asyncio.sleep(VECTOR_PROGRESS_SECONDS)

    async def _chat(self, request: Chat, peer: Peer) -> AsyncIterator[Message]:
        """Stream a chat turn. A cancel frame, or the client going away, stops the answer."""
        loop = asyncio.get_running_loop()
        cancel = threading.Event()
        events: asyncio.Queue = asyncio.Queue()

        def emit(kind: str, value: object) -> None:
            loop.call_soon_threadsafe(events.put_nowait, (kind, value))

        job = asyncio.ensure_future(
            asyncio.to_thread(
                self.daemon.assistant.chat,
                request.conversation,
                request.message,
                request.provider,
                request.model,
                emit,
                cancel,
                request.end,
            )
        )
        job.add_done_callback(lambda _: loop.call_soon_threadsafe(events.put_nowait, None))
        getter: asyncio.Future | None = None
        try:
            incoming = peer.read_ahead()
            while True:
                getter = asyncio.ensure_future(events.get())
                waiting = {getter} if incoming is None else {getter, incoming}
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if incoming is not None and incoming in done:
                    try:
                        message = incoming.result()
                    except Exception:
                        message = None  # a broken frame mid-chat: treat as a disconnect
                    if message is None or isinstance(message, Cancel):
                        cancel.set()
                        if message is not None:
                            peer.pending = None  # the cancel is consumed
                    incoming = None
                if getter not in done:
                    getter.cancel()
                    continue
                event = getter.result()
                if event is None:
                    break
                kind, value = event
                if kind == "delta":
                    yield ChatDelta(id=request.id, text=value)
                elif kind == "tool_call":
                    yield ToolActivity(id=request.id, phase="call", name=value.name, arguments=value.arguments)
                else:
                    call, output = value
                    yield ToolActivity(
                        id=request.id,
                        phase="result",
                        name=call.name,
                        result=output[:TOOL_RESULT_PREVIEW],
                        summary=tool_summary(call.name, output),
                    )
        finally:
            if not job.done():
                cancel.set()  # torn down mid-answer (a closed HTTP stream, a stopping daemon): the thread stops too
            if getter is not None:
                getter.cancel()
        result = job.result()  # raises ProviderError etc. for dispatch to answer
        yield ChatDone(
            id=request.id,
            conversation=result.conversation,
            text=result.text,
            tool_rounds=result.tool_rounds,
            cancelled=result.cancelled,
            session_log=result.session_log,
            warnings=result.warnings,
        )
