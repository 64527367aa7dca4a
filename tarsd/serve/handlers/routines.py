"""The routine handlers: the routines and reminders (list, add, edit, pause, resume, remove, run
now), a reminder set, the inbox of what they said, and a schedule previewed as it is typed. The
routines file is the user's (tarsd/routines/book.py); every change re-arms the clock at once (the
book tells it; a reply waits for the clock to have read the change, so the next run it shows is the
new one).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

from tarsctl.authority import Right, may
from tarsctl.protocol import (
    DeliveryInfo,
    Inbox,
    InboxMessage,
    InboxReply,
    Message,
    PreviewSchedule,
    Remind,
    RoutineAction,
    RoutineInfo,
    RoutineRan,
    Routines,
    RoutineSaved,
    RoutinesReply,
    RunInfo,
    SaveRoutine,
    SchedulePreview,
)
from tarsd.routines.book import CHANNEL_TARGETS, TARGETS, Routine
from tarsd.routines.ledger import InboxItem, Run
from tarsd.routines.schedule import SCHEDULE_HINT, ScheduleError, parse_schedule, parse_when
from tarsd.serve.handlers.common import Peer, RequestError
from tarsd.serve.parts import DaemonParts
from tarsd.serve.status import routines_problem, run_info

REMINDER_PREFIX = "remind-"  # reminders' names: removing one needs only the right to set one (tarsctl/authority.py)


def routine_info(daemon: DaemonParts, routine: Routine, runs: int = 0) -> RoutineInfo:
    """One routine as `tarsctl routines show` and a saved routine's reply show it."""
    return routine_infos(daemon, [routine], runs)[0]


def routine_infos(daemon: DaemonParts, routines: list[Routine], runs: int = 0) -> list[RoutineInfo]:
    """Each routine with its next run, last run and runs today: the ledger asked once for all (a
    listing of 10,000 routines is two statements, not 20,000 round trips)."""
    ledger = daemon.ledger
    names = [routine.name for routine in routines]
    day_start = datetime.now(daemon.routine_tz).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    last_runs, today = ledger.last_runs(names), ledger.runs_today(names, day_start)
    return [_info(daemon, routine, last_runs.get(routine.name), today.get(routine.name, 0), runs) for routine in routines]


def _info(daemon: DaemonParts, routine: Routine, last: Run | None, runs_today: int, runs: int) -> RoutineInfo:
    settings = daemon.config.routines
    ledger = daemon.ledger
    targets = routine.targets(settings.deliver)
    grace = routine.grace(timedelta(hours=settings.reminder_grace_hours), timedelta(minutes=settings.grace_minutes))
    next_run = daemon.clock.next_run(routine.name) if daemon.clock is not None else None
    limit = settings.reminder_runs_per_day if routine.is_reminder else settings.runs_per_day
    return RoutineInfo(
        name=routine.name,
        kind="reminder" if routine.is_reminder else "routine",
        schedule=routine.schedule,
        prompt=routine.prompt,
        text=routine.text,
        deliver=list(targets),
        tools=list(routine.tools),
        quiet=routine.quiet,
        paused=routine.paused,
        by=routine.by,
        next_run=next_run.timestamp() if next_run is not None else 0.0,
        last_run=run_info(last),
        runs=[info for info in (run_info(r) for r in ledger.runs(routine.name, runs)) if info is not None] if runs else [],
        runs_today=runs_today,
        runs_per_day=routine.runs_per_day if routine.runs_per_day is not None else limit,
        tokens_per_run=routine.tokens_per_run if routine.tokens_per_run is not None else settings.tokens_per_run,
        grace_minutes=round(grace.total_seconds() / 60),
        note=routine.note or (settings.note if "note" in targets else ""),
        heading=routine.heading or (settings.heading if "note" in targets else ""),
        undo=f"tarsctl routines rm {routine.name}",
        review=routine.review,
    )


def _check_targets(daemon: DaemonParts, targets: list[str]) -> None:
    """Refuse a target that cannot work on this tarsd now, rather than fail at the first delivery."""
    for target in targets:
        if target not in TARGETS:
            raise RequestError("bad_request", f"no such delivery target {target!r}", f"use one or more of {', '.join(TARGETS)}")
        section = getattr(daemon.config, target) if target in CHANNEL_TARGETS else None
        if section is not None and not section.enabled:
            raise RequestError(
                "bad_request",
                f"{target} is not enabled in this tarsd, so nothing can be delivered there",
                f"set [{target}] enabled = true (docs/{target}.md), or deliver to inbox or note",
            )


