"""tarsctl: talk to tarsd from the shell, aliases and editor hooks. Every command, through the
full client (client.py, msgpack); `search` and `ping` usually take the quick path (quick.py),
which comes here for what it cannot answer.

Exit codes: 0 success, 1 the daemon answered with an error, 2 usage error,
3 the daemon is not running.
"""

from __future__ import annotations

import os
import signal
import sys

import msgspec

from tarsctl.arguments import EXIT_OK, EXIT_REMOTE, EXIT_USAGE, answered, full_parser, print_remote_error, search_fields, settle
from tarsctl.client import Client, RemoteError
from tarsctl.config_warning import warn_if_changed
from tarsctl.protocol import (
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
)
from tarsctl.search_view import show_pong, show_search
from tarsctl.shown import forget_command, shown_json_line, shown_text


def main(argv: list[str] | None = None) -> int:
    return run(full_parser().parse_args(argv))


def run(args) -> int:
    """A parsed command line (quick.py hands over what it does not answer itself)."""
    if args.command == "completion":
        from tarsctl.completion import BASH_COMPLETION, ZSH_COMPLETION  # the scripts load only for this command

        sys.stdout.write(BASH_COMPLETION if args.shell == "bash" else ZSH_COMPLETION)
        return EXIT_OK
    if args.command in ("doctor", "service", "config", "mcp", "http"):
        return _run_setup_command(args)
    problem = settle(args)
    if problem is not None:
        print(f"tarsctl: {problem}", file=sys.stderr)
        return EXIT_USAGE
    # The setup commands above read the config themselves and say what is wrong.
    warn_if_changed(args.socket)
    return answered(lambda: _with_client(args), args.timeout)


def _with_client(args) -> int:
    try:
        with Client(args.socket, timeout=args.timeout) as client:
            return COMMANDS[args.command](client, args)
    except RemoteError as exc:
        _print_error(exc.error)
        return EXIT_REMOTE


def _run_setup_command(args) -> int:
    if args.command == "doctor":
        from tarsctl.doctor import main as run
    elif args.command == "service":
        from tarsctl.service import main as run
    elif args.command == "mcp" and getattr(args, "mcp_command", None) == "token":
        from tarsctl.http_access import mcp_token as run
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
    print_remote_error(error.message, error.hint)


def _json_line(obj: object) -> str:
    return shown_json_line(msgspec.json.encode(every_field(obj)).decode())


def _emit_json(obj: object, stream=None) -> None:
    (stream or sys.stdout).write(_json_line(obj) + "\n")


def _search(client: Client, args) -> int:
    reply = client.call(Search(id=client.next_id(), **search_fields(args)))
    assert isinstance(reply, SearchResults)
    show_search(reply, reply.coverage or Coverage(), args.json, _json_line)
    return EXIT_OK


def _links(client: Client, args) -> int:
    direction = "unresolved" if getattr(args, "unresolved", False) else "in" if args.command == "backlinks" else "out"
    reply = client.call(Links(id=client.next_id(), note=args.note, direction=direction))
    if args.json:
        for link in reply.links:
            _emit_json(link)
        return EXIT_OK
    if not reply.links:
        what = {"out": f"{reply.note} links to no note", "in": f"no note links to {reply.note}", "unresolved": "every link leads to a note"}
        print(shown_text(what[direction]), file=sys.stderr)
    for link in reply.links:  # every part is a note's text: cleaned before it reaches the terminal
        shown = shown_text(link.target + (f"#{link.heading}" if link.heading else "") or f"#{link.heading}")
        source = shown_text(link.source)
        if direction == "in":
            print(f"{source}:{link.line}  [[{shown}]]" + (f"  ({shown_text(link.label)})" if link.label else ""))
        elif direction == "out":
            print(f"{shown_text(reply.note)}:{link.line}  [[{shown}]] -> {shown_text(link.resolved or 'unresolved: no such note')}")
        else:
            print(f"{source}:{link.line}  [[{shown}]]")
    return EXIT_OK


def _related(client: Client, args) -> int:
    reply = client.call(Related(id=client.next_id(), note=args.note, limit=args.limit))
    if args.json:
        for note in reply.notes:
            _emit_json(note)
        return EXIT_OK
    if not reply.notes:
        # The daemon says why; one from before it did says nothing, and no reason is made up here.
        print(f"nothing related to {shown_text(reply.note)}" + (f": {shown_text(reply.reason)}" if reply.reason else ""), file=sys.stderr)
    for note in reply.notes:
        print(f"{shown_text(note.path)}  {shown_text(note.title)}  [{note.similarity:.2f}]" + ("  (linked)" if note.linked else ""))
    return EXIT_OK


def _index(client: Client, args) -> int:
    paths = [os.path.abspath(p) for p in args.paths]
    tty = sys.stderr.isatty() and not args.json
    final = None
    last_line = ""
    try:
        for reply in client.stream(Index(id=client.next_id(), paths=paths, full=args.full, wait=args.wait)):
            if isinstance(reply, Progress):
                if args.json:
                    _emit_json(reply)
                    continue
                line = _progress_line(reply, args.full)
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
    except KeyboardInterrupt:
        # The job is tarsd's, not this process's: closing the connection only stops the watching.
        if tty and last_line:
            print(file=sys.stderr)
        print("tarsctl: stopped waiting; tarsd goes on indexing in the background (tarsctl status shows how far it is)", file=sys.stderr)
        return 130
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
        print(f"embedder: {shown_text(final.embedder_error)}")
    for path, problem in sorted(final.problems.items()):
        print(f"  {shown_text(path)}: {shown_text(problem)}")
    return EXIT_OK


