"""Calls of other MCP servers' tools within a chat turn: the tools offered this turn, the user's
policy for each call, asking the user when it says so, the call, and its result as data.

Authority: the model only asks. A call runs when the user's policy allows the tool (a rule the
user wrote, or a read-only tool the user left unnamed), when the user allowed it for this
message (``--allow-tools``), or when the user answers yes to this very call in a door they
speak through. Nothing the model reads (a note, a tool result) can answer: answers arrive only
through tarsd/tools/approvals.py, whose ids the model never sees. A call nobody can be asked
about is not run, and the model is told so.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tarsd.chat import prompts
from tarsd.chat.conversations import ToolCall, ToolRecord
from tarsd.config.settings import McpConfig
from tarsd.tools.approvals import Approvals, Request
from tarsd.tools.policy import ALLOW, DENY
from tarsd.tools.servers import CallRecord, OfferedTool, ToolServers, arguments_for_log

MAX_ARGUMENT_CHARS = 100_000  # a call's arguments as JSON; larger ones are refused (a person could not check them)
DONT_RETRY = "Tell the user, and do not call it again unless they ask."

Emit = Callable[[str, object], None]


@dataclass(frozen=True, slots=True)
class Offer:
    """Other servers' tools as offered to the model for one turn."""

    tools: dict[str, OfferedTool]  # by the name the model knows
    specs: list[dict]  # in the providers' neutral spec shape (tarsd/chat/tools.py SPECS)
    note: str  # for the system prompt: how to use them, and which servers cannot be used now


@dataclass(frozen=True, slots=True)
class AskUser:
    """The event a door shows the user: a call waiting for their answer."""

    request: Request
    why: str  # why it asks (the policy's reason)
    timeout_seconds: float
    rules_file: str


@dataclass(frozen=True, slots=True)
class Turn:
    """What the chat turn lets a call do."""

    conversation: str
    can_ask: bool  # a person can answer approval events in this channel
    allowed: frozenset[str]  # tool names the user allowed for this message (--allow-tools)
    emit: Emit
    cancel: threading.Event


class ExternalCalls:
    def __init__(self, servers: ToolServers, approvals: Approvals, settings: McpConfig):
        self.servers = servers
        self.approvals = approvals
        self.settings = settings

    def offer(self) -> Offer:
        tools = self.servers.offered()
        specs = [
            {
                "name": name,
                "description": (f"[{tool.server}] " + (tool.description or tool.title or tool.tool)).strip(),
                "parameters": tool.schema,
            }
            for name, tool in sorted(tools.items())
        ]
        note = "\n".join(filter(None, [prompts.EXTERNAL_TOOLS if tools else "", prompts.unavailable_servers(self.servers.unavailable())]))
        return Offer(tools, specs, note)

    def run(self, call: ToolCall, offer: Offer, turn: Turn) -> tuple[str, ToolRecord | None]:
        """The text the model gets for ``call``, and the record of what came of it (None when the
        name is no tool offered this turn)."""
        tool = offer.tools.get(call.name)
        if tool is None:
            return f"error: there is no tool named {call.name!r}", None
        arguments = call.arguments if isinstance(call.arguments, dict) else None
        if arguments is None:
            return self._done(tool, {}, turn, "refused", "", 0.0, 0, "error: the arguments must be a JSON object")
        size = len(json.dumps(arguments, ensure_ascii=False))
        if size > MAX_ARGUMENT_CHARS:
            why = f"error: not run: its arguments are {size:,} characters, over the {MAX_ARGUMENT_CHARS:,} a call may have"
            return self._done(tool, arguments, turn, "refused", "", 0.0, 0, why)
        policy = self.servers.policy_now(tool.server, tool.tool) or tool.policy  # an "always" given earlier this turn counts
        if policy.action == DENY:
            return self._done(tool, arguments, turn, "refused", "", 0.0, 0, "error: not run: the user does not allow this tool")
        if policy.action == ALLOW:
            approved_by = policy.why
        elif call.name in turn.allowed:
            approved_by = "you, for this message (--allow-tools)"
        elif not turn.can_ask:
            why = (
                f"not run: {call.name} needs the user's approval for each call, and nobody can be asked in this channel. "
                f"The user can run it from tarsctl chat on a terminal or the web page, or allow it for one message with "
                f"`tarsctl chat --allow-tools {call.name}`. {DONT_RETRY}"
            )
            return self._done(tool, arguments, turn, "not_asked", "", 0.0, 0, why)
        else:
            answer_by, refusal = self._ask(tool, arguments, policy.why, turn)
            if refusal is not None:
                outcome, text = refusal
                return self._done(tool, arguments, turn, outcome, "", 0.0, 0, text)
            approved_by = answer_by
        outcome = self.servers.call(tool.server, tool.tool, arguments, turn.cancel)
        if not outcome.ok:
            return self._done(tool, arguments, turn, outcome.status, approved_by, outcome.duration, 0, f"error: {outcome.note}")
        text = prompts.tool_result(tool.server, tool.tool, outcome.text, outcome.is_error)
        return self._done(tool, arguments, turn, "error" if outcome.is_error else "ok", approved_by, outcome.duration, outcome.chars, text)

    def _ask(self, tool: OfferedTool, arguments: dict, why: str, turn: Turn) -> tuple[str, tuple[str, str] | None]:
        """Ask the user; (who approved, None) or ("", (outcome, text for the model))."""
        request = self.approvals.open(tool.server, tool.tool, tool.name, arguments, turn.conversation)
        timeout = self.settings.approval_timeout_seconds
        rules_file = str(self.servers.rules.path) if self.servers.rules is not None else ""
        turn.emit("approval", AskUser(request, why, timeout, rules_file))
        answer = self.approvals.wait(request, timeout, turn.cancel)
        if answer is None:
            if turn.cancel.is_set():
                return "", ("cancelled", "not run: the user stopped the answer before approving this call.")
            return "", ("timed_out", f"not run: the user did not answer within {timeout:g} s, so it was not run. {DONT_RETRY}")
        if not answer.approved:
            return "", ("denied", f"not run: the user declined this call. {DONT_RETRY}")
        if answer.always:
            if problem := self.servers.allow_always(tool.server, tool.tool):
                return f"{answer.by}, this once ({problem})", None
            return f"{answer.by}, and always from now on", None
        return answer.by, None

    def _done(
        self, tool: OfferedTool, arguments: dict, turn: Turn, outcome: str, approved_by: str, duration: float, chars: int, text: str
    ) -> tuple[str, ToolRecord]:
        record = ToolRecord(tool.server, tool.tool, outcome, approved_by, round(duration * 1000, 1), chars)
        self.servers.record(
            CallRecord(
                time.time(),
                turn.conversation,
                tool.server,
                tool.tool,
                arguments_for_log(arguments),
                outcome,
                approved_by,
                record.duration_ms,
                chars,
            )
        )
        return text, record