async def _saved(daemon: DaemonParts, request_id: int, routine: Routine, status: str) -> RoutineSaved:
    """The reply to a change of the routines file, once the clock has re-armed for it (so next_run is the new one)."""
    if daemon.clock is not None:
        await daemon.clock.refresh()
    return RoutineSaved(
        id=request_id,
        routine=await asyncio.to_thread(routine_info, daemon, routine),
        status=status,
        file=str(daemon.routine_book.path),
        timezone=str(daemon.routine_tz),
    )


def _find(daemon: DaemonParts, name: str) -> Routine:
    routine = daemon.routine_book.get(name)
    if routine is None:
        raise RequestError("not_found", f"there is no routine or reminder called {name!r}", "`tarsctl routines` lists them")
    return routine


async def routines(daemon: DaemonParts, request: Routines, _peer: Peer) -> AsyncIterator[Message]:
    def listing() -> RoutinesReply:
        book = daemon.routine_book
        found = book.load()
        if request.name:
            found = [_find(daemon, request.name)]
        return RoutinesReply(
            id=request.id,
            routines=routine_infos(daemon, found, request.runs if request.name else 0),
            file=str(book.path),
            timezone=str(daemon.routine_tz),
            enabled=daemon.config.routines.enabled,
            problem=routines_problem(daemon),
            skipped=list(daemon.routines_skipped),
        )

    if daemon.clock is not None:
        await daemon.clock.refresh()  # a hand edit is read now (in a worker thread), and a suspend noticed
    yield await asyncio.to_thread(listing)


async def save_routine(daemon: DaemonParts, request: SaveRoutine, _peer: Peer) -> AsyncIterator[Message]:
    given = {
        field: getattr(request, field)
        for field in (
            "schedule",
            "prompt",
            "deliver",
            "tools",
            "quiet",
            "runs_per_day",
            "tokens_per_run",
            "grace_minutes",
            "note",
            "heading",
        )
        if getattr(request, field) is not None
    }
    for field in ("deliver", "tools"):
        if field in given:
            given[field] = tuple(given[field])
    if "deliver" in given:
        _check_targets(daemon, list(given["deliver"]))
    book = daemon.routine_book
    if request.edit:
        routine = _find(daemon, request.name)
        if routine.is_reminder and "prompt" in given:
            raise RequestError("bad_request", f"{request.name} is a reminder: it has a text, not a prompt", "remove it and add a routine")
        saved = await asyncio.to_thread(book.update, request.name, **given)
        status = "updated"
    else:
        if request.name.startswith(REMINDER_PREFIX):
            raise RequestError("bad_request", f"names starting with {REMINDER_PREFIX!r} are for reminders", "give the routine another name")
        if not (given.get("prompt") or "").strip():
            raise RequestError(
                "bad_request", "a routine needs a prompt: what tars is asked at each run", 'e.g. --prompt "What is due today?"'
            )
        if not (given.get("schedule") or "").strip():
            raise RequestError("bad_request", "a routine needs a schedule", 'e.g. "30 7 * * *" (cron), "every 2h", or "2026-11-27 15:00"')
        saved = await asyncio.to_thread(book.add, Routine(name=request.name, created=time.time(), by="user", **given))
        status = "added"
    yield await _saved(daemon, request.id, saved, status)


async def routine_action(daemon: DaemonParts, request: RoutineAction, peer: Peer) -> AsyncIterator[Message]:
    book = daemon.routine_book
    routine = _find(daemon, request.name)
    if request.action == "run":
        if routine.is_reminder:
            raise RequestError(
                "bad_request", f"{request.name} is a reminder: it is sent at its time", "`tarsctl inbox` shows what was sent"
            )
        run, text = await daemon.run_routine(routine)
        yield RoutineRan(id=request.id, name=routine.name, run=run_info(run) or RunInfo(), text=text)
        return
    if request.action in ("pause", "resume"):
        saved = await asyncio.to_thread(book.set_paused, request.name, request.action == "pause")
        status = "paused" if request.action == "pause" else "resumed"
    elif request.action == "remove":
        # The table lets a phone remove a reminder (a name starting remind-); a routine under such a
        # name, written by hand, is still a routine: removing it is writing routines.
        if not routine.is_reminder and not may(peer.principal, Right.SCHEDULE):
            raise RequestError(
                "forbidden",
                f"{request.name} is a routine, and only the user at the terminal or the page removes one",
                "run `tarsctl routines rm NAME`",
            )
        saved = await asyncio.to_thread(book.remove, request.name)
        status = "removed"
    else:
        raise RequestError("bad_request", f"no such action {request.action!r}", "use pause, resume, remove or run")
    yield await _saved(daemon, request.id, saved, status)


