"""Tools the model may call. The model only asks: daemon code runs them, checks their
arguments, and wraps any vault text it returns in tagged data blocks."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tarsctl.arguments import parse_when
from tarsctl.authority import Principal, Right, may
from tarsctl.protocol import ToolEffect
from tarsctl.shown import forget_command
from tarsd.chat import prompts
from tarsd.chat.conversations import ToolCall
from tarsd.chat.recall import render
from tarsd.chat.routine_tools import NAMES as ROUTINE_TOOL_NAMES
from tarsd.chat.routine_tools import SPECS as ROUTINE_SPECS
from tarsd.chat.routine_tools import RoutineTools
from tarsd.markdown.tags import normalise as normalise_tag
from tarsd.memory.files import MemoryFiles, Remembered
from tarsd.search.recall import BUDGET_CHARS, recall
from tarsd.search.searcher import MODES, Searcher, SearchError
from tarsd.store.database import Filter
from tarsd.vault.notes import NoteError, read_lines

MAX_NOTE_CHARS = 20_000

SPECS = [
    {
        "name": "memory_search",
        "description": "Search the user's notes, memory files and past session logs. Returns the matching lines (and the "
        "passages of notes), each note with its date, newest first, and says how much it spent.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "what to look for, in natural language or keywords"},
                "limit": {"type": "integer", "description": "from at most this many notes (1-50; default: as many as the budget holds)"},
                "mode": {"type": "string", "enum": list(MODES), "description": "hybrid (default), fts (keywords) or vec (meaning)"},
                "tags": {"type": "array", "items": {"type": "string"}, "description": "only notes with all these tags (a matches a/b)"},
                "since": {"type": "string", "description": "only notes modified since: 2026-11-01, 7d, 2w, yesterday"},
                "before": {"type": "string", "description": "only notes modified before: same forms as since"},
            },
            "required": ["query"],
        },
    },
    {
        "name": "memory_remember",
        "description": "Store a durable fact about the user (kind semantic) or propose a standing rule for how to work "
        "(kind procedural). Facts are kept at once, marked as noted by you during a conversation. A rule only takes effect "
        "once the user approves it. A restatement of a stored line is not added twice. A fact close to a stored line but "
        "different (another name, number, date, a negation) comes back as a possible update naming that line: call again "
        "with mode 'replace' and replace_line set to it when the fact changed, or mode 'force' to keep both.",
        "parameters": {
            "type": "object",
            "properties": {
                "fact": {"type": "string", "description": "one terse line, e.g. 'Dog: Perry (beagle)'"},
                "kind": {"type": "string", "enum": ["semantic", "procedural"]},
                "section": {"type": "string", "description": "optional heading in Memory.md, e.g. Core, Work, Preferences"},
                "mode": {
                    "type": "string",
                    "enum": ["", "replace", "force"],
                    "description": "empty: add unless already there or close to a stored line; replace: replace the line it "
                    "updates (replace_line); force: add beside a similar line",
                },
                "replace_line": {"type": "string", "description": "with mode 'replace': the stored line to replace, exactly as reported"},
            },
            "required": ["fact"],
        },
    },
    {
        "name": "read_note",
        "description": "Read a note from the vault: whole, a range of lines (1-based, inclusive), or the section under a heading.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "path inside the vault, as memory_search returns it"},
                "start_line": {"type": "integer"},
                "end_line": {"type": "integer"},
                "heading": {"type": "string", "description": "read only the section under this heading (instead of a line range)"},
            },
            "required": ["path"],
        },
    },
]


SPECS += ROUTINE_SPECS
OWN_TOOL_NAMES = frozenset(spec["name"] for spec in SPECS)  # never given to another server's tool (tarsd/tools/names.py)


class ToolError(Exception):
    pass


class Tools:
    def __init__(
        self,
        vault: Path,
        searcher: Searcher,
        memory: MemoryFiles,
        reindex: Callable[[str], None],
        max_bytes: int = 10_000_000,
        budget_chars: int = BUDGET_CHARS,
    ):
        self.vault = vault
        self.budget_chars = budget_chars  # memory_search's recall spends what the opening context may ([chat] context_chars)
        self.max_bytes = max_bytes  # notes larger than this are not read (as they are not indexed)
        self.searcher = searcher
        self.memory = memory
        self.reindex = reindex
        self.routines: RoutineTools | None = None  # set once the routines file is open (tarsd/daemon/main.py)

    def run(self, call: ToolCall, conversation: str = "") -> str:
        """The tool's result as text for the model; errors are returned, not raised, so the
        model can correct itself. ``conversation`` goes into the provenance of remembered lines."""
        handler = {"memory_search": self._search, "memory_remember": self._remember, "read_note": self._read}.get(call.name)
        if call.name in ROUTINE_TOOL_NAMES:
            return self._routine_tool(call, conversation)
        if handler is None:
            return f"error: there is no tool named {call.name!r}"
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        try:
            if call.name == "memory_remember":
                return self._remember(arguments, conversation)
            return handler(arguments)
        except (ToolError, ValueError, TypeError) as exc:
            return f"error: {exc}"

    def _routine_tool(self, call: ToolCall, conversation: str) -> str:
        if self.routines is None:
            return "error: routines are not available in this tarsd yet; tell the user to try again in a moment"
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        try:
            if call.name == "remind_user":
                return self.routines.remind(arguments, conversation)
            return self.routines.propose(arguments, conversation)
        except (ValueError, OSError) as exc:  # a schedule, a name or a time refused: the model may correct it
            hint = getattr(exc, "hint", "")
            return f"error: {exc}" + (f" ({hint})" if hint else "")

    def _search(self, args: dict) -> str:
        query = str(args.get("query") or "").strip()
        if not query:
            raise ToolError("query is required")
        limit = _int(args.get("limit"), 0, 1, 50)
        mode = str(args.get("mode") or "hybrid")
        if mode not in MODES:
            raise ToolError(f"mode must be one of {', '.join(MODES)}")
        tags = args.get("tags") or []
        if isinstance(tags, str):
            tags = [tags]
        where = Filter(
            tags=tuple(t for t in (normalise_tag(str(tag)) for tag in tags) if t),
            since_ns=_when(args.get("since")),
            before_ns=_when(args.get("before")),
        )
        # The same recall as the chat's opening context, within the same budget.
        try:
            recalled = recall(self.searcher, query, mode, budget_chars=self.budget_chars, where=where, max_notes=limit)
        except SearchError as exc:
            raise ToolError(str(exc)) from None
        if not recalled.pieces:
            return "no results"
        context = render(self.searcher, recalled, "search-results", query=query)
        return prompts.DATA_PREFACE + "\n" + context.text

    def _remember(self, args: dict, conversation: str = "") -> str:
        result = self.memory.remember(
            str(args.get("fact") or ""),
            str(args.get("kind") or "semantic"),
            str(args.get("section") or ""),
            mode=str(args.get("mode") or ""),
            replace_line=str(args.get("replace_line") or ""),
            conversation=conversation or "chat",
            # The model writes with its own rights (tarsctl/authority.py): stamped by:model, and what it
            # may not do itself (a rule, a change to the user's line) only proposed.
            by_model=not may(Principal.MODEL, Right.REMEMBER_AS_USER),
        )
        if result.added:
            # The memory files re-index soon by themselves; the model may search in its next step,
            # so this write is committed to the index before the tool answers.
            self.reindex(result.path)
        return json.dumps(remember_report(result))

    def _read(self, args: dict) -> str:
        # The read_note request's own code path: the same vault rules, line numbers and bounds.
        try:
            note = read_lines(
                self.vault,
                str(args.get("path") or ""),
                start_line=_line(args.get("start_line")),
                end_line=_line(args.get("end_line")),
                heading=str(args.get("heading") or ""),
                max_chars=MAX_NOTE_CHARS,
                max_bytes=self.max_bytes,
            )
        except NoteError as exc:
            raise ToolError(exc.message + (f" ({exc.hint})" if exc.hint else "")) from None
        block = prompts.block("note", "\n".join(note.lines), path=note.path, lines=f"{note.start_line}-{note.end_line}")
        suffix = ""
        if note.truncated:
            left = f"line {note.end_line} of {note.total_lines}: read on from line {note.end_line + 1}"
            suffix = f"\n(cut at {MAX_NOTE_CHARS} characters, {left})"
        return prompts.DATA_PREFACE + "\n" + block + suffix


def _line(value: object) -> int | None:
    """A line number the model gave: None when left out; below 1 counts as 1."""
    if value is None or value == "":
        return None
    return _int(value, 1, 1, 100_000_000)


def _when(value: object) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(parse_when(str(value)) * 1e9)
    except ValueError as exc:
        raise ToolError(str(exc)) from None


def remember_report(result: Remembered) -> dict:
    """What memory_remember tells the model (the lines are the user's data: the model reads them, never obeys them)."""
    report: dict[str, object] = {"status": result.status, "file": result.path}
    if result.status == "added":
        report["section"] = result.section
        if result.by_model:
            report["line"] = result.line
            report["noted_as"] = "noted by you during a conversation (the user sees it listed and can undo it)"
    elif result.status == "pending" and result.replaced:
        report.update(
            old=result.replaced,
            new=result.line,
            pending_id=result.pending_id,
            note="not changed: the line is the user's own, so replacing it waits for the user's approval (tarsctl rules, "
            "or the web page); tell the user you proposed it",
        )
    elif result.status == "pending":
        report.update(
            rule=result.line,
            pending_id=result.pending_id,
            note="not active: the rule waits for the user's approval (tarsctl rules, or the web page); "
            "tell the user you proposed it, and do not follow it until it is approved",
        )
    elif result.status == "replaced":
        report.update(section=result.section, old=result.replaced, new=result.line)
    elif result.status == "duplicate":
        report["existing"] = result.similar
    else:
        report.update(
            similar=result.similar,
            differs=result.reason,
            next="if the user changed this fact, call memory_remember again with mode 'replace' and replace_line set to the "
            "similar line; if both hold, with mode 'force'; if unsure, ask the user",
        )
    return report


def tool_summary(name: str, output: str) -> str:
    """One line for the user about what a tool changed in their memory or their routines ("" when nothing)."""
    if name in ROUTINE_TOOL_NAMES and output.startswith("{"):
        return routine_summary(output)
    if name != "memory_remember" or not output.startswith("{"):
        return ""
    try:
        report = json.loads(output)
    except ValueError:
        return ""
    status, where = report.get("status"), report.get("file", "memory")
    if status == "added":
        under = f" under {report['section']}" if report.get("section") else ""
        if "line" in report:  # the model's own note: say so, and how to undo it
            # The undo is a command to paste into a shell: quoted for one (never Python's repr).
            return f"the model noted in {where}{under}: {report['line']!r} (undo: {forget_command(report['line'])})"
        return f"remembered in {where}{under}"
    if status == "pending" and "old" in report:
        number = report.get("pending_id", "")
        return (
            f"the model proposed to replace your line in {where}: {report.get('old', '')!r} -> {report.get('new', '')!r}; "
            f"nothing changes until you approve it (tarsctl rules approve {number}, or tarsctl rules reject {number})"
        )
    if status == "pending":
        number = report.get("pending_id", "")
        return (
            f"the model proposed a rule, not active until you approve it: {report.get('rule', '')!r} "
            f"(tarsctl rules approve {number}, or tarsctl rules reject {number})"
        )
    if status == "replaced":
        return f"the model replaced in {where}: {report.get('old', '')!r} -> {report.get('new', '')!r}"
    if status == "duplicate":
        return f"already in {where}: {report.get('existing', '')!r}"
    if status == "possible_update":
        return f"not stored yet: close to {report.get('similar', '')!r} in {where} ({report.get('differs', '')})"
    return ""


def tool_effect(name: str, output: str) -> ToolEffect | None:
    """What a call of tars's own tools did on the model's account, as data for a client to draw with
    its own undo (the messengers do: tarsd/channels/effects.py); None when it changed nothing."""
    if not output.startswith("{") or (name != "memory_remember" and name not in ROUTINE_TOOL_NAMES):
        return None
    try:
        report = json.loads(output)
    except ValueError:
        return None
    if not isinstance(report, dict):
        return None
    status, path = report.get("status"), str(report.get("file", ""))
    if name in ROUTINE_TOOL_NAMES:
        if status == "set":
            to = [str(target) for target in report.get("to", [])] if isinstance(report.get("to"), list) else []
            text, at, reminder = str(report.get("text", "")), str(report.get("at", "")), str(report.get("name", ""))
            return ToolEffect(kind="reminder", text=text, at=at, name=reminder, to=to)
        if status == "pending":
            return ToolEffect(kind="proposed_routine", text=str(report.get("routine", "")), pending_id=_id(report))
        return None
    if status == "added" and "line" in report:
        return ToolEffect(kind="noted", text=str(report["line"]), path=path)
    if status == "replaced":
        return ToolEffect(kind="replaced", text=str(report.get("new", "")), old=str(report.get("old", "")), path=path)
    if status == "pending" and "old" in report:
        text, old = str(report.get("new", "")), str(report.get("old", ""))
        return ToolEffect(kind="proposed_change", text=text, old=old, path=path, pending_id=_id(report))
    if status == "pending":
        return ToolEffect(kind="proposed_rule", text=str(report.get("rule", "")), pending_id=_id(report))
    return None


def _id(report: dict) -> int:
    value = report.get("pending_id")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def routine_summary(output: str) -> str:
    try:
        report = json.loads(output)
    except ValueError:
        return ""
    if report.get("status") == "set":
        to = ", ".join(report.get("to", []))
        return f"the model set a reminder for {report.get('at', '')} ({to}): {report.get('text', '')!r} (undo: {report.get('undo', '')})"
    if report.get("status") == "pending":
        number = report.get("pending_id", "")
        return (
            f"the model proposed the routine {report.get('routine', '')!r}: nothing runs until you approve it "
            f"(tarsctl rules shows it whole; tarsctl rules approve {number}, or tarsctl rules reject {number})"
        )
    return ""


def _int(value: object, default: int, low: int, high: int) -> int:
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ToolError(f"expected a whole number, got {value!r}") from None
    return min(max(number, low), high)
