"""`tarsctl routines`, `tarsctl remind`, `tarsctl inbox` and the status line of routines: the
requests, and what they print. The REPL's /routines and /remind use the same functions.

Names of routines are tarsd's own (letters, digits, -), but a prompt, a reminder's text, a run's
detail, what a run said, an inbox message and a delivery's error come from the user's file, a
model or another service: every piece is cleaned (tarsctl/shown.py) before it is printed."""

from __future__ import annotations

import sys
import time

import msgspec

from tarsctl.arguments import print_remote_error
from tarsctl.client import Client, RemoteError
from tarsctl.protocol import (
    Inbox,
    InboxMessage,
    InboxReply,
    Remind,
    RoutineAction,
    RoutineInfo,
    RoutineRan,
    Routines,
    RoutineSaved,
    RoutinesReply,
    RoutinesStatus,
    RunInfo,
    SaveRoutine,
    every_field,
)
from tarsctl.routine_times import clock, day_and_time, soon
from tarsctl.shown import shown_json_line, shown_text

EXIT_OK, EXIT_REMOTE, EXIT_USAGE = 0, 1, 2
DETAIL_CHARS = 60  # of a run's detail in the list (`routines show` has it whole)
SHOWN_RUNS = 10  # the runs `routines show` lists
ACTIONS = {"pause": "pause", "resume": "resume", "rm": "remove", "remove": "remove", "run": "run"}
SAID = {"added": "added", "updated": "changed", "paused": "paused", "resumed": "resumed", "removed": "removed"}


def emit_json(obj: object, out=None) -> int:
    """The reply, every field, as one JSON line (as every --json of tarsctl); the exit code."""
    (out or sys.stdout).write(shown_json_line(msgspec.json.encode(every_field(obj)).decode()) + "\n")
    return EXIT_OK


# ---- the commands ----


def routines_command(client: Client, args) -> int:
    """tarsctl routines [list | show | add | edit | pause | resume | rm | run] ..."""
    action = args.routines_command or "list"
    as_json = args.json
    if action == "list":
        reply = client.call(Routines(id=client.next_id()))
        return emit_json(reply) if as_json else print_routines(reply)
    if action == "show":
        reply = client.call(Routines(id=client.next_id(), name=args.name, runs=SHOWN_RUNS))
        return emit_json(reply) if as_json else print_routine_whole(reply, args.name)
    if action in ("add", "edit"):
        request = _save_request(args, edit=action == "edit")
        if isinstance(request, str):
            print(f"tarsctl: {request}", file=sys.stderr)
            return EXIT_USAGE
        saved = client.call(request)
        return emit_json(saved) if as_json else print_saved(saved, saved.timezone)
    reply = client.call(RoutineAction(id=client.next_id(), name=args.name, action=ACTIONS[action]))
    if as_json:
        emit_json(reply)
        return EXIT_REMOTE if isinstance(reply, RoutineRan) and reply.run.outcome in NOT_RUN_OUTCOMES else EXIT_OK
    if isinstance(reply, RoutineRan):
        return print_ran(reply)
    return print_saved(reply, reply.timezone if reply.status == "resumed" else "")


def _save_request(args, edit: bool) -> SaveRoutine | str:
    """The SaveRoutine of `routines add|edit NAME --...`, or what is wrong with the command line."""
    prompt = args.prompt
    if prompt == "-":
        prompt = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    elif prompt is not None:
        prompt = prompt.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    if not edit and (args.schedule is None or not prompt):
        return 'a routine needs --schedule (cron "30 7 * * *", "every 2h", or "2026-11-27 15:00") and --prompt (- reads it from stdin)'
    for name, value in (("--runs-per-day", args.runs_per_day), ("--tokens-per-run", args.tokens_per_run)):
        if value is not None and value < 1:
            return f"{name} must be 1 or more"
    if args.grace is not None and args.grace < 0:
        return "--grace must be 0 or more minutes"
    fields = {
        "schedule": args.schedule,
        "prompt": prompt,
        "deliver": _listed(args.deliver),
        "tools": _listed(args.tools),
        "quiet": args.quiet,
        "runs_per_day": args.runs_per_day,
        "tokens_per_run": args.tokens_per_run,
        "grace_minutes": args.grace,
        "note": args.note,
        "heading": args.heading,
    }
    if edit and all(value is None for value in fields.values()):
        return "say what to change: --schedule, --prompt, --deliver, --tools, --quiet/--no-quiet, ... (tarsctl routines edit --help)"
    return SaveRoutine(id=0, name=args.name, edit=edit, **fields)