async def remind(daemon: DaemonParts, request: Remind, peer: Peer) -> AsyncIterator[Message]:
    text = request.text.strip()
    if not text:
        raise RequestError("bad_request", "a reminder needs a text", 'e.g. tarsctl remind 15:00 "go to the shop"')
    if not daemon.config.routines.enabled:
        raise RequestError(
            "unavailable",
            "this tarsd runs no routines or reminders ([routines] enabled = false), so the reminder would never come",
            "set it on the machine that runs your routines, or set [routines] enabled = true here",
        )
    when = parse_when(request.when, daemon.routine_tz, datetime.now(daemon.routine_tz))
    targets = list(request.to)
    _check_targets(daemon, targets or list(daemon.config.routines.deliver))
    saved = await asyncio.to_thread(set_reminder, daemon, when, text, targets, "user")
    yield await _saved(daemon, request.id, saved, "added")


def set_reminder(daemon: DaemonParts, when: datetime, text: str, targets: list[str], by: str) -> Routine:
    book = daemon.routine_book
    name = book.reminder_name(when)
    return book.add(
        Routine(name=name, schedule=when.isoformat(timespec="seconds"), created=time.time(), text=text, deliver=tuple(targets), by=by)
    )


def inbox_message(item: InboxItem) -> InboxMessage:
    return InboxMessage(
        id=item.id,
        created_at=item.created_at,
        source=item.source,
        title=item.title,
        text=item.text,
        read=item.read,
        deliveries=[
            DeliveryInfo(d.target, d.state, d.attempts, d.last_error or "", d.next_attempt_at or 0.0, d.sent_at or 0.0)
            for d in item.deliveries
        ],
    )


async def inbox(daemon: DaemonParts, request: Inbox, _peer: Peer) -> AsyncIterator[Message]:
    def answer() -> InboxReply:
        ledger = daemon.ledger
        if request.mark_all_read:
            ledger.mark_read(None)
        elif request.mark_read:
            ledger.mark_read(list(request.mark_read))
        items = ledger.inbox(request.limit, request.unread)
        return InboxReply(
            id=request.id, messages=[inbox_message(item) for item in items], unread=ledger.unread(), timezone=str(daemon.routine_tz)
        )

    yield await asyncio.to_thread(answer)


async def preview_schedule(daemon: DaemonParts, request: PreviewSchedule, _peer: Peer) -> AsyncIterator[Message]:
    """Whether a schedule can be used, and its next runs: read by the schedule module itself, as
    saving the routine would read it (the web page asks as the user types; nothing is saved)."""

    def preview() -> SchedulePreview:
        tz = daemon.routine_tz
        now = datetime.now(tz)
        reply = SchedulePreview(id=request.id, schedule=" ".join(request.schedule.split()), timezone=str(tz))
        # An `every` series counts from the routine's creation: an edit keeps it, a new routine starts now.
        edited = daemon.routine_book.get(request.name) if request.name else None
        anchor = datetime.fromtimestamp(edited.created, UTC) if edited is not None else now
        try:
            # The minimum interval too: the page must refuse what saving would refuse.
            schedule = parse_schedule(request.schedule, tz, now, min_interval=daemon.routine_book.min_interval_seconds)
            runs: list[float] = []
            after = now
            while len(runs) < request.runs and (run := schedule.next_after(after, anchor)) is not None:
                runs.append(run.timestamp())
                after = run
        except ScheduleError as exc:
            reply.problem, reply.hint = str(exc), exc.hint
            return reply
        except (OverflowError, ValueError) as exc:  # a run past the last date a computer clock can hold
            reply.problem, reply.hint = f"{reply.schedule!r} cannot be used: its runs are out of range ({exc})", SCHEDULE_HINT
            return reply
        reply.valid, reply.kind, reply.runs = True, schedule.kind, runs
        return reply

    yield await asyncio.to_thread(preview)
