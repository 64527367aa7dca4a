"""What tarsd reports about itself: the index coverage every search reply carries, the
status reply, and per-file health (which notes are not indexed, stale, skipped or repaired,
and why)."""

from __future__ import annotations

import platform
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from tarsctl.protocol import (
    ChannelStatus,
    Coverage,
    EmbedderStatus,
    ExternalTool,
    FileHealth,
    MemoryStatus,
    NotedLine,
    RoutinesStatus,
    RunInfo,
    Status,
    StatusReply,
    ToolCallRecord,
    ToolServerInfo,
)
from tarsctl.transport import PROTOCOL_VERSION
from tarsd import __version__
from tarsd.vault.files import walk
from tarsd.vault.root import vault_problem

if TYPE_CHECKING:
    from tarsd.index.sync_queue import SyncQueue
    from tarsd.index.watcher import VaultWatcher
    from tarsd.routines.ledger import Run
    from tarsd.search.engine import Engine
    from tarsd.serve.parts import DaemonParts
    from tarsd.tools.servers import ServerView, ToolServers

# A routine's latest outcome that status shows, and how many routines' it names at most.
TROUBLE_OUTCOMES = ("failed", "interrupted", "limited")
SHOWN_ERRORS = 5
# File states worth a user's attention, in the order status lists them.
HEALTH_STATES = ("not_indexed", "stale", "deleted", "skipped", "repaired")


def current_vault_error(watcher: VaultWatcher) -> str:
    """Why the vault cannot be used, checked now: the watcher's supervisor notices within its
    check interval, but a reply right after the folder went away must say so already."""
    if watcher.vault.error:
        return watcher.vault.error
    problem = vault_problem(watcher.vault.path)
    if problem:
        watcher.wake()  # the supervisor halts the watcher and follows the folder from now on
    return problem


def coverage(queue: SyncQueue, engine: Engine, watcher: VaultWatcher) -> Coverage:
    missing = current_vault_error(watcher)
    counts = engine.store.coverage_counts()
    indexer, embedder = engine.indexer, engine.embedder
    scan_total = indexer.scan_total
    return Coverage(
        reconciled=queue.reconciled,
        scan_done=indexer.scan_done if scan_total is not None else 0,
        scan_total=scan_total if scan_total is not None else 0,
        notes_indexed=counts["notes"],
        notes_skipped=counts["skipped"],
        notes_on_disk=indexer.notes_on_disk if indexer.notes_on_disk is not None else -1,
        queued=queue.depth,
        chunks=counts["chunks"],
        pending_vectors=counts["pending"] if embedder.enabled else 0,
        embedder=embedder.state,
        embedder_reason=embedder.unavailable_reason(),
        vault_error=missing,
        watcher="" if missing else watcher_trouble(watcher, queue),
    )


def watcher_trouble(watcher: VaultWatcher, queue: SyncQueue) -> str:
    """Why saves made lately may be missing from results: the watcher is down, or it was
    restarted and the rescan for what it missed has not finished. "" when neither."""
    if not watcher.alive:
        why = watcher.trouble or watcher.error or "its observer thread stopped"
        return f"the file watcher is not running ({why}): new saves are found when it restarts and rescans the vault"
    restarted = watcher.restarted_at
    if restarted is not None and (queue.reconciled_from is None or queue.reconciled_from < restarted):
        when = time.strftime("%H:%M:%S", time.localtime(restarted))
        return f"the file watcher was restarted at {when} ({watcher.restart_reason}): rescanning the vault for saves it missed"
    return ""


def embedder_status(engine: Engine) -> EmbedderStatus:
    described = engine.embedder.describe()
    return EmbedderStatus(
        state=str(described["state"]),
        kind=str(described["kind"]),
        model=str(described["model"]),
        fingerprint=str(described["fingerprint"]),
        dims=int(described["dims"]),
        reason=str(described["error"]),
        failures=int(described["failures"]),
        next_retry_at=float(described["next_retry_at"] or 0.0),
    )