def _listed(values: list[str] | None) -> list[str] | None:
    """``--tools a,b --tools c``: ["a", "b", "c"]; not given: None (unchanged)."""
    if values is None:
        return None
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def remind_command(client: Client, args) -> int:
    """tarsctl remind WHEN TEXT... [--to CHANNEL]... (WHEN's shape was checked with the arguments);
    a WHEN or a target tarsd refuses is a usage error too (exit 2): the time has passed, is too far."""
    try:
        saved = client.call(Remind(id=client.next_id(), when=args.when, text=args.text, to=_listed(args.to) or []))
    except RemoteError as exc:
        if exc.error.code != "bad_request":
            raise
        print_remote_error(exc.error.message, exc.error.hint)
        return EXIT_USAGE
    if args.json:
        emit_json(saved)
        return EXIT_OK
    print(reminder_set(saved, saved.timezone, "tarsctl routines rm"))
    return EXIT_OK


def remind(client: Client, words: list[str], out=sys.stdout, err=sys.stderr) -> int:
    """The REPL's /remind WHEN TEXT, to the default targets."""
    from tarsctl.routine_times import WHEN_FORMS, split_when, when_problem

    when, rest = split_when(words)
    text = " ".join(rest).strip()
    if not when or not text:
        print(f"usage: /remind WHEN TEXT, WHEN being {WHEN_FORMS}", file=err)
        return EXIT_USAGE
    problem = when_problem(when)
    if problem:
        print(f"/remind: {problem}", file=err)
        return EXIT_USAGE
    saved = client.call(Remind(id=client.next_id(), when=when, text=text))
    print(reminder_set(saved, saved.timezone, "tarsctl routines rm"), file=out)
    return EXIT_OK


def inbox_command(client: Client, args) -> int:
    """tarsctl inbox [--all] [-n N] [--keep-unread]: one request lists, one marks what was shown."""
    reply = client.call(Inbox(id=client.next_id(), limit=args.limit, unread=not args.all))
    if args.json:
        emit_json(reply)
    else:
        print_inbox(reply, args.all)
    unread = [message.id for message in reply.messages if not message.read]
    if unread and not args.keep_unread:
        # Marked only once printed: a listing that never reached the user leaves them unread.
        client.call(Inbox(id=client.next_id(), limit=1, unread=True, mark_read=unread))
    return EXIT_OK


# ---- what they print ----


def print_routines(reply: RoutinesReply, out=sys.stdout) -> int:
    """One line per routine and reminder, then where they come from and what is wrong."""
    now = time.time()
    if not reply.routines:
        print("No routines or reminders: tarsctl routines add NAME --schedule S --prompt P, or tarsctl remind WHEN TEXT", file=out)
    width = max((len(shown_text(r.name)) for r in reply.routines), default=0)
    schedules = max((len(_what(r)) for r in reply.routines), default=0)
    for routine in reply.routines:
        print(routine_line(routine, reply.timezone, now, width, schedules), file=out)
    print(_source(reply), file=out)
    return EXIT_OK


