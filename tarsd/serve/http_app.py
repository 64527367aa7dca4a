"""The HTTP door's app: a JSON / server-sent-events API and the web page (tarsd/serve/web/, with
its script and style), for browsers and thin clients; its OpenAPI description; and ``Mount``, the
way to serve another ASGI app (MCP) on the same listener. Each endpoint builds the protocol
message the socket would carry (tarsctl/protocol.py) and runs it through the handlers' dispatcher
(tarsd/serve/handlers), so both doors share every handler, bound and error; replies become JSON,
or SSE events when streamed (http_json).

    GET    /                      the web page (tarsd/serve/web/); no data in it, so no token needed
    GET    /search?q=...          search            -> search_results
    POST   /chat                  chat              -> chat_done, or SSE chat_delta / tool_activity / tool_approval / chat_done
    POST   /chat/approvals/{id}   decide_tool_call  -> tool_call_decided ({"approve": true, "always": false})
    GET    /tools                 list_tools        -> tools_reply (the MCP servers tars uses, their tools and policy)
    GET    /conversations         list_conversations -> conversation_list
    GET    /conversations/{id}/messages  conversation_history -> conversation_messages (the last ?limit=50)
    DELETE /conversations/{id}    end_conversation  -> conversation_ended (the session log is written first)
    POST   /remember              remember          -> remembered
    GET    /rules/pending         pending_rules     -> pending_rules_reply (what the model proposed: rules, changes to memory lines)
    POST   /rules/pending/{id}    decide_rule       -> rule_decided ({"approve": true} or false, and "rule": the text shown)
    POST   /index                 index             -> index_done, or SSE progress / index_done
    GET    /status                status            -> status_reply
    GET    /routines              routines          -> routines_reply (?name= one, with its last ?runs=)
    POST   /routines              save_routine      -> routine_saved (a new routine: name, schedule, prompt, deliver, tools, ...)
    PATCH  /routines/{name}       save_routine      -> routine_saved (edit: only the fields given change)
    POST   /routines/{name}/pause|resume  routine_action -> routine_saved
    POST   /routines/{name}/run   routine_action    -> routine_ran (runs it now and waits for what it says)
    DELETE /routines/{name}       routine_action    -> routine_saved (a routine or a reminder, removed)
    POST   /remind                remind            -> routine_saved ({"when": "in 10 min", "text": "...", "to": [...]})
    GET    /inbox                 inbox             -> inbox_reply (what routines and reminders said, newest first)
    POST   /inbox/read            inbox             -> inbox_reply ({"ids": [...]} or {"all": true} are read now)
    GET    /schedule/preview      preview_schedule  -> schedule_preview (?schedule=: can it be used, or why not; its next ?runs=3)
    POST   /memory/review         memory_review     -> memory_review_reply (proposals for Memory.md; {"sessions": false}: no model)
    GET    /memory/proposals      memory_proposals  -> memory_proposals_reply (the memory review's proposals waiting)
    POST   /memory/proposals/decide  decide_memory_proposals -> memory_proposals_decided ({"ids": [...], "approve": true, "seen": [...]})
    POST   /memory/undo           memory_undo       -> memory_undone ({"change_id": 0}: the last change)
    GET    /docs, /openapi.json   the API description
    /mcp                          reserved for MCP over streamable HTTP: see ``Mount`` and ``HttpDoor(mounts=...)``
    /channels/whatsapp            the WhatsApp channel's webhook, when [whatsapp] is enabled (tarsd/channels): signed, no token

Every request passes the guard first (http_middleware): the Host header, the Origin header when
present, then (except for the page, the docs and a mount that authenticates its callers itself)
the bearer token, with failed attempts rate-limited per client address.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import msgspec
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response, StreamingResponse
from starlette.routing import Route

from tarsctl.arguments import parse_when
from tarsctl.protocol import (
    Chat,
    ChatDone,
    ConversationEnded,
    ConversationHistory,
    ConversationList,
    ConversationMessages,
    DecideMemoryProposals,
    DecideRule,
    DecideToolCall,
    EndConversation,
    Error,
    Inbox,
    InboxReply,
    Index,
    IndexDone,
    ListConversations,
    ListTools,
    MemoryProposals,
    MemoryProposalsDecided,
    MemoryProposalsReply,
    MemoryReview,
    MemoryReviewReply,
    MemoryUndo,
    MemoryUndone,
    Message,
    PendingRules,
    PendingRulesReply,
    PreviewSchedule,
    Remember,
    Remembered,
    Remind,
    RoutineAction,
    RoutineRan,
    Routines,
    RoutineSaved,
    RoutinesReply,
    RuleDecided,
    SaveRoutine,
    SchedulePreview,
    Search,
    SearchResults,
    Status,
    StatusReply,
    ToolActivity,
    ToolCallDecided,
    ToolsReply,
)
from tarsd import __version__
from tarsd.serve.http_json import HttpError, as_json, error_response, json_response, protocol_message, read_body, sse_event, wants_stream

# The page, its scripts (modules: app.js imports the others) and its style: served without a token
# (they hold no data), like the API description.
PAGES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript"),
    "/core.js": ("core.js", "text/javascript"),
    "/markdown.js": ("markdown.js", "text/javascript"),
    "/routines.js": ("routines.js", "text/javascript"),
    "/memory.js": ("memory.js", "text/javascript"),
    "/app.css": ("app.css", "text/css"),
}
DOCS = ("/docs", "/docs/oauth2-redirect", "/openapi.json")

SSE_KEEPALIVE_SECONDS = 15.0  # a comment line while a model thinks, so proxies keep the stream open

DEFAULT_CONVERSATION = "web"

Dispatch = Callable[[Message], AsyncIterator[Message]]


@dataclass(slots=True)
class Mount:
    """Another ASGI app served on the listener under ``path``, behind the same guard and token.

    The mounting point for MCP over streamable HTTP (issue 13): build the MCP server's ASGI app
    from its tool table, with ``dispatch`` (given to the factory) as the way to run protocol
    requests, e.g. ``HttpDoor(server, settings, token_file, mounts=[lambda dispatch: Mount("/mcp",
    mcp_app(dispatch), lifespan=session_manager.run)])``. ``lifespan``, when given, is entered
    when the listener starts and left when it stops (an MCP session manager's run()), since the
    listener runs without ASGI lifespan events."""

    path: str
    app: Any  # an ASGI application
    lifespan: Callable[[], contextlib.AbstractAsyncContextManager] | None = None
    # The app checks its callers itself (a messenger's webhook: Meta signs its deliveries and cannot
    # send the bearer token): the guard's Host and Origin checks still apply, the token does not.
    authenticates: bool = False


MountFactory = Callable[[Dispatch], Mount]


async def final_reply(dispatch: Dispatch, request: Message) -> Message:
    """The request's final reply, for a door that does not stream (stream events come before it and
    are not wanted); an Error, never an exception."""
    final: Message | None = None
    async for reply in dispatch(request):  # the dispatcher turns every failure into an Error reply
        final = reply
    if final is None:
        return Error(id=request.id, code="internal", message="tarsd gave no reply", hint="see tarsd's log")
    return final


class _AsgiEndpoint:
    """An ASGI app as a Route's endpoint: Starlette wraps a bare function or method as a request
    handler, and passes any other callable the raw ASGI call."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        await self.app(scope, receive, send)


