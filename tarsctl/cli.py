"""tarsctl: talk to tarsd from the shell, aliases and editor hooks.

Exit codes: 0 success, 1 the daemon answered with an error, 2 usage error,
3 the daemon is not running.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

import msgspec

from tarsctl import __version__
from tarsctl.client import Client, DaemonNotRunning, ProtocolError, RemoteError
from tarsctl.protocol import (
    MEMORY_TYPES,
    Coverage,
    Error,
    Index,
    IndexDone,
    Links,
    Ping,
    Progress,
    Related,
    Search,
    SearchResults,
    Status,
    Stop,
    every_field,
    parse_when,
)

EXIT_OK, EXIT_REMOTE, EXIT_USAGE, EXIT_NOT_RUNNING = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 as well; keep its wording short
        self.print_usage(sys.stderr)
        print(f"tarsctl: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tarsctl", description="Search and control the tars daemon.")
    parser.add_argument("--socket", type=Path, help="tarsd's socket (default: $TARS_SOCKET or the per-user runtime dir)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds to wait for an answer (default: no limit)")
    parser.add_argument("--version", action="version", version=f"tarsctl {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

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

    status = commands.add_parser("status", help="show what the daemon is doing")
    status.add_argument("--json", action="store_true", help="every field, as one JSON object")
    status.add_argument("--files", action="store_true", help="list every note that is not indexed, stale, skipped or repaired")
    commands.add_parser("ping", help="check that the daemon answers").add_argument("--json", action="store_true")
    commands.add_parser("stop", help="stop the daemon")
    completion = commands.add_parser("completion", help="print a shell completion script")
    completion.add_argument("shell", choices=("bash", "zsh"))
    _add_setup_commands(commands)
    return parser


def _utf8(text: str) -> str:
    """Arguments from a terminal that is not UTF-8 arrive with undecodable bytes; the wire
    carries UTF-8, so those bytes become U+FFFD (in a query or a fact they are just noise)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _add_setup_commands(commands) -> None:
    """doctor, service, config, mcp, http: they work without the daemon, and their modules load only when used."""
    commands.add_parser("doctor", help="check the setup and say how to fix what is wrong").add_argument("--json", action="store_true")
    service = commands.add_parser("service", help="run tarsd always: a systemd user service or a macOS LaunchAgent")
    actions = service.add_subparsers(dest="service_command", required=True, parser_class=_Parser)
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
    config_actions = config.add_subparsers(dest="config_command", required=True, parser_class=_Parser)
    config_actions.add_parser("path", help="print the config file's path")
    config_actions.add_parser("show", help="every value, and whether it came from a default, the file or the environment").add_argument(
        "--json", action="store_true"
    )
    commands.add_parser(
        "mcp",
        help="serve tars to AI tools (Claude Code, Claude Desktop, Cursor...) over MCP on stdin/stdout",
        description="An MCP server on stdio that forwards every tool call to tarsd: search, get_note, remember, forget, "
        "recent_sessions, status; resources tars://memory, tars://rules, tars://note/PATH. "
        "--timeout limits each call (default 120 s).",
    )
    http = commands.add_parser("http", help="the HTTP API's token, and the web page's address with it")
    http_actions = http.add_subparsers(dest="http_command", required=True, parser_class=_Parser)
    token = http_actions.add_parser("token", help="print the bearer token (made on first use, kept 0600 beside the config file)")
    token.add_argument("--rotate", action="store_true", help="replace it with a new one (tarsd takes it at once)")
    http_actions.add_parser(
        "url", help="print the web page's address with the token in its #fragment (only when tarsd says it listens there; else exit 1)"
    )