def file_health(vault: Path, engine: Engine, queued: set[str]) -> list[FileHealth]:
    """Every note that is not as it should be, found by comparing the vault with the index."""
    disk = walk(vault)
    states = engine.store.file_states()
    problems = {path: (skipped, problem) for path, skipped, problem in engine.store.problems()}
    found: list[FileHealth] = []
    for path, on_disk in disk.items():
        state = states.get(path)
        if state is None:
            why = "queued: it is indexed within a moment" if path in queued else "not seen by a sync yet: run `tarsctl index`"
            found.append(FileHealth(path, "not_indexed", why))
        elif (state.mtime_ns, state.size) != (on_disk.mtime_ns, on_disk.size):
            why = "queued: it is re-indexed within a moment" if path in queued else "changed on disk since it was indexed"
            found.append(FileHealth(path, "stale", why))
        elif path in problems:
            skipped, problem = problems[path]
            found.append(FileHealth(path, "skipped" if skipped else "repaired", problem))
    for path in states.keys() - disk.keys():
        found.append(FileHealth(path, "deleted", "gone from the vault, still in the index until the next sync"))
    order = {state: i for i, state in enumerate(HEALTH_STATES)}
    return sorted(found, key=lambda f: (order[f.state], f.path))


def server_info(view: ServerView, with_tools: bool) -> ToolServerInfo:
    info = ToolServerInfo(
        name=view.name,
        transport=view.transport,
        target=view.target,
        enabled=view.enabled,
        state=view.state,
        error=view.error,
        error_at=view.error_at,
        restarts=view.restarts,
        next_start_at=view.next_start_at,
        connected_at=view.connected_at,
        server_info=view.server_info,
        circuit=view.circuit,
        circuit_failures=view.circuit_failures,
        circuit_reason=view.circuit_reason,
        circuit_retry_at=view.circuit_retry_at,
        tool_count=len(view.tools),
        pattern_warnings=view.pattern_warnings,
    )
    if with_tools:
        info.tools = [
            ExternalTool(
                tool=t.tool,
                name=t.name,
                policy=t.policy.action,
                why=t.policy.why,
                title=t.title,
                description=t.description,
                read_only=t.read_only,
                problem=t.problem,
            )
            for t in view.tools
        ]
        info.stderr = view.stderr
    return info


def recent_calls(servers: ToolServers, limit: int) -> list[ToolCallRecord]:
    return [
        ToolCallRecord(
            at=r.at,
            server=r.server,
            tool=r.tool,
            outcome=r.outcome,
            conversation=r.conversation,
            arguments=r.arguments,
            approved_by=r.approved_by,
            duration_ms=r.duration_ms,
            chars=r.chars,
        )
        for r in servers.recent(limit)
    ]