# ---- request bodies: shapes only; the bounds are the protocol's, checked when the protocol message is built ----


class ChatBody(msgspec.Struct):
    message: str
    conversation_id: str = DEFAULT_CONVERSATION  # any id: the same id carries on the conversation, across restarts too
    provider: str = ""  # ollama | anthropic; empty: the daemon's default
    model: str = ""
    end: bool = False  # write the session log and end the conversation after this answer
    stream: bool = False  # server-sent events (also when the Accept header asks for text/event-stream)
    # Other servers' tools allowed for this message without asking (names as GET /tools shows them).
    # Others that ask first are asked about with a tool_approval event when streaming, else not run.
    allow_tools: list[str] = []


class ApprovalBody(msgspec.Struct):
    approve: bool  # run the call (true) or not (false)
    always: bool = False  # also allow this tool from now on: an allow rule in the rules file (confirm with the user first)


class RememberBody(msgspec.Struct):
    fact: str
    kind: str = "semantic"  # semantic (Memory.md) | procedural (rules)
    section: str = ""  # a heading in Memory.md; empty: tars picks one
    mode: str = ""  # "": refuse a duplicate or a possible update | replace | force
    replace_line: str = ""
    conversation: str = ""  # the chat it came from, for the line's provenance


class DecideBody(msgspec.Struct):
    approve: bool  # true: the proposal is applied as the user's (a rule into the rules file); false: it is dropped
    # The proposal's text as shown to the user: the decision is refused if proposal {id} says anything else.
    rule: str = ""


