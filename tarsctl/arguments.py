"""What tarsctl reads from its command line: the parser of every command, the exit codes, and the
forms of time ``--since`` takes. It imports only the standard library: tarsctl's quick path
(quick.py) parses ``search`` and ``ping`` with the same definitions, without loading the rest.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable

from tarsctl import __version__
from tarsctl.shown import shown_text
from tarsctl.transport import DaemonNotRunning, ProtocolError

EXIT_OK, EXIT_REMOTE, EXIT_USAGE, EXIT_NOT_RUNNING = 0, 1, 2, 3
# What Search.types may name (a hit's memory_type is one of them).
MEMORY_TYPES = ("semantic", "procedural", "episodic", "note")


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 as well; keep its wording short
        self.print_usage(sys.stderr)
        print(f"tarsctl: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def full_parser() -> argparse.ArgumentParser:
    """Every command, as `tarsctl --help` lists them."""
    parser, commands = top_parser()
    add_search(commands)

    links = commands.add_parser("links", help="the links in a note, and where they lead")
    links.add_argument("note", nargs="?", default="", help="a note's path, file name, title or alias")
    links.add_argument("--unresolved", action="store_true", help="every link in the vault that leads to no note")
    links.add_argument("--json", action="store_true")
    backlinks = commands.add_parser("backlinks", help="the notes that link to a note, with line numbers")
    backlinks.add_argument("note", help="a note's path, file name, title or alias")
    backlinks.add_argument("--json", action="store_true")
    related = commands.add_parser("related", help="the notes nearest in meaning to a note, marking those already linked")
    related.add_argument("note", help="a note's path, file name, title or alias")
    related.add_argument("--limit", type=int, default=10)
    related.add_argument("--json", action="store_true")

    index = commands.add_parser("index", help="index the whole vault, or the given notes (keywords at once, vectors after)")
    index.add_argument("paths", nargs="*")
    index.add_argument("--full", action="store_true", help="re-read and re-chunk every file")
    index.add_argument("--wait", action="store_true", help="also wait until every passage has its vector, with progress")
    index.add_argument("--json", action="store_true", help="progress events and the result as JSON lines on stdout")

    chat = commands.add_parser("chat", help="chat with tars: a REPL, or one message (argument or stdin)")
    chat.add_argument("message", nargs="*", help="a one-shot message (also read from stdin when it is not a terminal)")
    chat.add_argument("--conversation", help="conversation id (default: cli for the REPL, oneshot for one message)")
    chat.add_argument("--provider", choices=("ollama", "anthropic"), default="")
    chat.add_argument("--model", default="")
    chat.add_argument("--repl", action="store_true", help="interactive even when stdin is not a terminal")
    chat.add_argument("--json", action="store_true", help="one-shot: print the final reply as JSON, no streaming")
    chat.add_argument("--explain", action="store_true", help="say how much of the vault's context the first message was given")
    chat.add_argument(
        "--allow-tools",
        action="append",
        default=[],
        metavar="NAME[,NAME]",
        help="run these tools of other MCP servers without asking, for this message or session (names as `tarsctl tools` shows)",
    )

    remember = commands.add_parser("remember", help="save a fact to Memory.md (or a rule with --procedural)")
    remember.add_argument("fact", nargs="+")
    remember.add_argument("--procedural", action="store_true", help="a rule for how tars works, not a fact about you")
    remember.add_argument("--section", default="", help="the Memory.md heading to put it under")
    settle = remember.add_mutually_exclusive_group()
    settle.add_argument("--replace", action="store_true", help="replace the similar line already there (in place, same heading)")
    settle.add_argument("--force", action="store_true", help="keep it beside a similar line already there")

    forget_command = commands.add_parser("forget", help="remove a line from Memory.md (or a rule with --procedural), after a confirmation")
    forget_command.add_argument("text", nargs="+", help="some words of the line")
    forget_command.add_argument("--procedural", action="store_true", help="a rule in the procedural rules, not a fact in Memory.md")
    forget_command.add_argument("--yes", action="store_true", help="do not ask: forget the closest line when it clearly matches")
    forget_command.add_argument("--limit", type=int, default=5, help="how many close lines to show (default 5)")

    commands.add_parser("review", help="turn /w and /r feedback into procedural rules, with your approval")
    rules_command = commands.add_parser("rules", help="list the rules the model proposed in chats; approve or reject them")
    rules_command.add_argument("action", nargs="?", choices=("approve", "reject"), help="without it: list (and ask on a terminal)")
    rules_command.add_argument("rule_id", nargs="?", type=int, help="the proposal's number, as the list shows it (#N)")

    tools = commands.add_parser("tools", help="the MCP servers whose tools the chat may call: state, tools and their policy, recent calls")
    tools.add_argument("--json", action="store_true", help="every field, as one JSON object")

    _add_routine_commands(commands)
    _add_memory_commands(commands)

    status = commands.add_parser("status", help="show what the daemon is doing")
    status.add_argument("--json", action="store_true", help="every field, as one JSON object")
    status.add_argument("--files", action="store_true", help="list every note that is not indexed, stale, skipped or repaired")
    add_ping(commands)
    commands.add_parser("stop", help="stop the daemon")
    completion = commands.add_parser("completion", help="print a shell completion script")
    completion.add_argument("shell", choices=("bash", "zsh"))
    _add_setup_commands(commands)
    return parser


# `tarsctl routines --json show X` and `tarsctl routines show X --json` alike: an action's own
# --json sets the flag only when given (its default would overwrite the one given before the action).
_ALSO_HERE = {"action": "store_true", "default": argparse.SUPPRESS, "help": "the reply, every field, as one JSON object"}


def _add_memory_commands(commands) -> None:
    """memory: the memory review (docs/memory.md#the-memory-review)."""
    memory = commands.add_parser(
        "memory",
        help="the memory review: proposals to keep Memory.md small and true, each yours to approve or reject; undo",
        description="review: review Memory.md now (on a terminal, decide each proposal); proposals: those waiting; "
        "approve|reject N... or --kind KIND; undo [N]: undo a change (the last by default); "
        'schedule "CRON": run the review on a schedule.',
    )
    memory.add_argument("memory_action", choices=("review", "proposals", "approve", "reject", "undo", "schedule"), metavar="ACTION")
    memory.add_argument("rest", nargs="*", help="proposal numbers (approve, reject), a change number (undo), a schedule (schedule)")
    memory.add_argument(
        "--kind", default="", choices=("", "duplicate", "supersede", "expired", "budget", "missing"), help="all waiting of a kind"
    )
    memory.add_argument("--no-sessions", action="store_true", help="review: without reading the session logs with the model")
    memory.add_argument("--provider", choices=("ollama", "anthropic"), default="")
    memory.add_argument("--model", default="")
    memory.add_argument(
        "--deliver",
        action="append",
        default=[],
        choices=("inbox", "telegram", "whatsapp", "note"),
        help="schedule: where it says what it found",
    )
    memory.add_argument("--json", action="store_true", help="review, proposals: the reply, every field, as one JSON object")


def _add_routine_commands(commands) -> None:
    """routines, remind, inbox: what tars says on its own (docs/routines.md)."""
    routines = commands.add_parser(
        "routines",
        help="routines and reminders: list, show, add, edit, pause, resume, rm, run",
        description="Without an action: the list. A routine is a prompt run on a schedule; a reminder a text sent at a time.",
    )
    routines.add_argument("--json", action="store_true", help="the reply, every field, as one JSON object")
    actions = routines.add_subparsers(dest="routines_command", parser_class=Parser)
    actions.add_parser("list", help="every routine and reminder: schedule, next and last run").add_argument("--json", **_ALSO_HERE)
    show = actions.add_parser("show", help="one routine whole, with its last runs")
    show.add_argument("name")
    show.add_argument("--json", **_ALSO_HERE)
    for action in ("add", "edit"):
        saving = actions.add_parser(
            action,
            help="add a routine" if action == "add" else "change a routine: only the options given change",
        )
        saving.add_argument("name", help="letters, digits and - (the name in routines.toml)")
        saving.add_argument("--schedule", help='cron "30 7 * * *", "every 2h", or once "2026-11-27 15:00" (the routines\' time zone)')
        saving.add_argument("--prompt", help="what tars is asked at each run; - reads it from stdin")
        saving.add_argument(
            "--deliver", action="append", metavar="TARGET[,T]", help="inbox, telegram, whatsapp, note (repeatable; else [routines] deliver)"
        )
        saving.add_argument(
            "--tools", action="append", metavar="NAME[,NAME]", help="tools a run may use without asking (names as `tarsctl tools` shows)"
        )
        saving.add_argument(
            "--quiet", action=argparse.BooleanOptionalAction, default=None, help="speak only when there is something to say"
        )
        saving.add_argument("--runs-per-day", type=int, metavar="N", help="at most this many runs a day")
        saving.add_argument("--tokens-per-run", type=int, metavar="N", help="at most this many tokens a run")
        saving.add_argument("--grace", type=int, metavar="MIN", help="minutes a missed run may still start late")
        saving.add_argument("--note", metavar="PATH", help="the note target's vault path ({date}: the day's date)")
        saving.add_argument("--heading", help="the heading in that note to write under")
        saving.add_argument("--json", **_ALSO_HERE)
    for action, said in (
        ("pause", "stop running it until resumed"),
        ("resume", "run it on its schedule again"),
        ("rm", "remove a routine or reminder from the routines file"),
        ("remove", "the same as rm"),
        ("run", "run a routine now and print what it said"),
    ):
        acting = actions.add_parser(action, help=said)
        acting.add_argument("name")
        acting.add_argument("--json", **_ALSO_HERE)

    remind = commands.add_parser(
        "remind",
        help="a reminder: TEXT sent to you at WHEN (no model run)",
        description="WHEN is HH:MM, a date and time (2026-11-27 15:00), or in N s|min|h|d: "
        '`tarsctl remind in 20 min tea` reads "in 20 min" as WHEN although it is three words.',
    )
    remind.add_argument("when", help="HH:MM, 2026-11-27 15:00, or in N s|min|h|d")
    remind.add_argument("text", nargs="*", help="what to remind you of")
    remind.add_argument("--to", action="append", metavar="CHANNEL", help="inbox, telegram, whatsapp (repeatable; default: the config's)")
    remind.add_argument("--json", action="store_true")

    inbox = commands.add_parser("inbox", help="what routines and reminders said, newest first, and where it was delivered")
    inbox.add_argument("--all", action="store_true", help="read messages too, not only the unread")
    inbox.add_argument("-n", "--limit", type=int, default=20, metavar="N", help="at most N messages (default 20)")
    inbox.add_argument("--keep-unread", action="store_true", help="do not mark the messages shown as read")
    inbox.add_argument("--json", action="store_true")


def top_parser(parser_class: type[Parser] = Parser) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    """tarsctl's own options, and the place its commands go."""
    parser = parser_class(prog="tarsctl", description="Search and control the tars daemon.")
    parser.add_argument("--socket", help="tarsd's socket (default: $TARS_SOCKET or the per-user runtime dir)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds to wait for an answer (default: no limit)")
    parser.add_argument("--version", action="version", version=f"tarsctl {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=parser_class)
    return parser, commands


def add_search(commands) -> None:
    search = commands.add_parser("search", help="search the vault")
    search.add_argument("query", nargs="+")
    search.add_argument("--mode", choices=("hybrid", "fts", "vec"), default="hybrid")
    search.add_argument("--limit", type=int, default=10)
    search.add_argument("--min-score", type=float, default=0.0)
    search.add_argument("--type", action="append", choices=MEMORY_TYPES, default=[], help="memory type (repeatable)")
    search.add_argument("--path", default="", help="only notes under this path prefix")
    search.add_argument("--all-chunks", action="store_true", help="every matching chunk, not only the best per note")
    search.add_argument("--tag", action="append", default=[], help="only notes with this tag (repeatable: all of them; a matches a/b)")
    search.add_argument("--since", help="only notes modified since: 2026-11-01, 2026-11-01T09:30, 36h, 7d, 2w, 3m, 1y, today, yesterday")
    search.add_argument("--before", help="only notes modified before (same forms as --since)")
    search.add_argument("--explain", action="store_true", help="show why each hit ranks where it does")
    search.add_argument("--json", action="store_true", help="one JSON object per hit on stdout; coverage and warnings as JSON on stderr")


def add_ping(commands) -> None:
    commands.add_parser("ping", help="check that the daemon answers").add_argument("--json", action="store_true")


def search_fields(args: argparse.Namespace) -> dict:
    """The fields of a search request (protocol.Search) from a settled ``search`` command line."""
    return {
        "query": " ".join(args.query),
        "mode": args.mode,
        "limit": args.limit,
        "min_score": args.min_score,
        "types": args.type,
        "path": args.path,
        "all_chunks": args.all_chunks,
        "tags": args.tag,
        "since": args.since,
        "before": args.before,
        "explain": args.explain,
    }


def answered(command: Callable[[], int], timeout: float | None) -> int:
    """Run a command that talks to tarsd; the connection's failures said the way tarsctl says
    them, each with its exit code."""
    try:
        return command()
    except DaemonNotRunning as exc:
        print(f"tarsctl: {exc}", file=sys.stderr)
        return EXIT_NOT_RUNNING
    except ProtocolError as exc:
        print(f"tarsctl: {exc}", file=sys.stderr)
        return EXIT_REMOTE
    except TimeoutError:
        print(f"tarsctl: no answer from tarsd within {timeout} s", file=sys.stderr)
        return EXIT_REMOTE
    except KeyboardInterrupt:
        return 130


def print_remote_error(message: str, hint: str) -> None:
    """tarsd's answer to a request it could not carry out (an ``error`` message)."""
    print(f"tarsctl: {shown_text(message)}" + (f"\n  hint: {shown_text(hint)}" if hint else ""), file=sys.stderr)


def utf8(text: str) -> str:
    """Arguments from a terminal that is not UTF-8 arrive with undecodable bytes; the wire
    carries UTF-8, so those bytes become U+FFFD (in a query or a fact they are just noise)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def settle(args: argparse.Namespace) -> str | None:
    """The checks argparse cannot make, and the forms it leaves as typed: text arguments made
    UTF-8, ``--since``/``--before`` read as times. Returns what is wrong (exit EXIT_USAGE), or None."""
    import os

    for name in ("query", "fact", "message", "text"):
        if isinstance(getattr(args, name, None), list):
            setattr(args, name, [utf8(part) for part in getattr(args, name)])
    for path in getattr(args, "paths", None) or []:
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:
            shown = os.fsencode(path).decode("utf-8", "backslashreplace")
            return f"the path {shown} is not valid UTF-8: tars cannot index it; rename the file"
    if args.command == "search":
        if not 1 <= args.limit <= 1000:
            return "--limit must be between 1 and 1000"
        if not " ".join(args.query).strip():
            return "the query is empty: give words to search for"
        try:
            args.since, args.before = (None if when is None else parse_when(when) for when in (args.since, args.before))
        except ValueError as exc:
            return str(exc)
    if args.command == "inbox" and not 1 <= args.limit <= 1000:
        return "-n must be between 1 and 1000"
    if args.command == "remind":
        from tarsctl.routine_times import WHEN_FORMS, split_when, when_problem

        args.when, words = split_when([utf8(args.when), *args.text])
        args.text = " ".join(words).strip()
        problem = when_problem(args.when)
        if problem:
            return f"{problem}: tarsctl remind in 20 min tea"
        if not args.text:
            return f"say what to remind you of after WHEN ({WHEN_FORMS}): tarsctl remind in 20 min tea"
    if args.command == "forget" and not 1 <= args.limit <= 50:
        return "--limit must be between 1 and 50"
    if args.command == "links" and not args.note and not args.unresolved:
        return "give a note (or --unresolved)"
    return None


def _add_setup_commands(commands) -> None:
    """doctor, service, config, mcp, http: they work without the daemon, and their modules load only when used."""
    commands.add_parser("doctor", help="check the setup and say how to fix what is wrong").add_argument("--json", action="store_true")
    service = commands.add_parser("service", help="run tarsd always: a systemd user service or a macOS LaunchAgent")
    actions = service.add_subparsers(dest="service_command", required=True, parser_class=Parser)
    install = actions.add_parser("install", help="write the service file, enable and start it, wait until tarsd answers")
    install.add_argument("--vault", help="the vault folder (default: TARS_VAULT or [vault] path in the config)")
    install.add_argument("--no-start", action="store_true", help="only write the file; print the commands that start it")
    install.add_argument("--print", action="store_true", help="print the service file instead of writing it")
    install.add_argument("--wait", type=float, default=60.0, help="seconds to wait for tarsd to answer (default 60)")
    actions.add_parser("status", help="is the service installed, enabled, answering?")
    actions.add_parser("uninstall", help="stop and disable the service, remove its file")
    logs = actions.add_parser("logs", help="the service's log (journalctl, or the log file on macOS)")
    logs.add_argument("-n", "--lines", type=int, default=50)
    logs.add_argument("-f", "--follow", action="store_true")
    config = commands.add_parser("config", help="where the config file is, and the effective values")
    config_actions = config.add_subparsers(dest="config_command", required=True, parser_class=Parser)
    config_actions.add_parser("path", help="print the config file's path")
    config_actions.add_parser("show", help="every value, and whether it came from a default, the file or the environment").add_argument(
        "--json", action="store_true"
    )
    mcp = commands.add_parser(
        "mcp",
        help="serve tars to AI tools (Claude Code, Claude Desktop, Cursor...) over MCP on stdin/stdout",
        description="An MCP server on stdio that forwards every tool call to tarsd: search, get_note, remember, forget, "
        "recent_sessions, status; resources tars://memory, tars://rules, tars://note/PATH. "
        "--timeout limits each call (default 120 s). `tarsctl mcp token` prints the token for MCP clients that reach "
        "tarsd over HTTP at /mcp: it has an MCP client's rights only, never the user's (docs/security.md).",
    )
    mcp_actions = mcp.add_subparsers(dest="mcp_command", parser_class=Parser)
    mcp_token = mcp_actions.add_parser("token", help="print the MCP clients' bearer token for /mcp (made on first use, kept 0600)")
    mcp_token.add_argument("--rotate", action="store_true", help="replace it with a new one (tarsd takes it at once)")
    http = commands.add_parser("http", help="the HTTP API's token, and the web page's address with it")
    http_actions = http.add_subparsers(dest="http_command", required=True, parser_class=Parser)
    token = http_actions.add_parser("token", help="print the bearer token (made on first use, kept 0600 beside the config file)")
    token.add_argument("--rotate", action="store_true", help="replace it with a new one (tarsd takes it at once)")
    http_actions.add_parser(
        "url",
        help="print the web page's address with the token in its #fragment "
        "(only when tarsd says it listens there: else exit 1, or 3 when tarsd is not running)",
    )


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(h|d|w|m|y)")
_DURATION_SECONDS = {"h": 3600, "d": 86400, "w": 7 * 86400, "m": 30 * 86400, "y": 365 * 86400}


def parse_when(text: str, now: float | None = None) -> float:
    """A point in time for ``since`` / ``before``: an ISO date or date-time ("2026-11-01",
    "2026-11-01T09:30", local time unless it says otherwise), a span back from now ("36h",
    "7d", "2w", "3m", "1y"), "today" or "yesterday". Raises ValueError with what it accepts."""
    from datetime import datetime, timedelta

    now = time.time() if now is None else now
    value = text.strip().lower()
    if value in ("today", "yesterday"):
        midnight = datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0)
        return (midnight - timedelta(days=1 if value == "yesterday" else 0)).timestamp()
    if match := _DURATION.fullmatch(value):
        return now - float(match.group(1)) * _DURATION_SECONDS[match.group(2)]
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise ValueError(
            f"cannot read {text!r} as a time: use a date (2026-11-01), a date and time (2026-11-01T09:30), "
            "a span back from now (36h, 7d, 2w, 3m, 1y), today or yesterday"
        ) from None