def build_status(daemon: DaemonParts, request: Status) -> StatusReply:
    import apsw
    import sqlite_vec

    engine, queue = daemon.engine, daemon.queue
    store = engine.store
    db = daemon.config.db_path
    size = sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists())
    report = queue.last_report
    last_sync: dict[str, object] = {"at": queue.last_sync_at, "error": queue.last_error or "", **queue.describe_retry()}
    if report is not None:
        last_sync.update(indexed=report.indexed, deleted=report.deleted, seconds=round(report.seconds, 3))
    problems = [[path, "skipped" if skipped else "repaired", problem] for path, skipped, problem in store.problems()]
    health = {state: 0 for state in HEALTH_STATES}
    for _, kind, _ in problems:
        health[kind] += 1
    files: list[FileHealth] = []
    if request.files:
        files = file_health(daemon.vault, engine, queue.queued_paths())
        health = {state: sum(1 for f in files if f.state == state) for state in HEALTH_STATES}
    warnings = []
    embedder = embedder_status(engine)
    if embedder.state == "unavailable":
        warnings.append(f"embedder: {embedder.reason}")
    if queue.last_error:
        warnings.append(f"indexing failed: {queue.last_error}")
    if queue.vector_error and queue.vector_error != embedder.reason:
        warnings.append(f"embedding failed: {queue.vector_error}")
    vault_error = current_vault_error(daemon.watcher)
    if vault_error:
        warnings.append(f"vault: {vault_error}: searches answer from the index as it was, and nothing is written until it is back")
    trouble = "" if vault_error else watcher_trouble(daemon.watcher, queue)
    if trouble:
        warnings.append(f"watcher: {trouble}")
    warnings.extend(daemon.assistant.warnings())
    http = daemon.http_status()
    if http.error:
        warnings.append(f"http: {http.error}")
    servers = [server_info(view, with_tools=False) for view in daemon.tool_servers.describe()]
    for server in servers:
        if server.state in ("failed", "misconfigured") or server.circuit == "open":
            warnings.append(
                f"tools: the MCP server {server.name} is {server.state if server.circuit != 'open' else 'failing'}: {server.error}"
            )
        warnings.extend(f"tools: [mcp.servers.{server.name}] {said}" for said in server.pattern_warnings)
    rules = daemon.tool_servers.rules
    if rules is not None and rules.problem:
        warnings.append(f"tools: {rules.problem}")
    channels = daemon.channels_status()
    warnings.extend(channel_warnings(channels))
    sync = daemon.sync_status()
    warnings.extend(sync.warnings)  # a conflict copy of a note of yours, a routine both machines run
    memory = dict(daemon.assistant.memory_status())
    if memory.get("last_restored_at") is None:
        memory["last_restored_at"] = 0.0  # never
    memory["model_lines"] = [NotedLine(**noted) for noted in memory.get("model_lines", [])]
    return StatusReply(
        id=request.id,
        vault=str(daemon.vault),
        database=str(db),
        database_bytes=size,
        counts={**store.counts(), "links": engine.graph.link_count(), "unresolved_links": len(engine.graph.unresolved())},
        embedder=embedder,
        coverage=coverage(queue, engine, daemon.watcher),
        queue_depth=queue.depth,
        indexing=queue.busy,
        last_sync=last_sync,
        watcher=daemon.watcher.describe(),
        problems=problems,
        health=health,
        files=files,
        uptime=round(time.time() - daemon.started_at, 1),
        versions={
            "tars": __version__,
            "python": platform.python_version(),
            "sqlite": apsw.sqlite_lib_version(),
            "sqlite_vec": getattr(sqlite_vec, "__version__", store.vec_version),
            "apsw": apsw.apsw_version(),
            "protocol": str(PROTOCOL_VERSION),
        },
        warnings=warnings,
        memory=MemoryStatus(**memory),
        http=http,
        vault_error=vault_error,
        tool_servers=servers,
        tool_calls=recent_calls(daemon.tool_servers, 10),
        channels=channels,
        memory_budget=engine.plan.describe(),
        routines=routines_status(daemon),
        sync=sync,
    )


def run_info(run: Run | None) -> RunInfo | None:
    if run is None:
        return None
    return RunInfo(
        scheduled_at=run.scheduled_at,
        started_at=run.started_at or 0.0,
        finished_at=run.finished_at or 0.0,
        outcome=run.outcome if run.state == "done" else "running",
        late=run.late,
        detail=run.detail or "",
        conversation=run.conversation or "",
    )