class IndexBody(msgspec.Struct):
    paths: list[str] = []  # in the vault (relative or absolute); empty: the whole vault
    full: bool = False  # re-read and re-chunk every file
    wait: bool = False  # also wait until every passage has its vector
    stream: bool = False  # progress as server-sent events


class RoutineChangeBody(msgspec.Struct, forbid_unknown_fields=True):
    """A routine's fields; one left out (null) is not given: PATCH leaves it as it is, POST takes the
    default ([routines] deliver, no tools, ...). Unknown fields are refused: a misspelt one would
    otherwise be a change that silently changes nothing."""

    schedule: str | None = None  # "30 7 * * *", "every 2h", "2026-11-27 15:00", in the user's time zone
    prompt: str | None = None
    deliver: list[str] | None = None  # inbox | telegram | whatsapp | note
    tools: list[str] | None = None  # tools a run may use without asking (names as GET /tools shows them)
    quiet: bool | None = None  # speak only when there is something to say
    runs_per_day: int | None = None
    tokens_per_run: int | None = None
    grace_minutes: int | None = None
    note: str | None = None  # the note target: a vault path, {date} for the day's date
    heading: str | None = None


class RoutineBody(RoutineChangeBody, kw_only=True):
    name: str


class RemindBody(msgspec.Struct, forbid_unknown_fields=True):
    when: str  # HH:MM, an ISO date-time, or "in N s|min|h|d"
    text: str
    to: list[str] = []  # empty: [routines] deliver


class InboxReadBody(msgspec.Struct, forbid_unknown_fields=True):
    ids: list[int] = []  # these messages are read now
    all: bool = False  # every message is read now


# ---- the memory review (docs/memory.md#the-memory-review) ----


class MemoryReviewBody(msgspec.Struct, forbid_unknown_fields=True):
    sessions: bool = True  # also the session logs since the last review, read by the model when one answers
    provider: str = ""
    model: str = ""


class MemoryDecideBody(msgspec.Struct, forbid_unknown_fields=True):
    approve: bool  # true: applied as one change (undoable); false: rejected, never proposed again
    ids: list[int] = []  # these proposals
    kind: str = ""  # or every one waiting of this kind: duplicate | supersede | expired | budget | missing
    seen: list[str] = []  # each proposal's text as the page showed it, in the order of ids (the page sends them)


class MemoryUndoBody(msgspec.Struct, forbid_unknown_fields=True):
    change_id: int = 0  # 0: the last change applied