def routine_line(routine: RoutineInfo, timezone: str, now: float, width: int = 0, schedules: int = 0) -> str:
    """name  kind  schedule  next Thu 07:30  last spoke Wed 07:30 (late)  by:model (a reminder: its text
    in place of its schedule, whose time the next run says)"""
    parts = [
        shown_text(routine.name).ljust(width),
        routine.kind.ljust(8),
        _what(routine).ljust(schedules),
        "next " + _next(routine, timezone, now).ljust(9),
        "last " + (_run(routine.last_run, timezone, now, DETAIL_CHARS) if routine.last_run is not None else "-"),
    ]
    if routine.by == "model":
        parts.append("by:model")
    if routine.review:
        parts.append(f"runs: {built_in_run(routine.review, short=True)}")
    return "  ".join(parts).rstrip()


# A reminder's text in the list is cut here (tarsctl routines show NAME has it whole).
REMINDER_TEXT_CHARS = 40


def _what(routine: RoutineInfo) -> str:
    """The list's third column: a routine's schedule; a reminder's text, quoted (its name is made
    up from its time, and its one run is the next-run column)."""
    if routine.kind != "reminder" or not routine.text:
        return shown_text(routine.schedule)
    text = shown_text(routine.text)
    return f'"{text[: REMINDER_TEXT_CHARS - 1]}…"' if len(text) > REMINDER_TEXT_CHARS else f'"{text}"'


# A routine whose run is built in (RoutineInfo.review) has no prompt: what it runs instead, for people.
BUILT_IN_RUNS = {
    "memory": (
        "the memory review",
        "the memory review: proposes changes to Memory.md, changes nothing until you approve them (tarsctl memory proposals)",
    ),
}


def built_in_run(review: str, short: bool = False) -> str:
    known = BUILT_IN_RUNS.get(review)
    if known is None:
        return f"the built-in review {shown_text(review)!r}"
    return known[0] if short else known[1]


def _next(routine: RoutineInfo, timezone: str, now: float) -> str:
    if routine.paused:
        return "paused"
    if not routine.next_run:
        return "-"
    return soon(routine.next_run, timezone, now)


def _run(run: RunInfo, timezone: str, now: float, detail_chars: int | None) -> str:
    """spoke Wed 07:30 (late): what it said or why it did not"""
    when = run.scheduled_at or run.started_at
    said = shown_text(run.outcome or "?") + (f" {soon(when, timezone, now)}" if when else "")
    if run.late:
        said += " (late)"
    if run.detail:
        cut = detail_chars is not None and len(run.detail) > detail_chars
        said += f": {shown_text(run.detail[: detail_chars - 1] if cut else run.detail)}" + ("…" if cut else "")
    return said


def _source(reply: RoutinesReply) -> str:
    lines = [f"file: {shown_text(reply.file)}" + (f"; time zone {shown_text(reply.timezone)}" if reply.timezone else "")]
    if not reply.enabled:
        lines.append("[routines] enabled = false: none runs on this machine (another machine runs them, or set it true)")
    if reply.problem:
        lines.append(f"problem: {shown_text(reply.problem)}")
    for missed in reply.skipped:
        lines.append(f"skipped: {shown_text(missed)}")
    return "\n".join(lines)


