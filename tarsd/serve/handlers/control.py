"""The handlers that ask tarsd about itself or tell it what to do: ping, status, stop, and
index (with its progress events, and the wait for vectors when asked).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from tarsctl.protocol import (
    Index,
    IndexDone,
    Message,
    Ping,
    Pong,
    Progress,
    Status,
    Stop,
    Stopping,
)
from tarsd import __version__
from tarsd.serve.handlers.common import Peer, in_vault
from tarsd.serve.parts import DaemonParts
from tarsd.serve.status import build_status

VECTOR_PROGRESS_SECONDS = 0.5


async def ping(daemon: DaemonParts, request: Ping, _peer: Peer) -> AsyncIterator[Message]:
    yield Pong(id=request.id, server=f"tarsd/{__version__}", uptime=time.time() - daemon.started_at)


async def status(daemon: DaemonParts, request: Status, _peer: Peer) -> AsyncIterator[Message]:
    yield await asyncio.to_thread(build_status, daemon, request)


async def stop(daemon: DaemonParts, request: Stop, _peer: Peer) -> AsyncIterator[Message]:
    yield Stopping(id=request.id)
    daemon.request_stop("stop requested by a client")


async def index(daemon: DaemonParts, request: Index, _peer: Peer) -> AsyncIterator[Message]:
    paths = None
    if request.paths:
        paths = [in_vault(daemon, p) for p in request.paths]
    events: asyncio.Queue[Message | None] = asyncio.Queue()
    loop = asyncio.get_running_loop()

    def progress(phase: str, done: int, total: int) -> None:
        loop.call_soon_threadsafe(events.put_nowait, Progress(id=request.id, phase=phase, done=done, total=total))

    queue = daemon.queue
    job, position = queue.enqueue(paths, full=request.full, progress=progress)
    if position.running or position.ahead:
        # "an index", "a reconcile": the running job's name, with its article.
        article = "an" if position.running[:1] in ("a", "e", "i", "o", "u") else "a"
        ahead = [
            f"{article} {position.running}" if position.running else "",
            f"{position.ahead} queued request(s)" if position.ahead else "",
        ]
        yield Progress(
            id=request.id, phase="queued", done=0, total=position.ahead, message="queued behind " + " and ".join(filter(None, ahead))
        )
    job.add_done_callback(lambda _: events.put_nowait(None))
    while (event := await events.get()) is not None:
        yield event
    report = job.result()  # SyncFailed goes to dispatch, which answers with its cause
    if request.wait and daemon.engine.embedder.enabled:
        async for event in wait_for_vectors(daemon, request.id):
            yield event
        report.pending_vectors = await asyncio.to_thread(daemon.engine.store.pending_count)
        embedder = daemon.engine.embedder
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


async def wait_for_vectors(daemon: DaemonParts, request_id: int) -> AsyncIterator[Message]:
    """Embed progress until no vector is pending, or the model is not there to make them."""
    embedder, store = daemon.engine.embedder, daemon.engine.store
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