def _memory_review_routes(app: FastAPI, answer: Callable[[Message, type], Awaitable[Response]]) -> None:
    """The memory review's endpoints: each a protocol request, its rights the authority table's."""

    @app.post("/memory/review", tags=["memory"], summary="Review Memory.md: proposals, never changes")
    async def memory_review(request: Request) -> Response:
        body: MemoryReviewBody = await read_body(request, MemoryReviewBody)
        return await answer(
            protocol_message(MemoryReview, sessions=body.sessions, provider=body.provider, model=body.model), MemoryReviewReply
        )

    @app.get("/memory/proposals", tags=["memory"], summary="The memory review's proposals waiting for the user")
    async def memory_proposals() -> Response:
        return await answer(protocol_message(MemoryProposals), MemoryProposalsReply)

    @app.post("/memory/proposals/decide", tags=["memory"], summary="Approve (apply, undoable) or reject memory proposals")
    async def decide_memory_proposals(request: Request) -> Response:
        body: MemoryDecideBody = await read_body(request, MemoryDecideBody)
        message = protocol_message(DecideMemoryProposals, ids=body.ids, kind=body.kind, approve=body.approve, seen=body.seen)
        return await answer(message, MemoryProposalsDecided)

    @app.post("/memory/undo", tags=["memory"], summary="Undo a change the memory review applied (the last by default)")
    async def memory_undo(request: Request) -> Response:
        body: MemoryUndoBody = await read_body(request, MemoryUndoBody)
        return await answer(protocol_message(MemoryUndo, change_id=body.change_id), MemoryUndone)


# Each endpoint and the protocol request it runs (what it may do is the authority table's, asked by the
# dispatcher: tarsctl/authority.py). tests/layout/test_authority.py checks this against the app's routes.
ROUTES: dict[tuple[str, str], type[Message]] = {
    ("GET", "/search"): Search,
    ("POST", "/chat"): Chat,
    ("POST", "/chat/approvals/{approval_id}"): DecideToolCall,
    ("GET", "/tools"): ListTools,
    ("GET", "/conversations"): ListConversations,
    ("GET", "/conversations/{conversation_id}/messages"): ConversationHistory,
    ("DELETE", "/conversations/{conversation_id}"): EndConversation,
    ("POST", "/remember"): Remember,
    ("GET", "/rules/pending"): PendingRules,
    ("POST", "/rules/pending/{rule_id}"): DecideRule,
    ("POST", "/index"): Index,
    ("GET", "/status"): Status,
    ("GET", "/routines"): Routines,
    ("POST", "/routines"): SaveRoutine,
    ("PATCH", "/routines/{name}"): SaveRoutine,
    ("POST", "/routines/{name}/pause"): RoutineAction,
    ("POST", "/routines/{name}/resume"): RoutineAction,
    ("POST", "/routines/{name}/run"): RoutineAction,
    ("DELETE", "/routines/{name}"): RoutineAction,
    ("POST", "/remind"): Remind,
    ("GET", "/inbox"): Inbox,
    ("POST", "/inbox/read"): Inbox,
    ("GET", "/schedule/preview"): PreviewSchedule,
    ("POST", "/memory/review"): MemoryReview,
    ("GET", "/memory/proposals"): MemoryProposals,
    ("POST", "/memory/proposals/decide"): DecideMemoryProposals,
    ("POST", "/memory/undo"): MemoryUndo,
}


def _static(name: str) -> bytes:
    return resources.files("tarsd.serve").joinpath("web", name).read_bytes()