def print_routine_whole(reply: RoutinesReply, name: str, out=sys.stdout) -> int:
    """`routines show NAME`: every field, the prompt or text whole, the last runs."""
    found = [r for r in reply.routines if r.name == name] or reply.routines[:1]
    if not found:
        print(f"tarsctl: no routine or reminder named {shown_text(name)}: tarsctl routines lists them", file=sys.stderr)
        return EXIT_REMOTE
    routine, zone = found[0], reply.timezone
    rows = [
        ("name", shown_text(routine.name)),
        ("kind", routine.kind + (" (set by the model when you asked)" if routine.by == "model" else "")),
        ("schedule", shown_text(routine.schedule)),
        ("next", "paused" if routine.paused else day_and_time(routine.next_run, zone) if routine.next_run else "-"),
        ("deliver", shown_text(", ".join(routine.deliver)) or "-"),
    ]
    if routine.kind != "reminder":
        limits = []
        if routine.runs_per_day:
            limits.append(f"{routine.runs_per_day} runs a day ({routine.runs_today} today)")
        if routine.tokens_per_run:
            limits.append(f"{routine.tokens_per_run:,} tokens a run")
        rows += [
            ("tools", shown_text(", ".join(routine.tools)) or "none without asking"),
            ("quiet", "yes: speaks only when there is something to say" if routine.quiet else "no"),
            ("limits", ", ".join(limits) or "-"),
            ("grace", f"{routine.grace_minutes} min"),
        ]
    if routine.note:
        rows.append(("note", shown_text(routine.note + (f" under {routine.heading}" if routine.heading else ""))))
    for label, value in rows:
        print(f"{label:<10} {value}", file=out)
    if routine.review:
        print(f"{'review':<10} {built_in_run(routine.review)}", file=out)
    else:
        body = routine.text if routine.kind == "reminder" else routine.prompt
        print("text" if routine.kind == "reminder" else "prompt", file=out)
        for line in shown_text(body, keep_newlines=True).splitlines() or [""]:
            print(f"  {line}", file=out)
    runs = routine.runs or ([routine.last_run] if routine.last_run is not None else [])
    print("runs" if runs else "runs       none yet", file=out)
    for run in runs:
        print(f"  {_run_whole(run, zone)}", file=out)
    print(_source(reply), file=out)
    if routine.undo:
        print(f"undo: {shown_text(routine.undo)}", file=out)
    return EXIT_OK


def _run_whole(run: RunInfo, zone: str) -> str:
    when = day_and_time(run.scheduled_at or run.started_at, zone) if run.scheduled_at or run.started_at else "-"
    said = f"{when}  {shown_text(run.outcome or '?')}" + (" (late)" if run.late else "")
    if run.started_at and run.finished_at:
        said += f", started {clock(run.started_at, zone)}, {run.finished_at - run.started_at:.1f} s"
    if run.conversation:
        said += f", conversation {shown_text(run.conversation)}"
    if run.detail:
        said += f": {shown_text(run.detail)}"
    return said


def print_saved(saved: RoutineSaved, timezone: str = "", out=sys.stdout) -> int:
    """added NAME: next run Thu 26 Nov 07:30 (FILE); ``timezone``: the routines' (RoutineSaved.timezone)."""
    routine = saved.routine
    said = f"{SAID.get(saved.status, shown_text(saved.status))} {shown_text(routine.name)}"
    if saved.status in ("added", "updated", "resumed") and routine.next_run:
        said += f": next run {day_and_time(routine.next_run, timezone)}"
    print(said + (f" ({shown_text(saved.file)})" if saved.file else ""), file=out)
    if saved.status == "added" and routine.undo:
        print(f"  undo: {shown_text(routine.undo)}", file=out)
    return EXIT_OK


# Outcomes of `routines run` that mean it did not run as asked: nothing on stdout, the reason on stderr, exit 1.
NOT_RUN_OUTCOMES = ("failed", "limited", "interrupted")


def print_ran(ran: RoutineRan, out=sys.stdout, err=sys.stderr) -> int:
    """A run that went through: what it said on stdout ("(nothing to say)" for a quiet one), its
    outcome on stderr, exit 0. One that did not (failed, limited, interrupted): nothing on stdout,
    the outcome and its reason on stderr, exit 1; a script sees the difference by stdout and code."""
    outcome = shown_text(ran.run.outcome or "?") + (f": {shown_text(ran.run.detail)}" if ran.run.detail else "")
    if ran.run.outcome in NOT_RUN_OUTCOMES:
        print(f"tarsctl: {shown_text(ran.name)} {outcome}", file=err)
        return EXIT_REMOTE
    text = ran.text.strip()
    print(shown_text(text, keep_newlines=True) if text else "(nothing to say)", file=out)
    print(f"{shown_text(ran.name)}: {outcome}", file=err)
    return EXIT_OK