def entry() -> None:
    """The tarsctl command. `tarsctl search x | head` stops quietly when the reader goes away,
    as other tools do: set here rather than in main(), which Python code (tests among it) calls
    in-process and whose own writes to a closed pipe must stay an exception, not a silent exit."""
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    for name in ("query", "fact", "message", "text"):
        if isinstance(getattr(args, name, None), list):
            setattr(args, name, [_utf8(part) for part in getattr(args, name)])
    for path in getattr(args, "paths", None) or []:
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:
            shown = os.fsencode(path).decode("utf-8", "backslashreplace")
            print(f"tarsctl: the path {shown} is not valid UTF-8: tars cannot index it; rename the file", file=sys.stderr)
            return EXIT_USAGE
    if args.command == "completion":
        from tarsctl.completion import BASH_COMPLETION, ZSH_COMPLETION  # the scripts load only for this command

        sys.stdout.write(BASH_COMPLETION if args.shell == "bash" else ZSH_COMPLETION)
        return EXIT_OK
    if args.command in ("doctor", "service", "config", "mcp", "http"):
        return _run_setup_command(args)
    if args.command == "search" and not 1 <= args.limit <= 1000:
        print("tarsctl: --limit must be between 1 and 1000", file=sys.stderr)
        return EXIT_USAGE
    if args.command == "forget" and not 1 <= args.limit <= 50:
        print("tarsctl: --limit must be between 1 and 50", file=sys.stderr)
        return EXIT_USAGE
    if args.command == "search" and not " ".join(args.query).strip():
        print("tarsctl: the query is empty: give words to search for", file=sys.stderr)
        return EXIT_USAGE
    if args.command == "search":
        try:
            args.since, args.before = (None if when is None else parse_when(when) for when in (args.since, args.before))
        except ValueError as exc:
            print(f"tarsctl: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if args.command == "links" and not args.note and not args.unresolved:
        print("tarsctl: give a note (or --unresolved)", file=sys.stderr)
        return EXIT_USAGE
    try:
        with Client(args.socket, timeout=args.timeout) as client:
            return COMMANDS[args.command](client, args)
    except DaemonNotRunning as exc:
        print(f"tarsctl: {exc}", file=sys.stderr)
        return EXIT_NOT_RUNNING
    except RemoteError as exc:
        _print_error(exc.error)
        return EXIT_REMOTE
    except ProtocolError as exc:
        print(f"tarsctl: {exc}", file=sys.stderr)
        return EXIT_REMOTE
    except TimeoutError:
        print(f"tarsctl: no answer from tarsd within {args.timeout} s", file=sys.stderr)
        return EXIT_REMOTE
    except KeyboardInterrupt:
        return 130


def _run_setup_command(args) -> int:
    if args.command == "doctor":
        from tarsctl.doctor import main as run
    elif args.command == "service":
        from tarsctl.service import main as run
    elif args.command == "mcp":
        from tarsctl.mcp.server import main as run  # the MCP SDK loads only here: other commands start as fast as before
    elif args.command == "http":
        from tarsctl.http_access import main as run
    else:
        from tarsctl.config_view import main as run
    try:
        return run(args)
    except KeyboardInterrupt:
        return 130


def _print_error(error: Error) -> None:
    print(f"tarsctl: {error.message}" + (f"\n  hint: {error.hint}" if error.hint else ""), file=sys.stderr)


def _emit_json(obj: object, stream=None) -> None:
    (stream or sys.stdout).write(msgspec.json.encode(every_field(obj)).decode() + "\n")


def _bold(snippet: str, tty: bool) -> str:
    parts = snippet.split("**")
    if not tty or len(parts) % 2 == 0:
        return snippet
    return "".join(f"\033[1m{part}\033[0m" if i % 2 else part for i, part in enumerate(parts))


def _search(client: Client, args) -> int:
    request = Search(
        id=client.next_id(),
        query=" ".join(args.query),
        mode=args.mode,
        limit=args.limit,
        min_score=args.min_score,
        types=args.type,
        path=args.path,
        all_chunks=args.all_chunks,
        tags=args.tag,
        since=args.since,
        before=args.before,
        explain=args.explain,
    )
    reply = client.call(request)
    assert isinstance(reply, SearchResults)
    coverage = reply.coverage or Coverage()
    notes = reply.warnings + coverage.incomplete(semantic=reply.mode != "fts")
    if args.json:
        for hit in reply.results:
            _emit_json(hit)
        # Hits alone on stdout; what a script needs to judge them, as one JSON line on stderr.
        _emit_json({"mode": reply.mode, "coverage": coverage, "warnings": notes, "elapsed_ms": reply.elapsed_ms}, sys.stderr)
        return EXIT_OK
    for note in notes:
        print(f"tarsctl: warning: {note}", file=sys.stderr)
    tty = sys.stdout.isatty()
    if not reply.results:
        print("no results", file=sys.stderr)
    for hit in reply.results:
        where = " › ".join(part for part in (hit.title, hit.heading) if part)
        print(f"{hit.path}:{hit.start_line}  {where}  [{hit.band} {hit.score:.2f}]")
        print(f"    {_bold(hit.snippet, tty)}")
        if hit.explain is not None:
            print(f"    why: {_why(hit.explain)}")
    return EXIT_OK


def _why(explain) -> str:
    keyword = "no keyword match"
    if explain.keyword_rank:
        keyword = f"keyword #{explain.keyword_rank} (bm25 {explain.bm25:.2f}, covers {explain.coverage:.0%})"
    vector = f"vector #{explain.vector_rank} (cosine {explain.cosine:.2f})" if explain.vector_rank else "no vector match"
    boosts = [f"{name} +{value:.2f}" for name, value in (("title", explain.title_boost), ("links", explain.link_boost)) if value]
    named = ["the query is its name"] if explain.named else []
    return "; ".join([*named, keyword, vector, *boosts, f"fused {explain.fused:.3f}"])


def _links(client: Client, args) -> int:
    direction = "unresolved" if getattr(args, "unresolved", False) else "in" if args.command == "backlinks" else "out"
    reply = client.call(Links(id=client.next_id(), note=args.note, direction=direction))
    if args.json:
        for link in reply.links:
            _emit_json(link)
        return EXIT_OK
    if not reply.links:
        what = {"out": f"{reply.note} links to no note", "in": f"no note links to {reply.note}", "unresolved": "every link leads to a note"}
        print(what[direction], file=sys.stderr)
    for link in reply.links:
        shown = link.target + (f"#{link.heading}" if link.heading else "") or f"#{link.heading}"
        if direction == "in":
            print(f"{link.source}:{link.line}  [[{shown}]]" + (f"  ({link.label})" if link.label else ""))
        elif direction == "out":
            print(f"{reply.note}:{link.line}  [[{shown}]] -> {link.resolved or 'unresolved: no such note'}")
        else:
            print(f"{link.source}:{link.line}  [[{shown}]]")
    return EXIT_OK


def _related(client: Client, args) -> int:
    reply = client.call(Related(id=client.next_id(), note=args.note, limit=args.limit))
    if args.json:
        for note in reply.notes:
            _emit_json(note)
        return EXIT_OK
    if not reply.notes:
        print(f"nothing related to {reply.note} yet (its passages need vectors: see `tarsctl status`)", file=sys.stderr)
    for note in reply.notes:
        print(f"{note.path}  {note.title}  [{note.similarity:.2f}]" + ("  (linked)" if note.linked else ""))
    return EXIT_OK


def _index(client: Client, args) -> int:
    paths = [os.path.abspath(p) for p in args.paths]
    tty = sys.stderr.isatty() and not args.json
    final = None
    last_line = ""
    for reply in client.stream(Index(id=client.next_id(), paths=paths, full=args.full, wait=args.wait)):
        if isinstance(reply, Progress):
            if args.json:
                _emit_json(reply)
                continue
            line = reply.message if reply.phase == "queued" else f"{reply.phase}: {reply.done:,}/{reply.total:,}"
            if reply.message and reply.phase != "queued":
                line += f" ({reply.message})"
            if tty:
                print(f"\r\033[K{line}", end="", file=sys.stderr, flush=True)
            elif line != last_line:
                print(line, file=sys.stderr, flush=True)  # off a terminal: plain lines, no repeats
            last_line = line
        elif isinstance(reply, Error):
            if tty and last_line:
                print(file=sys.stderr)
            _print_error(reply)
            return EXIT_REMOTE
        else:
            final = reply
    if tty and last_line:
        print(file=sys.stderr)
    assert isinstance(final, IndexDone)
    if args.json:
        _emit_json(final)
        return EXIT_OK
    print(
        f"{final.scanned} file{'s' * (final.scanned != 1)} scanned: {final.indexed} indexed, {final.unchanged} unchanged, "
        f"{final.deleted} deleted, {final.skipped} skipped ({final.seconds:.2f} s)"
    )
    vectors = f"{final.vectors_embedded} embedded, {final.vectors_from_cache} from cache, {final.pending_vectors} pending"
    if final.pending_vectors and not args.wait and not final.embedder_error:
        vectors += " (made in the background: `tarsctl index --wait` waits for them)"
    print(f"{final.chunks} chunk{'s' * (final.chunks != 1)} written; vectors: {vectors}")
    if final.embedder_error:
        print(f"embedder: {final.embedder_error}")
    for path, problem in sorted(final.problems.items()):
        print(f"  {path}: {problem}")
    return EXIT_OK


def _status(client: Client, args) -> int:
    reply = client.call(Status(id=client.next_id(), files=args.files))
    if args.json:
        _emit_json(reply)
        return EXIT_OK
    counts, embedder, watcher, coverage = reply.counts, reply.embedder, reply.watcher, reply.coverage
    state = embedder.state + (f": {embedder.reason}" if embedder.reason else "")
    scan = "done" if coverage.reconciled else f"running ({coverage.scan_done:,} of {coverage.scan_total:,} notes checked)"
    last_error = reply.last_sync.get("error")
    lines = [
        f"vault      {reply.vault}" + (f" MISSING: {reply.vault_error}" if reply.vault_error else ""),
        f"database   {reply.database} ({reply.database_bytes / 1e6:.1f} MB)",
        f"notes      {counts.get('files', 0):,} indexed, {counts.get('skipped', 0):,} skipped, "
        f"{counts.get('conflicts', 0):,} sync conflicts; start-up scan {scan}",
        f"chunks     {counts.get('chunks', 0):,} ({counts.get('vectors', 0):,} with vectors, {counts.get('pending_vectors', 0):,} pending)",
        f"links      {counts.get('links', 0):,}, {counts.get('unresolved_links', 0):,} leading to no note"
        + (": `tarsctl links --unresolved` lists them" if counts.get("unresolved_links") else ""),
        f"embedder   {embedder.kind} {embedder.model}: {state}",
        f"budget     {reply.memory_budget}",
        f"queue      {reply.queue_depth} waiting{', indexing now' if reply.indexing else ''}",
        f"last sync  {_ago(reply.last_sync.get('at'))}" + (f", error: {last_error}" if last_error else ""),
        f"watcher    {'alive' if watcher.get('alive') else 'NOT RUNNING'}, "
        f"{watcher.get('events', 0)} events, {watcher.get('restarts', 0)} restarts, {watcher.get('overflows', 0)} queue overflows"
        + _last_restart(watcher),
        f"uptime     {reply.uptime:.0f} s",
        "versions   " + ", ".join(f"{k} {v}" for k, v in reply.versions.items()),
    ]
    memory = reply.memory
    if memory.mode and not memory.missing:
        size = f"{memory.file} {memory.lines:,} lines, about {memory.tokens:,} tokens"
        budget = f"{memory.budget_lines} lines / {memory.budget_tokens:,} tokens"
        if memory.mode == "selective":
            core = f"the {memory.core_section} section" if memory.core_found else f"no {memory.core_section} section"
            lines.append(f"memory     {size}: selective recall ({core} + the sections relevant to each message; past {budget})")
        else:
            lines.append(f"memory     {size}: whole in every prompt (within {budget})")
        if memory.restored or memory.removed_again:
            lines.append(f"           {memory.restored} line(s) restored after write races since start")
    if memory.missing:
        lines.append(f"memory     {memory.file} does not exist yet: `tarsctl remember` creates it")
    if memory.model_lines_total:
        lines.append(f"           {memory.model_lines_total} line(s) the model noted in chats; newest:")
        for noted in memory.model_lines[:5]:
            lines.append(f"             {noted.line!r} in {noted.file} ({noted.noted}); undo: tarsctl forget {noted.line!r}")
    if memory.pending_rules:
        lines.append(f"           {memory.pending_rules} rule(s) the model proposed wait for your approval: tarsctl rules")
    web = reply.http
    if web.enabled:
        if web.url:
            limited = f", {web.rate_limited} rate-limited" if web.rate_limited else ""
            lan = " (beyond this machine)" if web.lan else ""
            counts = f"{web.requests} requests, {web.auth_failures} refused for the token{limited}"
            lines.append(f"http       {web.url}{lan}: {counts}; `tarsctl http url` opens the page")
        else:
            lines.append(f"http       not listening: {web.error}")
    for channel in reply.channels:
        lines.append(_channel_line(channel))
    from tarsctl.tools_view import status_lines

    lines.extend(status_lines(reply.tool_servers, reply.tool_calls))
    attention = {state: n for state, n in reply.health.items() if n}
    if attention:
        summary = ", ".join(f"{n} {state.replace('_', ' ')}" for state, n in attention.items())
        lines.append(f"files      {summary}" + ("" if args.files else ": `tarsctl status --files` lists them"))
    print("\n".join(lines))
    for warning in reply.warnings:
        print(f"warning    {warning}")
    if args.files:
        for health in reply.files:
            print(f"  {health.path}  {health.state.replace('_', ' ')}: {health.reason}")
    elif reply.problems:
        print("problems")
        for path, kind, reason in reply.problems:
            print(f"  {path} ({kind}): {reason}")
    return EXIT_OK


def _tools(client: Client, args) -> int:
    from tarsctl.protocol import ListTools
    from tarsctl.tools_view import print_tools

    reply = client.call(ListTools(id=client.next_id()))
    if args.json:
        _emit_json(reply)
        return EXIT_OK
    print_tools(reply)
    return EXIT_OK


def _channel_line(channel) -> str:
    """whatsapp   /channels/whatsapp: 1 allowed sender; 4 received, 4 answered, ... (the warnings say what to fix)."""
    if channel.error and not channel.received:
        return f"{channel.name:<10} not working: see the warnings below"
    counts = [
        f"{channel.received} received",
        f"{channel.answered} answered",
        f"{channel.duplicates} delivered twice",
        f"{channel.unknown_senders} from numbers not allowed",
        f"{channel.bad_signatures} refused for the signature",
    ]
    sends = [f"{channel.sent} sent", f"{channel.retries} retried", f"{channel.send_failures} failed"]
    if channel.window_closed:
        sends.append(f"{channel.window_closed} outside the 24-hour window")
    waiting = f"; {channel.questions_waiting} question(s) wait for your answer" if channel.questions_waiting else ""
    allowed = f"{channel.allowed_senders} allowed sender{'' if channel.allowed_senders == 1 else 's'}"
    return f"{channel.name:<10} {channel.path}: {allowed}; " + ", ".join(counts) + "; " + ", ".join(sends) + waiting


def _last_restart(watcher: dict) -> str:
    if not watcher.get("last_restart_at"):
        return ""
    return f"; last restart {_ago(watcher['last_restart_at'])}: {watcher.get('last_restart_reason') or 'unknown cause'}"


def _ago(timestamp) -> str:
    if not timestamp:
        return "never"
    import time

    return f"{time.time() - float(timestamp):.0f} s ago"


def _ping(client: Client, args) -> int:
    reply = client.call(Ping(id=client.next_id()))
    if args.json:
        _emit_json(reply)
    else:
        print(f"pong from {reply.server} (up {reply.uptime:.0f} s)")
    return EXIT_OK


def _stop(client: Client, args) -> int:
    client.call(Stop(id=client.next_id()))
    print("tarsd is stopping")
    return EXIT_OK


def _chat(client: Client, args) -> int:
    interactive = args.repl or (not args.message and sys.stdin.isatty())
    from tarsctl.chat import ChatSession, repl  # the REPL loads only for chat: other commands start faster

    allowed = [name.strip() for names in args.allow_tools for name in names.split(",") if name.strip()]
    # A person answers tool approvals where one can type: the REPL, or a one-shot run on a terminal.
    # Off a terminal nobody can, so a tool that asks first is not run unless --allow-tools names it.
    ask = input if (interactive or sys.stdin.isatty()) and not args.json else None
    session = ChatSession(
        client, args.conversation or ("cli" if interactive else "oneshot"), args.provider, args.model, ask=ask, allow_tools=allowed
    )
    if interactive:
        return repl(session)
    message = " ".join(args.message) if args.message else sys.stdin.read()
    if not message.strip():
        print("tarsctl: nothing to say: give a message or pipe one in", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        session.out = open(os.devnull, "w")  # noqa: SIM115 - the JSON reply is the output
    reply = session.say(message, end=True)
    if isinstance(reply, Error):
        return EXIT_REMOTE
    if args.json:
        _emit_json(reply)
    return EXIT_OK


def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def _remember(client: Client, args) -> int:
    from tarsctl.chat import remember

    mode = "replace" if args.replace else "force" if args.force else ""
    kind = "procedural" if args.procedural else "semantic"
    return remember(client, " ".join(args.fact), kind, args.section, mode=mode, ask=input if _interactive() and not mode else None)


def _forget(client: Client, args) -> int:
    from tarsctl.chat import forget

    kind = "procedural" if args.procedural else "semantic"
    text = " ".join(args.text)
    if not text.strip():
        print("tarsctl: say what to forget: some words of the line", file=sys.stderr)
        return EXIT_USAGE
    return forget(client, text, kind, ask=input if _interactive() else None, yes=args.yes, limit=args.limit)


def _rules(client: Client, args) -> int:
    from tarsctl.chat import rules

    if args.action and (args.rule_id is None or args.rule_id < 1):
        print(f"tarsctl: say which rule to {args.action}: its number, as `tarsctl rules` lists it (#N)", file=sys.stderr)
        return EXIT_USAGE
    return rules(client, args.action or "", args.rule_id or 0, ask=input if _interactive() and not args.action else None)


def _review(client: Client, args) -> int:
    from tarsctl.chat import ChatSession

    ChatSession(client, "cli", "", "").review(input)
    return EXIT_OK


COMMANDS = {
    "search": _search,
    "index": _index,
    "status": _status,
    "ping": _ping,
    "stop": _stop,
    "chat": _chat,
    "remember": _remember,
    "forget": _forget,
    "review": _review,
    "rules": _rules,
    "tools": _tools,
    "links": _links,
    "backlinks": _links,
    "related": _related,
}

if __name__ == "__main__":
    entry()