def build_app(dispatch: Dispatch, stopping: asyncio.Future, mounts: Sequence[Mount] = ()) -> FastAPI:
    """The endpoints, each a protocol request run through ``dispatch``; ``stopping`` resolves when tarsd stops."""
    app = FastAPI(
        title="tars",
        version=__version__,
        summary="Search, chat and memory over your Obsidian vault: the HTTP door of tarsd.",
        description="Every endpoint except the page and this description needs `Authorization: Bearer TOKEN` "
        "(`tarsctl http token` prints it). Errors are `{type: error, code, message, hint}`.",
        docs_url="/docs",
        redoc_url=None,
    )
    pages = {path: (_static(name), media) for path, (name, media) in PAGES.items()}

    async def answer(request: Message, expected: type) -> Response:
        reply = await final_reply(dispatch, request)
        return json_response(reply) if isinstance(reply, expected) else error_response(reply)

    async def events(request: Message, keep_going_when_stopping: bool) -> AsyncIterator[bytes]:
        """The replies as SSE events, with keep-alive comments while nothing comes; when tarsd
        stops, a chat still ends with its chat_done (cancelled), anything else with an error event."""
        replies = dispatch(request).__aiter__()
        pending: asyncio.Future | None = None
        yield b": tars\n\n"  # sends the headers now: the client knows it is streaming
        try:
            while True:
                pending = pending or asyncio.ensure_future(replies.__anext__())
                watch = {pending} if keep_going_when_stopping else {pending, stopping}
                done, _ = await asyncio.wait(watch, timeout=SSE_KEEPALIVE_SECONDS, return_when=asyncio.FIRST_COMPLETED)
                if pending in done:
                    try:
                        reply = pending.result()
                    except StopAsyncIteration:
                        return
                    pending = None
                    yield sse_event(reply)
                elif stopping in done:
                    yield sse_event(Error(code="unavailable", message="tarsd is stopping", hint="send it again once tarsd is back"))
                    return
                else:
                    yield b": keep-alive\n\n"
        finally:
            if pending is not None and not pending.done():
                pending.cancel()  # the request's handler is torn down (a chat sets its cancel flag)
                with contextlib.suppress(BaseException):
                    await pending
            with contextlib.suppress(BaseException):
                await replies.aclose()

    def stream(request: Message, keep_going_when_stopping: bool = False) -> StreamingResponse:
        return StreamingResponse(
            events(request, keep_going_when_stopping),
            media_type="text/event-stream",
            headers={"X-Accel-Buffering": "no"},  # nginx: pass each event on at once
        )

    @app.exception_handler(HttpError)
    async def _http_error(_request: Request, exc: HttpError) -> Response:
        return json_response(exc.error, exc.status, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> Response:
        problems = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}" for e in exc.errors())
        return json_response(Error(code="bad_request", message=f"invalid request: {problems}", hint="see /docs"), 400)

    def page_route(body: bytes, media: str) -> Callable[[], Awaitable[Response]]:
        # A closure, not default arguments: FastAPI would read those from the query string.
        async def page() -> Response:
            return Response(body, media_type=media)

        return page

    for path, (body, media) in pages.items():
        app.add_api_route(path, page_route(body, media), methods=["GET"], include_in_schema=False)

    @app.get("/search", tags=["search"], summary="Search the vault (keywords, meaning, or both)")
    async def search(
        q: str,
        mode: str = "hybrid",
        limit: int = 10,
        min_score: float = 0.0,
        type: list[str] = Query([], description="memory types: semantic, procedural, episodic, note (repeatable)"),  # noqa: A002, B008
        path: str = Query("", description="only notes under this path prefix"),
        tag: list[str] = Query([], description="only notes with every one of these tags (repeatable)"),  # noqa: B008
        since: str = Query("", description="modified since: 2026-11-01, 36h, 7d, 2w, today, ..."),
        before: str = Query("", description="modified before (same forms)"),
        all_chunks: bool = False,
        explain: bool = False,
    ) -> Response:
        try:
            since_at = parse_when(since) if since else None
            before_at = parse_when(before) if before else None
        except ValueError as exc:
            raise HttpError(400, "bad_request", str(exc)) from None
        request = protocol_message(
            Search,
            query=q,
            mode=mode,
            limit=limit,
            min_score=min_score,
            types=type,
            path=path,
            all_chunks=all_chunks,
            tags=tag,
            since=since_at,
            before=before_at,
            explain=explain,
        )
        return await answer(request, SearchResults)

    @app.post("/chat", tags=["chat"], summary="Send a message; the reply whole, or streamed as server-sent events")
    async def chat(request: Request) -> Response:
        body: ChatBody = await read_body(request, ChatBody)
        if not body.message.strip():
            raise HttpError(400, "bad_request", "the message is empty", "say something")
        streaming = wants_stream(request, body.stream)
        message = protocol_message(
            Chat,
            conversation=body.conversation_id,
            message=body.message,
            provider=body.provider,
            model=body.model,
            end=body.end,
            approvals=streaming,  # only a stream can show a tool_approval event to someone who answers it
            allow_tools=body.allow_tools,
        )
        if streaming:
            return stream(message, keep_going_when_stopping=True)
        activity: list[ToolActivity] = []
        reply: Message | None = None
        async for reply in dispatch(message):
            if isinstance(reply, ToolActivity):
                activity.append(reply)
        if not isinstance(reply, ChatDone):
            return error_response(reply)
        return json_response({**as_json(reply), "tool_activity": as_json(activity)})

    @app.post("/chat/approvals/{approval_id}", tags=["chat"], summary="Answer a tool_approval event: run the call or not")
    async def decide_tool_call(approval_id: str, request: Request) -> Response:
        body: ApprovalBody = await read_body(request, ApprovalBody)
        message = protocol_message(DecideToolCall, approval=approval_id, approve=body.approve, always=body.always)
        return await answer(message, ToolCallDecided)

    @app.get("/tools", tags=["chat"], summary="The MCP servers whose tools the chat may call: state, tools, policy, recent calls")
    async def tools() -> Response:
        return await answer(protocol_message(ListTools), ToolsReply)

    @app.get("/conversations", tags=["chat"], summary="The conversations kept, most recently active first")
    async def conversations(limit: int = 100, archived: bool = False) -> Response:
        return await answer(protocol_message(ListConversations, limit=limit, archived=archived), ConversationList)

    @app.get("/conversations/{conversation_id}/messages", tags=["chat"], summary="A conversation's messages, oldest first")
    async def conversation_messages(conversation_id: str, limit: int = 50) -> Response:
        request = protocol_message(ConversationHistory, conversation=conversation_id, limit=limit)
        return await answer(request, ConversationMessages)

    @app.delete("/conversations/{conversation_id}", tags=["chat"], summary="End a conversation: its session log is written first")
    async def end_conversation(conversation_id: str, provider: str = "", model: str = "") -> Response:
        request = protocol_message(EndConversation, conversation=conversation_id, provider=provider, model=model)
        return await answer(request, ConversationEnded)

    @app.post("/remember", tags=["memory"], summary="Save a fact in Memory.md (or a rule)")
    async def remember(request: Request) -> Response:
        body: RememberBody = await read_body(request, RememberBody)
        if not body.fact.strip():
            raise HttpError(400, "bad_request", "the fact is empty", "say what to remember")
        message = protocol_message(Remember, **msgspec.structs.asdict(body))
        return await answer(message, Remembered)

    @app.get("/rules/pending", tags=["memory"], summary="Rules the model proposed in chats, waiting for the user's approval")
    async def pending_rules() -> Response:
        return await answer(protocol_message(PendingRules), PendingRulesReply)

    @app.post("/rules/pending/{rule_id}", tags=["memory"], summary="Approve (into the rules file) or reject a proposed rule")
    async def decide_rule(rule_id: int, request: Request) -> Response:
        body: DecideBody = await read_body(request, DecideBody)
        return await answer(protocol_message(DecideRule, rule_id=rule_id, approve=body.approve, rule=body.rule), RuleDecided)

    @app.post("/index", tags=["index"], summary="Index the vault, or some notes, now")
    async def index(request: Request) -> Response:
        body: IndexBody = await read_body(request, IndexBody)
        message = protocol_message(Index, paths=body.paths, full=body.full, wait=body.wait)
        if wants_stream(request, body.stream):
            return stream(message)
        return await answer(message, IndexDone)

    @app.get("/status", tags=["status"], summary="What tarsd is doing: the index, the embedder, memory, this listener")
    async def status(files: bool = False) -> Response:
        return await answer(protocol_message(Status, files=files), StatusReply)

    @app.get("/routines", tags=["routines"], summary="The routines and reminders, each with its next and last run")
    async def routines(name: str = "", runs: int = 0) -> Response:
        return await answer(protocol_message(Routines, name=name, runs=runs), RoutinesReply)

    @app.post("/routines", tags=["routines"], summary="Add a routine: a prompt run on a schedule, its answer delivered")
    async def add_routine(request: Request) -> Response:
        body: RoutineBody = await read_body(request, RoutineBody)
        if not body.name.strip():
            raise HttpError(400, "bad_request", "the routine has no name", 'give it a short name, e.g. "morning-brief"')
        return await answer(protocol_message(SaveRoutine, **msgspec.structs.asdict(body)), RoutineSaved)

    @app.patch("/routines/{name}", tags=["routines"], summary="Change a routine: only the fields given change")
    async def change_routine(name: str, request: Request) -> Response:
        body: RoutineChangeBody = await read_body(request, RoutineChangeBody)
        changes = {field: value for field, value in msgspec.structs.asdict(body).items() if value is not None}
        if not changes:
            fields = ", ".join(RoutineChangeBody.__struct_fields__)
            raise HttpError(400, "bad_request", "nothing to change: the body gives no field", f"give one or more of: {fields}")
        return await answer(protocol_message(SaveRoutine, name=name, edit=True, **changes), RoutineSaved)

    def routine_action(action: str, expected: type) -> Callable[[str], Awaitable[Response]]:
        async def act(name: str) -> Response:
            return await answer(protocol_message(RoutineAction, name=name, action=action), expected)

        return act

    for action, summary in (("pause", "Pause a routine or a reminder: it does not run until resumed"), ("resume", "Resume a paused one")):
        app.add_api_route(
            f"/routines/{{name}}/{action}",
            routine_action(action, RoutineSaved),
            methods=["POST"],
            name=f"{action}_routine",
            tags=["routines"],
            summary=summary,
        )
    app.add_api_route(
        "/routines/{name}/run",
        routine_action("run", RoutineRan),
        methods=["POST"],
        name="run_routine",
        tags=["routines"],
        summary="Run a routine now; the answer comes when the run ends, with what it said",
    )
    app.add_api_route(
        "/routines/{name}",
        routine_action("remove", RoutineSaved),
        methods=["DELETE"],
        name="remove_routine",
        tags=["routines"],
        summary="Remove a routine or a reminder from the routines file",
    )

    @app.post("/remind", tags=["routines"], summary="Set a reminder: a text sent to you at a time, no model run")
    async def remind(request: Request) -> Response:
        body: RemindBody = await read_body(request, RemindBody)
        if not body.text.strip():
            raise HttpError(400, "bad_request", "the reminder has no text", "say what to remind you of")
        if not body.when.strip():
            raise HttpError(400, "bad_request", "the reminder has no time", 'say when: "in 10 min", "18:30" or "2026-11-27 15:00"')
        return await answer(protocol_message(Remind, when=body.when, text=body.text, to=body.to), RoutineSaved)

    @app.get("/inbox", tags=["routines"], summary="What routines and reminders said, newest first, with each delivery's state")
    async def inbox(unread: bool = False, limit: int = 20) -> Response:
        return await answer(protocol_message(Inbox, unread=unread, limit=limit), InboxReply)

    @app.post("/inbox/read", tags=["routines"], summary="Mark inbox messages read: some by id, or all")
    async def inbox_read(request: Request) -> Response:
        body: InboxReadBody = await read_body(request, InboxReadBody)
        if not body.ids and not body.all:
            raise HttpError(400, "bad_request", "no message to mark read", 'send {"ids": [...]} or {"all": true}')
        return await answer(protocol_message(Inbox, mark_read=body.ids, mark_all_read=body.all), InboxReply)

    @app.get("/schedule/preview", tags=["routines"], summary="Check a schedule as a routine would read it, and say its next runs")
    async def preview_schedule(
        schedule: str,
        name: str = Query("", description="the routine being edited: an `every` series counts from its creation"),
        runs: int = Query(3, description="how many of the next runs (1 to 10)"),
    ) -> Response:
        return await answer(protocol_message(PreviewSchedule, schedule=schedule, name=name, runs=runs), SchedulePreview)

    _memory_review_routes(app, answer)

    for mount in mounts:
        # The path itself too, not only what lies under it: MCP clients POST to /mcp, and a
        # redirect to /mcp/ would cost each call a round trip (or fail in a client that does not follow it).
        app.router.routes.append(Route(mount.path, _AsgiEndpoint(mount.app)))
        app.mount(mount.path, mount.app)
    _describe(app)
    return app