def reminder_set(saved: RoutineSaved, timezone: str, remove_command: str) -> str:
    """Reminder set for Thu 26 Nov 15:00 (telegram): go to the shop
    undo: tarsctl routines rm remind-1126-1500"""
    routine = saved.routine
    when = day_and_time(routine.next_run, timezone) if routine.next_run else "now"
    targets = f" ({shown_text(', '.join(routine.deliver))})" if routine.deliver else ""
    undo = f"{remove_command} {routine.name}"
    return f"Reminder set for {when}{targets}: {shown_text(routine.text)}\n  undo: {shown_text(undo)}"


def print_inbox(reply: InboxReply, everything: bool, out=sys.stdout) -> int:
    if not reply.messages:
        print("No messages." if everything else "No unread messages.", file=out)
        return EXIT_OK
    for message in reply.messages:
        print("\n".join(inbox_lines(message, timezone=reply.timezone)), file=out)
    shown_unread = sum(1 for m in reply.messages if not m.read)
    if reply.unread > shown_unread:
        print(f"({reply.unread - shown_unread} more unread: tarsctl inbox -n N shows more)", file=out)
    return EXIT_OK


def inbox_lines(message: InboxMessage, now: float | None = None, timezone: str = "") -> list[str]:
    now = time.time() if now is None else now
    head = f"{day_and_time(message.created_at, timezone)}  {shown_text(message.source)}"
    if message.title:
        head += f"  {shown_text(message.title)}"
    if not message.read:
        head += "  (unread)"
    lines = [head]
    lines += [f"  {line}" for line in shown_text(message.text, keep_newlines=True).splitlines()]
    for delivery in message.deliveries:
        if delivery.target == "inbox":
            continue
        lines.append(f"  -> {shown_text(delivery.target)}: {_delivery_state(delivery, timezone)}")
    return lines


def _delivery_state(delivery, timezone: str = "") -> str:
    tries = f"{delivery.attempts} attempt{'s' * (delivery.attempts != 1)}"
    if delivery.state == "sent":
        return "sent" + (f" {clock(delivery.sent_at, timezone)}" if delivery.sent_at else "")
    if delivery.state == "failed":
        return f"failed after {tries}" + (f": {shown_text(delivery.last_error)}" if delivery.last_error else "")
    if delivery.next_attempt_at:
        after = f" (after {tries}: {shown_text(delivery.last_error)})" if delivery.last_error else ""
        return f"retry at {clock(delivery.next_attempt_at, timezone)}{after}"
    return "waiting to be sent"


def status_lines(routines: RoutinesStatus, now: float | None = None) -> list[str]:
    """The routines line of `tarsctl status` (uncleaned: status cleans every line whole)."""
    now = time.time() if now is None else now
    counts = f"{routines.routines} routine{'s' * (routines.routines != 1)}, {routines.reminders} reminder{'s' * (routines.reminders != 1)}"
    if routines.paused:
        counts += f" ({routines.paused} paused)"
    parts = [counts if routines.enabled else counts + ", none run here ([routines] enabled = false)"]
    if routines.next_name and routines.next_at:
        parts.append(f"next {routines.next_name} at {soon(routines.next_at, routines.timezone, now=now)}")
    if routines.last_name and routines.last is not None:
        parts.append(f"last {routines.last_name} {_run(routines.last, routines.timezone, now, DETAIL_CHARS)}")
    parts.append(f"inbox {routines.unread} unread" + (": tarsctl inbox" if routines.unread else ""))
    if routines.failed_deliveries:
        parts.append(f"{routines.failed_deliveries} deliver{'ies' if routines.failed_deliveries != 1 else 'y'} failed")
    if routines.pending_deliveries:
        parts.append(f"{routines.pending_deliveries} waiting for a retry")
    lines = ["routines   " + "; ".join(parts)]
    if routines.problem:
        lines.append(f"           problem: {routines.problem}")
    lines += [f"           {error}" for error in routines.errors]  # tarsd sends each routine's latest trouble once, a few at most
    return lines
