"""The tarsctl command, and its quick path: `search`, `ping` and `--version` answered without
loading msgspec or the message types.

A search from the shell is mostly Python starting up: msgspec's import and the protocol's
seventy message types cost more than the search itself (docs/benchmarks.md). These commands
speak the same frames with JSON bodies instead (the daemon answers a JSON hello in JSON, every
field present: tarsd/serve/codecs.py), parse their arguments with the same definitions
(arguments.py) and print through the same view (search_view.py), so what they print is what
the full client prints. Everything else, and anything the quick path cannot read (an older
tarsd that answers in msgpack, say), goes to the full client in cli.py.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from types import SimpleNamespace

from tarsctl import __version__
from tarsctl.arguments import (
    EXIT_OK,
    EXIT_REMOTE,
    EXIT_USAGE,
    Parser,
    add_ping,
    add_search,
    answered,
    print_remote_error,
    search_fields,
    settle,
    top_parser,
)
from tarsctl.config_warning import warn_if_changed
from tarsctl.search_view import show_pong, show_search
from tarsctl.shown import shown_json_line
from tarsctl.transport import PROTOCOL_VERSION, DaemonNotRunning, FrameSocket, ProtocolError

QUICK_COMMANDS = ("search", "ping")
# tarsctl's own options that take a value: the word after them is not the command.
_VALUED_OPTIONS = ("--socket", "--timeout")


class NotQuick(Exception):
    """This command line, or this answer, is the full client's to handle."""


class _FixedWidthFormatter(argparse.HelpFormatter):
    """argparse makes a formatter for every argument added (to check its metavar), and the
    default one asks the terminal its width, importing shutil to do so: 1.8 ms of a 30 ms search.
    The quick parser never shows help (--help goes to the full client), so any width will do."""

    def __init__(self, prog: str):
        super().__init__(prog, width=80)


class _QuickParser(Parser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, formatter_class=_FixedWidthFormatter, **kwargs)

    def error(self, message: str) -> None:
        raise NotQuick(message)  # the full parser says it, with the usage of every command


def entry() -> None:
    """The tarsctl command. `tarsctl search x | head` stops quietly when the reader goes away,
    as other tools do: set here rather than in main(), which Python code (tests among it) calls
    in-process and whose own writes to a closed pipe must stay an exception, not a silent exit."""
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--version"]:
        print(f"tarsctl {__version__}")
        return EXIT_OK
    if _command_word(argv) in QUICK_COMMANDS and not {"-h", "--help"} & set(argv):
        try:
            return _answer(_quick_parser().parse_args(argv))
        except NotQuick:
            pass
    from tarsctl.cli import main as full_main

    return full_main(argv)


def _command_word(argv: list[str]) -> str | None:
    """The command a command line names, read the way argparse reads it; None when unsure."""
    words = iter(argv)
    for word in words:
        if word in _VALUED_OPTIONS:
            next(words, None)
        elif word.startswith("--socket=") or word.startswith("--timeout="):
            continue
        elif word.startswith("-"):
            return None  # --help, --version with others, or an abbreviation: the full parser's
        else:
            return word
    return None


def _quick_parser() -> Parser:
    parser, commands = top_parser(_QuickParser)
    add_search(commands)
    add_ping(commands)
    return parser


def _answer(args) -> int:
    problem = settle(args)
    if problem is not None:
        print(f"tarsctl: {problem}", file=sys.stderr)
        return EXIT_USAGE
    warn_if_changed(args.socket)
    request = {"type": "search", "id": 1, **search_fields(args)} if args.command == "search" else {"type": "ping", "id": 1}
    return answered(lambda: _show(_call(FrameSocket(args.socket, args.timeout), request), args), args.timeout)


def _show(reply: SimpleNamespace, args) -> int:
    if reply.type == "error":
        print_remote_error(reply.message, reply.hint)
        return EXIT_REMOTE
    if args.command == "search":
        if reply.coverage is None:
            raise NotQuick("a search reply without coverage: the full client fills in the defaults")
        show_search(reply, reply.coverage, args.json, _json_line)
    else:
        show_pong(reply, args.json, _json_line)
    return EXIT_OK


def _call(frames: FrameSocket, request: dict) -> SimpleNamespace:
    """Send the hello and the request; return the final reply (an error is one too)."""
    frames.open()
    try:
        try:
            frames.send(_encode({"type": "hello", "protocol": PROTOCOL_VERSION, "client": f"tarsctl/{__version__}", "capabilities": []}))
        except DaemonNotRunning:
            pass  # closed at once: a refusal ("busy") may be waiting to be read
        welcome = _decode(frames.receive())
        if welcome.type == "error":
            return welcome
        if welcome.type != "welcome":
            raise ProtocolError(f"expected a welcome from tarsd, got {welcome.type}")
        frames.send(_encode(request))
        while True:
            reply = _decode(frames.receive())
            if getattr(reply, "id", None) == request["id"] and reply.type != "progress" or reply.type == "error":
                return reply
    finally:
        frames.close()


def _encode(message: dict) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()


def _decode(body: bytes) -> SimpleNamespace:
    if body[:1] != b"{":
        # Not JSON: a tarsd from before JSON bodies, or a refusal sent before the hello was read.
        raise NotQuick("the daemon answered in msgpack")
    try:
        return json.loads(body, object_hook=lambda fields: SimpleNamespace(**fields))
    except ValueError as exc:
        raise ProtocolError(f"unreadable reply from tarsd: {exc}; is tarsctl the same version as tarsd?") from exc


def _json_line(obj: object) -> str:
    # The same compact form msgspec writes in the full client, as safe to print.
    return shown_json_line(json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=vars))
