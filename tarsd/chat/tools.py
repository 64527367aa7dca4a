"""Tools the model may call. The model only asks: daemon code runs them, checks their
arguments, and wraps any vault text it returns in tagged data blocks."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tarsctl.protocol import parse_when

from ..memory import MemoryFiles, Remembered, read_text
from ..search import MODES, Searcher
from ..store import Filter
from ..tags import normalise as normalise_tag
from ..vault import is_ignored
from . import prompts
from .conversations import ToolCall

MAX_NOTE_CHARS = 20_000

SPECS = [
    {
        "name": "memory_search",
        "description": "Search the user's notes, memory files and past session logs. Returns the best matching passages.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "what to look for, in natural language or keywords"},
                "limit": {"type": "integer", "description": "how many results (1-20, default 5)"},
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
        "description": "Store a durable fact about the user (kind semantic) or a standing rule for how to work (kind procedural). "
        "A restatement of a stored line is not added twice. A fact close to a stored line but different (another name, number, "
        "date, a negation) comes back as a possible update naming that line: call again with mode 'replace' and replace_line "
        "set to it when the fact changed, or mode 'force' to keep both.",
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
        "description": "Read a note from the vault, whole or a range of lines (1-based, inclusive).",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "path inside the vault, as memory_search returns it"},
                "start_line": {"type": "integer"},
                "end_line": {"type": "integer"},
            },
            "required": ["path"],
        },
    },
]


class ToolError(Exception):
    pass


class Tools:
    def __init__(self, vault: Path, searcher: Searcher, memory: MemoryFiles, reindex: Callable[[str], None]):
        self.vault = vault
        self.searcher = searcher
        self.memory = memory
        self.reindex = reindex

    def run(self, call: ToolCall, conversation: str = "") -> str:
        """The tool's result as text for the model; errors are returned, not raised, so the
        model can correct itself. ``conversation`` goes into the provenance of remembered lines."""
        handler = {"memory_search": self._search, "memory_remember": self._remember, "read_note": self._read}.get(call.name)
        if handler is None:
            return f"error: there is no tool named {call.name!r}"
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        try:
            if call.name == "memory_remember":
                return self._remember(arguments, conversation)
            return handler(arguments)
        except (ToolError, ValueError, TypeError) as exc:
            return f"error: {exc}"

    def _search(self, args: dict) -> str:
        query = str(args.get("query") or "").strip()
        if not query:
            raise ToolError("query is required")
        limit = _int(args.get("limit"), 5, 1, 20)
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
        response = self.searcher.search(query, mode=mode, limit=limit, where=where)
        if not response.results:
            return "no results"
        header = prompts.DATA_PREFACE + "\n"
        return header + prompts.wrap("search-results", prompts.notes_block(response.results), query=query)

    def _remember(self, args: dict, conversation: str = "") -> str:
        result = self.memory.remember(
            str(args.get("fact") or ""),
            str(args.get("kind") or "semantic"),
            str(args.get("section") or ""),
            mode=str(args.get("mode") or ""),
            replace_line=str(args.get("replace_line") or ""),
            conversation=conversation or "chat",
        )
        if result.added:
            self.reindex(result.path)
        return json.dumps(remember_report(result))

    def _read(self, args: dict) -> str:
        rel = str(args.get("path") or "").strip().lstrip("/")
        target = (self.vault / rel).resolve()
        if not rel or not target.is_relative_to(self.vault) or is_ignored(target.relative_to(self.vault).as_posix()):
            raise ToolError(f"{rel!r} is not a note in the vault")
        if not target.is_file():
            raise ToolError(f"no note at {rel!r}")
        lines = read_text(target).splitlines()
        start = _int(args.get("start_line"), 1, 1, max(1, len(lines)))
        end = _int(args.get("end_line"), len(lines), start, max(start, len(lines)))
        text = "\n".join(lines[start - 1 : end])
        truncated = len(text) > MAX_NOTE_CHARS
        text = text[:MAX_NOTE_CHARS]
        note = prompts.block("note", text, path=rel, lines=f"{start}-{end}")
        suffix = f"\n(truncated at {MAX_NOTE_CHARS} characters: ask for a smaller line range)" if truncated else ""
        return prompts.DATA_PREFACE + "\n" + note + suffix


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
    """One line for the user about what a tool changed in their memory ("" when nothing)."""
    if name != "memory_remember" or not output.startswith("{"):
        return ""
    try:
        report = json.loads(output)
    except ValueError:
        return ""
    status, where = report.get("status"), report.get("file", "memory")
    if status == "added":
        return f"remembered in {where}" + (f" under {report['section']}" if report.get("section") else "")
    if status == "replaced":
        return f"replaced in {where}: {report.get('old', '')!r} -> {report.get('new', '')!r}"
    if status == "duplicate":
        return f"already in {where}: {report.get('existing', '')!r}"
    if status == "possible_update":
        return f"not stored yet: close to {report.get('similar', '')!r} in {where} ({report.get('differs', '')})"
    return ""


def _int(value: object, default: int, low: int, high: int) -> int:
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ToolError(f"expected a whole number, got {value!r}") from None
    return min(max(number, low), high)
