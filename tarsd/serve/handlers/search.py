"""The handlers that read the vault: search (with its filters, the settle before it and the
explain signals), session logs, links and related notes, and a note's text.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from tarsctl.protocol import (
    Error,
    LinkHit,
    Links,
    LinksReply,
    Message,
    NoteText,
    ReadNote,
    Related,
    RelatedNote,
    RelatedReply,
    Search,
    SearchResults,
    Sessions,
    SessionsReply,
)
from tarsd.markdown.tags import normalise as normalise_tag
from tarsd.memory import sessions
from tarsd.search.searcher import MODES, SearchError
from tarsd.serve.handlers.common import Peer, RequestError, find_note
from tarsd.serve.parts import DaemonParts
from tarsd.serve.status import coverage
from tarsd.store.database import Filter
from tarsd.vault.files import MEMORY_TYPES, memory_type
from tarsd.vault.notes import NoteError, read_lines


async def search(daemon: DaemonParts, request: Search, _peer: Peer) -> AsyncIterator[Message]:
    yield await search_reply(daemon, request)


async def search_reply(daemon: DaemonParts, request: Search) -> Message:
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
    settled = await settle(daemon)
    where = Filter(
        memory_types=tuple(request.types),
        path_prefix=request.path,
        tags=tuple(tag for tag in map(normalise_tag, request.tags) if tag),
        since_ns=None if request.since is None else int(request.since * 1e9),
        before_ns=None if request.before is None else int(request.before * 1e9),
    )
    try:
        response = await asyncio.to_thread(
            daemon.engine.searcher.search,
            request.query,
            mode=request.mode,
            limit=request.limit,
            min_score=request.min_score,
            where=where,
            per_file=not request.all_chunks,
            explain=request.explain,
        )
    except SearchError as exc:
        return Error(id=request.id, code="unavailable", message=str(exc), hint="use --mode fts, or see `tarsctl status` for the embedder")
    warnings = list(response.warnings)
    if not settled:
        warnings.append("some notes saved a moment ago were still being indexed: search again for them")
    elapsed = (time.perf_counter() - started) * 1000
    return SearchResults(
        id=request.id,
        mode=response.mode,
        results=response.results,
        warnings=warnings,
        elapsed_ms=round(elapsed, 2),
        coverage=coverage(daemon.queue, daemon.engine, daemon.watcher),
    )


async def settle(daemon: DaemonParts) -> bool:
    """Commit every save made before this search (a hook that saves, then searches, finds
    its save): let the watcher catch up, then finish the paths queued. Bounded in time."""
    budget = daemon.config.daemon.settle_ms / 1000
    deadline = time.monotonic() + budget
    await daemon.watcher.caught_up(budget)
    return await daemon.queue.settle(max(0.0, deadline - time.monotonic()))


async def links(daemon: DaemonParts, request: Links, _peer: Peer) -> AsyncIterator[Message]:
    graph = daemon.engine.graph
    if request.direction not in ("out", "in", "unresolved"):
        raise RequestError("bad_request", f"unknown direction {request.direction!r}", "use out, in or unresolved")
    note = ""
    if request.direction == "unresolved":
        rows = await asyncio.to_thread(graph.unresolved)
    else:
        note = await asyncio.to_thread(find_note, daemon, request.note)
        rows = await asyncio.to_thread(graph.links_from if request.direction == "out" else graph.links_to, note)
    hits = [LinkHit(r.source, r.line, r.kind, r.target, r.heading, r.label, r.resolved or "") for r in rows]
    yield LinksReply(id=request.id, note=note, direction=request.direction, links=hits)


async def related(daemon: DaemonParts, request: Related, _peer: Peer) -> AsyncIterator[Message]:
    note = await asyncio.to_thread(find_note, daemon, request.note)
    graph = daemon.engine.graph
    neighbours = await asyncio.to_thread(graph.related, note, request.limit)
    reason = "" if neighbours else await asyncio.to_thread(graph.why_none_related, note)
    notes = [RelatedNote(n.path, n.title, n.similarity, n.linked) for n in neighbours]
    yield RelatedReply(id=request.id, note=note, notes=notes, reason=reason)


async def read_note(daemon: DaemonParts, request: ReadNote, _peer: Peer) -> AsyncIterator[Message]:
    yield await asyncio.to_thread(note_text, daemon, request)


def note_text(daemon: DaemonParts, request: ReadNote) -> Message:
    config = daemon.config
    path = request.path
    if request.memory:
        files = {"semantic": config.memory.semantic_file, "procedural": config.memory.procedural_file}
        if request.memory not in files or request.path:
            message = f"memory must be semantic or procedural, with no path, not {request.memory!r}"
            return Error(id=request.id, code="bad_request", message=message)
        path = files[request.memory]
    try:
        note = read_lines(
            daemon.vault,
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


async def session_logs(daemon: DaemonParts, request: Sessions, _peer: Peer) -> AsyncIterator[Message]:
    vault, config = daemon.vault, daemon.config
    max_bytes = int(config.vault.max_file_mb * 1_000_000)
    if not request.query.strip():
        logs, total = await asyncio.to_thread(sessions.recent, vault, config.vault, request.limit, max_bytes)
        yield SessionsReply(id=request.id, sessions=logs, total=total)
        return
    search = Search(id=request.id, query=request.query, mode=request.mode, limit=request.limit, types=["episodic"])
    reply = await search_reply(daemon, search)
    if isinstance(reply, Error):
        yield reply
        return
    logs = await asyncio.to_thread(sessions.dated_hits, vault, reply.results, max_bytes)
    yield SessionsReply(id=request.id, sessions=logs, mode=reply.mode, warnings=reply.warnings, coverage=reply.coverage)