def _describe(app: FastAPI) -> None:
    """OpenAPI from the wire types themselves: request bodies and replies as msgspec describes them."""
    bodies = {
        ("/chat", "post"): ChatBody,
        ("/chat/approvals/{approval_id}", "post"): ApprovalBody,
        ("/remember", "post"): RememberBody,
        ("/index", "post"): IndexBody,
        ("/rules/pending/{rule_id}", "post"): DecideBody,
        ("/routines", "post"): RoutineBody,
        ("/routines/{name}", "patch"): RoutineChangeBody,
        ("/remind", "post"): RemindBody,
        ("/inbox/read", "post"): InboxReadBody,
        ("/memory/review", "post"): MemoryReviewBody,
        ("/memory/proposals/decide", "post"): MemoryDecideBody,
        ("/memory/undo", "post"): MemoryUndoBody,
    }
    replies = {
        ("/search", "get"): SearchResults,
        ("/chat", "post"): ChatDone,
        ("/chat/approvals/{approval_id}", "post"): ToolCallDecided,
        ("/tools", "get"): ToolsReply,
        ("/conversations", "get"): ConversationList,
        ("/conversations/{conversation_id}", "delete"): ConversationEnded,
        ("/conversations/{conversation_id}/messages", "get"): ConversationMessages,
        ("/remember", "post"): Remembered,
        ("/rules/pending", "get"): PendingRulesReply,
        ("/rules/pending/{rule_id}", "post"): RuleDecided,
        ("/index", "post"): IndexDone,
        ("/status", "get"): StatusReply,
        ("/routines", "get"): RoutinesReply,
        ("/routines", "post"): RoutineSaved,
        ("/routines/{name}", "patch"): RoutineSaved,
        ("/routines/{name}/pause", "post"): RoutineSaved,
        ("/routines/{name}/resume", "post"): RoutineSaved,
        ("/routines/{name}/run", "post"): RoutineRan,
        ("/routines/{name}", "delete"): RoutineSaved,
        ("/remind", "post"): RoutineSaved,
        ("/inbox", "get"): InboxReply,
        ("/inbox/read", "post"): InboxReply,
        ("/schedule/preview", "get"): SchedulePreview,
        ("/memory/review", "post"): MemoryReviewReply,
        ("/memory/proposals", "get"): MemoryProposalsReply,
        ("/memory/proposals/decide", "post"): MemoryProposalsDecided,
        ("/memory/undo", "post"): MemoryUndone,
    }

    def openapi() -> dict:
        if app.openapi_schema:
            return app.openapi_schema
        spec = get_openapi(title=app.title, version=app.version, summary=app.summary, description=app.description, routes=app.routes)
        types = [*bodies.values(), *replies.values(), Error]
        refs, components = msgspec.json.schema_components(types, ref_template="#/components/schemas/{name}")
        ref = dict(zip(types, refs, strict=True))
        for (path, method), reply in replies.items():
            operation = spec["paths"][path][method]
            operation["responses"] = {
                "200": {"description": reply.__name__, "content": {"application/json": {"schema": ref[reply]}}},
                "default": {"description": "an error", "content": {"application/json": {"schema": ref[Error]}}},
            }
            if (path, method) in bodies:
                body = ref[bodies[path, method]]
                operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
        for streamed in ("/chat", "/index"):
            spec["paths"][streamed]["post"]["responses"]["200"]["content"]["text/event-stream"] = {
                "schema": {"type": "string", "description": "server-sent events named after the message types"}
            }
        spec.setdefault("components", {}).setdefault("schemas", {}).update(components)
        spec["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        spec["security"] = [{"bearer": []}]
        app.openapi_schema = spec
        return spec

    app.openapi = openapi
