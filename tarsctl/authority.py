"""Who may do what: the one authority table, and the one check every door's request passes.

A door knows who is calling from the credential it was reached with, never from what the
request says about itself, and names that caller as a ``Principal``:

- the user at the terminal: the Unix socket (a process of the user's own uid, tarsctl);
- the user's browser: the HTTP listener's token (the web page, a client the user gave it to);
- the user's phone: an allowed sender on a messenger channel (WhatsApp), which is the user speaking;
- an MCP client: an AI tool, through ``tarsctl mcp`` (which says so in its hello) or the MCP
  token on ``/mcp``. It works for a model, so it has a model's rights;
- the model: the chat model through its own tools (tarsd/chat/tools.py);
- data: text from notes, tool results, web pages and other senders. It has no rights at all: it
  reaches a model only inside tagged blocks, and nothing it says is ever a request.

``AUTHORITY`` gives each principal its rights, and ``needed`` the rights each request type
asks for (some depend on a field: a remember as the user's own line, a chat that allows tools
without asking). ``refusal`` is the check: the socket, HTTP and MCP-over-HTTP doors and the
channels all reach the handlers through one dispatcher (tarsd/serve/handlers), which asks it
before a handler runs, and so does the one answer that bypasses the dispatcher (an approval
sent on a chat's own connection). docs/security.md holds the same table, and
tests/layout/test_authority.py checks that both agree and that every request type and HTTP
route has an entry. Standard library and the wire types only: tarsctl and tarsd both import it.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from tarsctl.protocol import (
    ApplyReview,
    Cancel,
    Chat,
    ConversationHistory,
    DecideMemoryProposals,
    DecideRule,
    DecideToolCall,
    EndConversation,
    Feedback,
    Forget,
    Inbox,
    Index,
    Links,
    ListConversations,
    ListTools,
    MemoryProposals,
    MemoryReview,
    MemoryUndo,
    Message,
    PendingRules,
    Ping,
    PreviewSchedule,
    ReadNote,
    Related,
    Remember,
    Remind,
    Review,
    RoutineAction,
    Routines,
    SaveRoutine,
    Search,
    Sessions,
    Status,
    Stop,
)


class Principal(StrEnum):
    TERMINAL = "terminal"  # the user at the terminal: the Unix socket, same uid
    BROWSER = "browser"  # the user's browser, or a client holding the HTTP token
    PHONE = "phone"  # an allowed sender on a messenger channel: the user speaking
    MCP_CLIENT = "mcp_client"  # an AI tool: tarsctl mcp, or the MCP token on /mcp
    MODEL = "model"  # the chat model, through its tools
    ROUTINE = "routine"  # a routine the user wrote, run by tarsd on its schedule (no door carries it)
    DATA = "data"  # text from notes, tool results, web pages, other senders


class Right(StrEnum):
    READ = "read"  # search, read notes, links, session logs, status, the tool list, pending proposals, a schedule's preview
    CONVERSE = "converse"  # chat with the model, read back and end conversations, feedback, ask for a review
    REMEMBER_AS_USER = "remember_as_user"  # write, replace or remove a memory line as the user's own
    PROPOSE = "propose"  # note a line stamped by:model; propose a rule or a change to another's line
    APPROVE_RULE = "approve_rule"  # decide a proposal (a rule, a change to a memory line), apply a review
    APPROVE_TOOL_CALL = "approve_tool_call"  # answer "run it?" for one call
    ALLOW_TOOL = "allow_tool"  # let a tool run without asking: "always", a chat's allow_tools
    CONTROL = "control"  # tarsd itself: index now, stop
    REMIND = "remind"  # set a reminder: a text sent to the user at a time (it can only ever message the user)
    SCHEDULE = "schedule"  # write, change or remove a routine: a prompt run on a schedule, with the tools it lists


_USER = frozenset(Right)

AUTHORITY: dict[Principal, frozenset[Right]] = {
    Principal.TERMINAL: _USER,
    # The HTTP token is the user's own: the page, or a client the user gave it to (never an MCP client).
    Principal.BROWSER: _USER,
    # A phone says what the user says, taps "Run it" on a call shown whole, and nothing that changes
    # tarsd's settings: "always" and rule decisions are made at the terminal or on the page.
    # It may set a reminder, and pause, resume or run the routines the user wrote; writing one is not a phone's.
    Principal.PHONE: frozenset({Right.READ, Right.CONVERSE, Right.REMEMBER_AS_USER, Right.APPROVE_TOOL_CALL, Right.REMIND}),
    # An AI tool works for a model: what it reads may have told it what to do.
    Principal.MCP_CLIENT: frozenset({Right.READ, Right.PROPOSE}),
    # The chat model sets a reminder when the user asks for one (shown with its undo): a reminder only
    # ever messages the user. A routine it may only propose.
    Principal.MODEL: frozenset({Right.READ, Right.PROPOSE, Right.REMIND}),
    # A routine the user wrote: its run converses, uses the tools listed in it without asking (the runner
    # passes exactly those as allow_tools), and relays any other call's question to the user on its
    # channel, where the user's tap decides (approvals: the run cannot answer one itself).
    Principal.ROUTINE: frozenset({Right.READ, Right.CONVERSE, Right.ALLOW_TOOL, Right.APPROVE_TOOL_CALL}),
    Principal.DATA: frozenset(),
}


def _remember(request: Remember) -> frozenset[Right]:
    return frozenset({Right.PROPOSE if request.by_model else Right.REMEMBER_AS_USER})


def _forget(request: Forget) -> frozenset[Right]:
    # Listing the closest lines reads; removing one as the user's wish is the user's. A model's
    # forget of a line it did not note becomes a proposal (tarsd/memory/files.py).
    if not request.confirm_line.strip():
        return frozenset({Right.READ})
    return frozenset({Right.PROPOSE if request.by_model else Right.REMEMBER_AS_USER})


def _chat(request: Chat) -> frozenset[Right]:
    needs = {Right.CONVERSE}
    if request.allow_tools:
        needs.add(Right.ALLOW_TOOL)
    if request.approvals:  # the caller will be asked "run it?" and its answer taken
        needs.add(Right.APPROVE_TOOL_CALL)
    return frozenset(needs)


def _decide_tool_call(request: DecideToolCall) -> frozenset[Right]:
    return frozenset({Right.APPROVE_TOOL_CALL, Right.ALLOW_TOOL} if request.always else {Right.APPROVE_TOOL_CALL})


def _save_routine(request: SaveRoutine) -> frozenset[Right]:
    return frozenset({Right.SCHEDULE, Right.ALLOW_TOOL} if request.tools else {Right.SCHEDULE})


def _routine_action(request: RoutineAction) -> frozenset[Right]:
    # Pausing, resuming or running a routine the user wrote is the user speaking; removing one is
    # writing the routines file (a reminder is removed with the right to set one: its undo).
    if request.action == "remove":
        return frozenset({Right.SCHEDULE}) if not request.name.startswith("remind-") else frozenset({Right.REMIND})
    return frozenset({Right.CONVERSE})


def _inbox(request: Inbox) -> frozenset[Right]:
    return frozenset({Right.READ, Right.CONVERSE} if request.mark_read or request.mark_all_read else {Right.READ})


def _memory_review(request: MemoryReview) -> frozenset[Right]:
    # A review proposes and changes nothing: asking for one is conversing (a routine may). Scheduling
    # one writes the routines file. Deciding its proposals and undoing what they changed is writing
    # the user's memory lines as the user's: the user's, at the terminal, on the page or the phone.
    return frozenset({Right.CONVERSE, Right.SCHEDULE} if request.schedule.strip() else {Right.CONVERSE})


def _always(*rights: Right) -> Callable[[Message], frozenset[Right]]:
    fixed = frozenset(rights)
    return lambda _request: fixed


# Every request type a door can carry, and the rights it needs. A request type missing here is
# refused by every door (and fails tests/layout/test_authority.py).
NEEDS: dict[type[Message], Callable[[Message], frozenset[Right]]] = {
    Ping: _always(),
    Status: _always(Right.READ),
    Search: _always(Right.READ),
    Links: _always(Right.READ),
    Related: _always(Right.READ),
    ReadNote: _always(Right.READ),
    Sessions: _always(Right.READ),
    ListTools: _always(Right.READ),
    PendingRules: _always(Right.READ),
    Chat: _chat,
    Cancel: _always(Right.CONVERSE),
    EndConversation: _always(Right.CONVERSE),
    ListConversations: _always(Right.CONVERSE),
    ConversationHistory: _always(Right.CONVERSE),
    Feedback: _always(Right.CONVERSE),
    Review: _always(Right.CONVERSE),
    Remember: _remember,
    Forget: _forget,
    ApplyReview: _always(Right.APPROVE_RULE),
    DecideRule: _always(Right.APPROVE_RULE),
    DecideToolCall: _decide_tool_call,
    Index: _always(Right.CONTROL),
    Stop: _always(Right.CONTROL),
    Routines: _always(Right.READ),
    SaveRoutine: _save_routine,
    RoutineAction: _routine_action,
    Remind: _always(Right.REMIND),
    Inbox: _inbox,
    PreviewSchedule: _always(Right.READ),  # reads a schedule and says when it would run: saves nothing
    MemoryReview: _memory_review,
    MemoryProposals: _always(Right.READ),
    DecideMemoryProposals: _always(Right.REMEMBER_AS_USER),
    MemoryUndo: _always(Right.REMEMBER_AS_USER),
}

_WHO = {
    Principal.TERMINAL: "the terminal",
    Principal.BROWSER: "the HTTP token",
    Principal.PHONE: "a messenger channel",
    Principal.MCP_CLIENT: "an MCP client",
    Principal.MODEL: "the model",
    Principal.ROUTINE: "a routine",
    Principal.DATA: "text from a note, a tool or another sender",
}
_WHERE = {
    Right.REMEMBER_AS_USER: "a model's or AI tool's lines are stamped by:model (send by_model), and the user decides changes to "
    "the user's own lines: `tarsctl rules`",
    Right.APPROVE_RULE: "the user decides proposals at the terminal (`tarsctl rules`) or on the web page",
    Right.APPROVE_TOOL_CALL: "the user answers tool calls in `tarsctl chat` or on the web page",
    Right.ALLOW_TOOL: "the user allows a tool in `tarsctl chat` (answer always), on the web page, or in the tool rules file",
    Right.CONTROL: "run it at the terminal: tarsctl index, tarsctl stop",
    Right.CONVERSE: "chat from the terminal, the web page or a messenger channel",
    Right.PROPOSE: "",
    Right.REMIND: "set a reminder at the terminal (tarsctl remind), on the web page or with /remind in a messenger",
    Right.SCHEDULE: "write routines at the terminal (tarsctl routines add) or on the web page",
    Right.READ: "",
}


def may(principal: Principal, right: Right) -> bool:
    return right in AUTHORITY[principal]


def needed(request: Message) -> frozenset[Right] | None:
    """The rights ``request`` needs; None for a type the table does not know (refused)."""
    rule = NEEDS.get(type(request))
    return None if rule is None else rule(request)


def refusal(principal: Principal, request: Message) -> tuple[str, str] | None:
    """None when ``principal`` may make ``request``; else (what is refused, what to do instead)."""
    wanted = needed(request)
    name = type(request).__name__
    if wanted is None:
        return f"{name} has no entry in tars's authority table, so no one may send it", "this is a bug in tars: report it"
    missing = sorted(wanted - AUTHORITY[principal], key=lambda right: right.value)
    if not missing:
        return None
    what = ", ".join(right.value for right in missing)
    hint = "; ".join(filter(None, (_WHERE[right] for right in missing))) or "see docs/security.md for who may do what"
    return f"{_WHO[principal]} may not {what} ({name} needs it)", hint