def _progress_line(reply: Progress, full: bool) -> str:
    """One line of index progress, saying what tarsd is doing."""
    if reply.phase == "queued":
        return shown_text(reply.message)
    if reply.phase == "scan":
        line = f"scan: {reply.done:,}/{reply.total:,} notes"
        if full:
            line += " (--full: re-reading and re-chunking every one)"
    else:
        line = f"{reply.phase}: {reply.done:,}/{reply.total:,}"
    if reply.message:
        line += f" ({shown_text(reply.message)})"
    return line


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
            lines.append(f"             {noted.line!r} in {noted.file} ({noted.noted}); undo: {forget_command(noted.line)}")
    if memory.pending_rules:
        waiting = f"{memory.pending_rules} proposal(s) of the model (rules, changes to your lines) wait for your approval"
        lines.append(f"           {waiting}: tarsctl rules")
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
    from tarsctl.routines_view import status_lines as routine_lines
    from tarsctl.sync_view import status_lines as sync_lines
    from tarsctl.tools_view import status_lines

    lines.extend(status_lines(reply.tool_servers, reply.tool_calls))
    lines.extend(routine_lines(reply.routines))
    lines.extend(sync_lines(reply.sync))
    attention = {state: n for state, n in reply.health.items() if n}
    if attention:
        summary = ", ".join(f"{n} {state.replace('_', ' ')}" for state, n in attention.items())
        lines.append(f"files      {summary}" + ("" if args.files else ": `tarsctl status --files` lists them"))
    # Paths, notes' and the model's lines, tool servers' names and calls, errors from elsewhere:
    # every line is cleaned whole before it reaches the terminal.
    print("\n".join(shown_text(line) for line in lines))
    for warning in reply.warnings:
        print(shown_text(f"warning    {warning}"))
    if args.files:
        for health in reply.files:
            print(shown_text(f"  {health.path}  {health.state.replace('_', ' ')}: {health.reason}"))
    elif reply.problems:
        print("problems")
        for path, kind, reason in reply.problems:
            print(shown_text(f"  {path} ({kind}): {reason}"))
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
    """whatsapp   /channels/whatsapp: 1 allowed sender; 4 received, 4 answered, ... (the warnings say what to fix).

    Any channel's line, from ChannelStatus alone: where its messages come in (a webhook's path, or
    how a channel without one gets them), then its counts; what only some messengers have (a
    signature, a 24-hour window, id changes) is shown when it happened."""
    if channel.error and not channel.received:
        return f"{channel.name:<10} not working: see the warnings below"
    counts = [
        f"{channel.received} received",
        f"{channel.answered} answered",
        f"{channel.duplicates} delivered twice",
        f"{channel.unknown_senders} from senders not allowed",
    ]
    if channel.path or channel.bad_signatures:
        counts.append(f"{channel.bad_signatures} refused for the signature")
    if channel.id_changes:
        counts.append(f"{channel.id_changes} id change{'s' * (channel.id_changes != 1)} waiting for you")
    sends = [f"{channel.sent} sent", f"{channel.retries} retried", f"{channel.send_failures} failed"]
    if channel.window_closed:
        sends.append(f"{channel.window_closed} outside the 24-hour window")
    waiting = f"; {channel.questions_waiting} question(s) wait for your answer" if channel.questions_waiting else ""
    allowed = f"{channel.allowed_senders} allowed sender{'' if channel.allowed_senders == 1 else 's'}"
    where = channel.path or channel.receives or "no webhook"
    return f"{channel.name:<10} {where}: {allowed}; " + ", ".join(counts) + "; " + ", ".join(sends) + waiting


def _last_restart(watcher: dict) -> str:
    if not watcher.get("last_restart_at"):
        return ""
    return f"; last restart {_ago(watcher['last_restart_at'])}: {watcher.get('last_restart_reason') or 'unknown cause'}"


def _ago(timestamp) -> str:
    from tarsctl.sync_view import ago

    return ago(float(timestamp) if timestamp else 0.0)


def _ping(client: Client, args) -> int:
    show_pong(client.call(Ping(id=client.next_id())), args.json, _json_line)
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
        client,
        args.conversation or ("cli" if interactive else "oneshot"),
        args.provider,
        args.model,
        ask=ask,
        allow_tools=allowed,
        explain=args.explain,
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


def _routines(client: Client, args) -> int:
    from tarsctl.routines_view import routines_command

    return routines_command(client, args)


def _remind(client: Client, args) -> int:
    from tarsctl.routines_view import remind_command

    return remind_command(client, args)


def _inbox(client: Client, args) -> int:
    from tarsctl.routines_view import inbox_command

    return inbox_command(client, args)


def _memory(client: Client, args) -> int:
    from tarsctl.memory_view import memory_command

    return memory_command(client, args, ask=input if _interactive() else None)


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
    "routines": _routines,
    "remind": _remind,
    "inbox": _inbox,
    "memory": _memory,
}

if __name__ == "__main__":  # the full client alone; `python -m tarsctl` is the command as installed
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