def routines_status(daemon: DaemonParts) -> RoutinesStatus:
    """What runs next, what ran last, and what is wrong now: each routine whose latest outcome is a
    failure (once, however often it failed; gone once a later run went well), each target whose
    latest delivery was given up, and every entry of the routines file that cannot run, by name."""
    book, ledger, clock = daemon.routine_book, daemon.ledger, daemon.clock
    found = book.load()
    reminders = sum(1 for r in found if r.is_reminder)
    next_at, next_name = clock.earliest() if clock is not None else (0.0, "")
    newest = ledger.runs("", 20)
    last = next((run for run in newest if run.outcome != "skipped"), newest[0] if newest else None)
    counts = ledger.delivery_counts()
    latest = ledger.latest_outcomes([r.name for r in found])
    troubled = sorted((run for run in latest.values() if run.outcome in TROUBLE_OUTCOMES), key=lambda run: -run.started_at)
    tz = daemon.routine_tz
    errors = [f"{run.routine}: {run.outcome} ({_when(run.scheduled_at, tz)}): {run.detail}" for run in troubled[:SHOWN_ERRORS]]
    if len(troubled) > SHOWN_ERRORS:
        errors.append(f"and {len(troubled) - SHOWN_ERRORS} more routines whose last run went wrong: tarsctl routines lists them")
    errors += [
        f"delivery to {d.target} failed: {d.last_error} (the message is in the inbox; nothing reached it since)"
        for d in ledger.failing_targets()
    ]
    problem = routines_problem(daemon)
    if not daemon.config.routines.enabled:
        problem = "[routines] enabled = false: this tarsd runs no routines (another machine of the vault does)"
    return RoutinesStatus(
        enabled=daemon.config.routines.enabled,
        routines=len(found) - reminders,
        reminders=reminders,
        paused=sum(1 for r in found if r.paused),
        next_name=next_name,
        next_at=next_at,
        last_name=last.routine if last is not None else "",
        last=run_info(last),
        unread=ledger.unread(),
        pending_deliveries=counts.get("pending", 0),
        failed_deliveries=counts.get("failed", 0),
        problem=problem,
        errors=errors,
        timezone=str(daemon.routine_tz),
        set_aside=[f"{name}: {error}" for name, error in sorted(clock.problems().items())] if clock is not None else [],
    )


def routines_problem(daemon: DaemonParts) -> str:
    """What keeps routines of the file from running: its entries that cannot be read (the book's),
    and the routines the clock set aside because their times cannot be computed, each by name."""
    problems = [daemon.routine_book.problem] if daemon.routine_book.problem else []
    if daemon.clock is not None:
        problems += [f"{name}: {error}" for name, error in sorted(daemon.clock.problems().items())]
        if daemon.clock.trouble:
            problems.append(daemon.clock.trouble)
    return "; ".join(problems)


def _when(at: float, tz) -> str:
    """A run's time in the routines' time zone, as `tarsctl routines` shows it."""
    return datetime.fromtimestamp(at, tz).strftime("%Y-%m-%d %H:%M")


def channel_warnings(channels: list[ChannelStatus]) -> list[str]:
    """What a messenger channel needs the user to do: fix its setup, or know that replies were refused."""
    found = []
    for channel in channels:
        if channel.error:
            found.append(f"{channel.name}: {channel.error}")
        if channel.window_closed:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(channel.window_closed_at))
            found.append(
                f"{channel.name}: {channel.window_closed} repl{'y was' if channel.window_closed == 1 else 'ies were'} refused outside "
                f"WhatsApp's 24-hour window (last at {when}): a message from your phone opens it again"
                + (
                    "; outside the window: no template, so a message tars starts cannot reach you there: set [whatsapp] template "
                    "(docs/whatsapp.md#templates)"
                    if channel.name == "whatsapp" and not channel.template
                    else ""
                )
            )
        if channel.id_changes:
            found.append(
                f"{channel.name}: {channel.id_changes} sender id change{'s' * (channel.id_changes != 1)} reported by "
                f"{channel.title or channel.name}: a new id is not answered until you add it to [{channel.name}] allowed_senders "
                "and restart tarsd; the message sent to the sender names it"
            )
        others = channel.send_failures - channel.window_closed
        if others > 0 and channel.last_error:
            found.append(f"{channel.name}: {others} send(s) failed; the last error: {channel.last_error}")
    return found
