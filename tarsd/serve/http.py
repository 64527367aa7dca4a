"""The HTTP door: a JSON / server-sent-events API and a web page, for browsers and thin clients.

Loaded only when ``[http] enabled`` is true (main.py imports this module then, and only then:
FastAPI, pydantic and uvicorn never enter a daemon that does not serve HTTP). Each endpoint
builds the protocol message the socket would carry (tarsctl/protocol.py) and runs it through
``Server.dispatch``, the socket's own dispatcher, so both doors share every handler, bound and
error; replies become JSON, or SSE events when streamed.

    GET    /                      the web page (tarsd/serve/web/); no data in it, so no token needed
    GET    /search?q=...          search            -> search_results
    POST   /chat                  chat              -> chat_done, or SSE chat_delta / tool_activity / chat_done
    GET    /conversations         list_conversations -> conversation_list
    GET    /conversations/{id}/messages  conversation_history -> conversation_messages (the last ?limit=50)
    DELETE /conversations/{id}    end_conversation  -> conversation_ended (the session log is written first)
    POST   /remember              remember          -> remembered
    GET    /rules/pending         pending_rules     -> pending_rules_reply (rules the model proposed)
    POST   /rules/pending/{id}    decide_rule       -> rule_decided ({"approve": true} or false)
    POST   /index                 index             -> index_done, or SSE progress / index_done
    GET    /status                status            -> status_reply
    GET    /docs, /openapi.json   the API description
    /mcp                          reserved for MCP over streamable HTTP: see ``Mount`` and ``HttpDoor(mounts=...)``

Every request passes the guard first (tarsd/serve/http_guard.py): the Host header, the Origin header
when present, then (except for the page and the docs) the bearer token, with failed attempts
rate-limited per client address.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import resource
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import h11
import msgspec
import uvicorn
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response, StreamingResponse
from starlette.requests import ClientDisconnect
from starlette.routing import Route
from uvicorn.protocols.http.h11_impl import H11Protocol

from tarsctl.protocol import (
    MAX_REQUEST_BYTES,
    Chat,
    ChatDone,
    ConversationEnded,
    ConversationHistory,
    ConversationList,
    ConversationMessages,
    DecideRule,
    EndConversation,
    Error,
    HttpStatus,
    Index,
    IndexDone,
    ListConversations,
    Message,
    PendingRules,
    PendingRulesReply,
    Remember,
    Remembered,
    RuleDecided,
    Search,
    SearchResults,
    Status,
    StatusReply,
    ToolActivity,
    parse_when,
)
from tarsd import __version__
from tarsd.serve.http_guard import (
    ConnectionGate,
    FailureLimiter,
    HostPolicy,
    bracketed,
    client_key,
    is_loopback,
    page_url,
    retry_after_header,
)
from tarsd.serve.http_token import TokenCheck, TokenError, ensure_token
from tarsd.serve.socket_server import FD_RESERVE, Peer

if TYPE_CHECKING:
    from tarsd.config.settings import HttpConfig
    from tarsd.serve.socket_server import Server

log = logging.getLogger(__name__)

# The page, its script and its style: served without a token (they hold no data), like the API description.
PAGES = {"/": ("index.html", "text/html; charset=utf-8"), "/app.js": ("app.js", "text/javascript"), "/app.css": ("app.css", "text/css")}
DOCS = ("/docs", "/docs/oauth2-redirect", "/openapi.json")
PUBLIC = frozenset(PAGES) | frozenset(DOCS)
# Strict for everything but the docs page (FastAPI's Swagger UI loads its script from a CDN):
# the page's own script only, no inline script, no other site; vault text can never run as code.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]
STATUS_OF_CODE = {
    "bad_request": 400,
    "not_found": 404,
    "forbidden": 403,
    "unavailable": 503,
    "busy": 503,
    "timeout": 504,
    "index_failed": 500,
    "vault_missing": 503,
    "io_error": 500,
    "internal": 500,
    # the chat provider's codes: the model behind tars failed, not this request
    "unreachable": 502,
    "no_api_key": 502,
    "auth": 502,
    "model_missing": 502,
    "rate_limited": 502,
    "stream_broken": 502,
    "provider_error": 502,
}
SSE_KEEPALIVE_SECONDS = 15.0  # a comment line while a model thinks, so proxies keep the stream open
TOKEN_HINT = "send Authorization: Bearer TOKEN; `tarsctl http token` prints it"
# How many connections asyncio accepts at once before any is looked at; the kernel's queue of
# connections not accepted yet.
ACCEPT_BACKLOG = 64
LISTEN_QUEUE = 1024
CROWDED_LOG_SECONDS = 60.0  # at most one log line a minute about connections closed to make room
STOP_GRACE_SECONDS = 2.0  # open requests get this long to finish when tarsd stops; then they are cancelled
CLOSE_TIMEOUT_SECONDS = 3.0
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


MountFactory = Callable[[Dispatch], Mount]


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


class RememberBody(msgspec.Struct):
    fact: str
    kind: str = "semantic"  # semantic (Memory.md) | procedural (rules)
    section: str = ""  # a heading in Memory.md; empty: tars picks one
    mode: str = ""  # "": refuse a duplicate or a possible update | replace | force
    replace_line: str = ""
    conversation: str = ""  # the chat it came from, for the line's provenance


class DecideBody(msgspec.Struct):
    approve: bool  # true: the rule goes into the rules file as the user's; false: it is dropped


class IndexBody(msgspec.Struct):
    paths: list[str] = []  # in the vault (relative or absolute); empty: the whole vault
    full: bool = False  # re-read and re-chunk every file
    wait: bool = False  # also wait until every passage has its vector
    stream: bool = False  # progress as server-sent events


class HttpError(Exception):
    def __init__(self, status: int, code: str, message: str, hint: str = "", headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.error, self.headers = status, Error(code=code, message=message, hint=hint), headers or {}


# ---- JSON and SSE ----


def as_json(value: object) -> object:
    """Builtins with every field, defaults included (msgspec leaves defaults out on the socket);
    a message carries its type, as on the socket."""
    if isinstance(value, msgspec.Struct):
        fields = {name: as_json(getattr(value, name)) for name in value.__struct_fields__}
        tag = value.__struct_config__.tag
        if isinstance(tag, str):
            fields = {"type": tag, **fields}
            fields.pop("id", None)  # the socket's request id means nothing over HTTP
        return fields
    if isinstance(value, dict):
        return {key: as_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json(item) for item in value]
    return value


def json_response(value: object, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(msgspec.json.encode(as_json(value)), status_code=status, media_type="application/json", headers=headers)


def error_response(error: Error, headers: dict[str, str] | None = None) -> Response:
    return json_response(error, STATUS_OF_CODE.get(error.code, 500), headers)


def sse_event(message: Message) -> bytes:
    tag = message.__struct_config__.tag
    return b"event: " + str(tag).encode() + b"\ndata: " + msgspec.json.encode(as_json(message)) + b"\n\n"


def wants_stream(request: Request, asked: bool) -> bool:
    return asked or "text/event-stream" in request.headers.get("accept", "")


async def read_body(request: Request, shape: type) -> Any:
    """The JSON body decoded into ``shape``, at most the socket's request size."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_REQUEST_BYTES:
        raise HttpError(413, "too_large", f"a body of {declared} bytes is over the {MAX_REQUEST_BYTES}-byte limit")
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_REQUEST_BYTES:
                raise HttpError(413, "too_large", f"the body is over the {MAX_REQUEST_BYTES}-byte limit")
    except ClientDisconnect:
        # The client went away, or its body was too slow to arrive and the connection was closed:
        # nobody reads this answer, but it ends the request without a traceback.
        raise HttpError(408, "timeout", "the connection closed before the whole body arrived") from None
    try:
        return msgspec.json.decode(bytes(body) or b"{}", type=shape)
    except msgspec.ValidationError as exc:
        raise HttpError(400, "bad_request", f"invalid body: {exc}", "see /docs for the fields") from exc
    except msgspec.DecodeError as exc:
        raise HttpError(400, "bad_request", f"the body is not JSON: {exc}", "send a JSON object (Content-Type: application/json)") from exc


def protocol_message(message_type: type, /, **fields: object) -> Any:
    """The protocol message the socket would carry, checked against the same bounds (a length,
    a limit, a score) as a frame the socket decodes."""
    try:
        return msgspec.convert(fields, message_type)
    except msgspec.ValidationError as exc:
        raise HttpError(400, "bad_request", f"invalid request: {exc}", "see /docs for the fields and their bounds") from exc


# ---- the guard: Host, Origin, token, rate limit; security headers on every response ----


@dataclass(slots=True)
class Counters:
    requests: int = 0
    auth_failures: int = 0
    rate_limited: int = 0


class Guard:
    """ASGI middleware in front of everything the listener serves, mounts included."""

    def __init__(self, app: Any, policy: HostPolicy, token: TokenCheck, limiter: FailureLimiter, counters: Counters):
        self.app, self.policy, self.token, self.limiter, self.counters = app, policy, token, limiter, counters
        self._logged_failures = 0

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "lifespan":
            return await self.app(scope, receive, send)
        if scope["type"] != "http":  # no websockets here
            return await send({"type": "websocket.close", "code": 1008})
        self.counters.requests += 1
        path = scope.get("path", "")

        async def send_secured(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.extend(SECURITY_HEADERS)
                if not path.startswith("/docs"):
                    headers.append((b"content-security-policy", CSP.encode()))
                message = {**message, "headers": headers}
            await send(message)

        refusal = self.refusal(scope, path)
        if refusal is not None:
            return await refusal(scope, receive, send_secured)
        await self.app(scope, receive, send_secured)

    def refusal(self, scope: dict, path: str) -> Response | None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host", "")
        if not self.policy.host_ok(host):
            return error_response(
                Error(
                    code="forbidden",
                    message=f"this listener does not answer to the host {host!r}",
                    hint="use http://127.0.0.1:PORT/, or add the name to [http] hostnames",
                )
            )
        origin = headers.get("origin")
        if origin is not None and not self.policy.origin_ok(origin):
            return error_response(
                Error(
                    code="forbidden",
                    message=f"requests from the origin {origin!r} are refused",
                    hint="open the page from tarsd itself, or add the origin to [http] origins",
                )
            )
        if path in PUBLIC:
            return None
        address = (scope.get("client") or ("unknown", 0))[0]
        scheme, _, presented = headers.get("authorization", "").partition(" ")
        presented = presented.strip() if scheme.lower() == "bearer" else ""
        if not presented:
            # Not counted as a failure: it guesses nothing, and any web page can make the browser
            # send such a request (an <img> from 127.0.0.1), which would lock the user out.
            return self.unauthorized(scope, path, address, "no token", "a valid bearer token is needed", TOKEN_HINT)
        client = client_key(address)
        wait = self.limiter.retry_after(client)
        if wait > 0:
            self.counters.rate_limited += 1
            return json_response(
                Error(code="rate_limited", message="too many failed attempts from your address", hint="wait, then send the right token"),
                429,
                {"Retry-After": retry_after_header(wait)},
            )
        verdict = self.token.check(presented)
        if verdict:
            return None
        if verdict is None:
            # No token is right while the file cannot be trusted: the user has to fix the file,
            # not find another token (the page keeps the one it has on this answer).
            self.log_refusal(scope, path, address, "the token file cannot be used")
            return error_response(Error(code="unavailable", message=self.token.error, hint="then send the request again"))
        self.limiter.failed(client)
        self.counters.auth_failures += 1
        return self.unauthorized(scope, path, address, "wrong token", "the bearer token is wrong", TOKEN_HINT)

    def unauthorized(self, scope: dict, path: str, address: str, why: str, message: str, hint: str) -> Response:
        self.log_refusal(scope, path, address, why)
        return json_response(Error(code="unauthorized", message=message, hint=hint), 401, {"WWW-Authenticate": "Bearer"})

    def log_refusal(self, scope: dict, path: str, address: str, why: str) -> None:
        if self._logged_failures < 20:  # enough to notice; never a flood in the journal
            self._logged_failures += 1
            log.warning("HTTP: refused %s %s from %s: %s", scope.get("method"), path, address, why)


# ---- the app ----


class _HttpPeer(Peer):
    """The client of one HTTP request. It sends no frames after its request: a chat ends early
    when the stream is closed (the request is cancelled) or when tarsd stops (``stopping``)."""

    def __init__(self, stopping: asyncio.Future):
        self.stopping = stopping

    def read_ahead(self) -> asyncio.Future:
        return self.stopping


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

    async def final(request: Message) -> Message:
        last: Message | None = None
        async for reply in dispatch(request):
            last = reply  # the final reply comes last; stream events before it are not wanted here
        assert last is not None
        return last

    async def answer(request: Message, expected: type) -> Response:
        reply = await final(request)
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
        message = protocol_message(
            Chat, conversation=body.conversation_id, message=body.message, provider=body.provider, model=body.model, end=body.end
        )
        if wants_stream(request, body.stream):
            return stream(message, keep_going_when_stopping=True)
        activity: list[ToolActivity] = []
        reply: Message | None = None
        async for reply in dispatch(message):
            if isinstance(reply, ToolActivity):
                activity.append(reply)
        if not isinstance(reply, ChatDone):
            return error_response(reply)
        return json_response({**as_json(reply), "tool_activity": as_json(activity)})

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
        return await answer(protocol_message(DecideRule, rule_id=rule_id, approve=body.approve), RuleDecided)

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

    for mount in mounts:
        # The path itself too, not only what lies under it: MCP clients POST to /mcp, and a
        # redirect to /mcp/ would cost each call a round trip (or fail in a client that does not follow it).
        app.router.routes.append(Route(mount.path, _AsgiEndpoint(mount.app)))
        app.mount(mount.path, mount.app)
    _describe(app)
    return app


def _describe(app: FastAPI) -> None:
    """OpenAPI from the wire types themselves: request bodies and replies as msgspec describes them."""
    bodies = {"/chat": ChatBody, "/remember": RememberBody, "/index": IndexBody, "/rules/pending/{rule_id}": DecideBody}
    replies = {
        ("/search", "get"): SearchResults,
        ("/chat", "post"): ChatDone,
        ("/conversations", "get"): ConversationList,
        ("/conversations/{conversation_id}", "delete"): ConversationEnded,
        ("/conversations/{conversation_id}/messages", "get"): ConversationMessages,
        ("/remember", "post"): Remembered,
        ("/rules/pending", "get"): PendingRulesReply,
        ("/rules/pending/{rule_id}", "post"): RuleDecided,
        ("/index", "post"): IndexDone,
        ("/status", "get"): StatusReply,
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
            if path in bodies:
                operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": ref[bodies[path]]}}}
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


# ---- the listener, on tarsd's own event loop ----


class _GuardedH11(H11Protocol):
    """uvicorn's HTTP/1.1 connection with the two things it lacks against a neighbour holding the
    door shut (slowloris): a deadline for a request's headers and one for its body (uvicorn has
    only a keep-alive timeout, and every byte received cancels it), and the caps on open
    connections per client and in all (``ConnectionGate``), checked as each connection is accepted,
    before it can cost more than its file descriptor."""

    gate: ConnectionGate  # set on the subclass that HttpDoor.start makes
    header_timeout: float
    body_timeout: float
    warned_at = float("-inf")  # when the caps were last said to be reached, in the log

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = None
        self._reading: object = None  # the h11 state the running deadline is for
        client = client_key(self.client[0] if self.client else "unknown")
        closing = self.gate.admit(self, client)
        for connection in closing:
            connection.transport.close()
        if closing and self.loop.time() - type(self).warned_at > CROWDED_LOG_SECONDS:
            type(self).warned_at = self.loop.time()
            log.warning(
                "HTTP: a new connection from %s found the connections at their cap (%d per client, %d in all): "
                "closing the longest idle to make room (a stuck client, or someone holding the door; said once a minute)",
                client,
                self.gate.per_client,
                self.gate.total,
            )
        if not transport.is_closing():
            self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self.gate.release(self)
        self._unwatch()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    def _watch(self) -> None:
        """After anything that moves the connection on: is a request in progress (not to be closed
        to make room), and is a request being read (under a deadline)?"""
        if self.cycle is None or self.cycle.response_complete:
            self.gate.idle(self)
        else:
            self.gate.busy(self)
        state = self.conn.their_state
        if self.transport.is_closing() or state not in (h11.IDLE, h11.SEND_BODY):
            return self._unwatch()
        if state is h11.IDLE and self.timeout_keep_alive_task is not None:
            return self._unwatch()  # between requests, before any byte of the next: uvicorn's keep-alive timeout
        if state is not self._reading:  # a new phase: the headers (from the first byte), then the body
            self._unwatch()
            self._reading = state
            limit = self.header_timeout if state is h11.IDLE else self.body_timeout
            self._deadline = self.loop.call_later(limit, self._too_slow)

    def _unwatch(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline, self._reading = None, None

    def _too_slow(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            what = "headers" if self._reading is h11.IDLE else "body"
            log.debug("HTTP: closed a connection from %s: its request's %s were too slow to arrive", self.client, what)
            self.transport.close()


def connection_budget(configured: int, socket_connections: int) -> int:
    """HTTP connections open at once: the configured number, less when file descriptors are
    short. The Unix socket's own connections and the daemon's reserve (the database, the
    watcher, the model) come first, so that an HTTP flood never stops tarsctl; so do the
    connections accepted but not yet closed in a flood: asyncio accepts up to the backlog at
    each turn of the loop, and a connection over the cap is closed three turns later."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return configured
    return max(8, min(configured, soft - FD_RESERVE - socket_connections - 4 * ACCEPT_BACKLOG))


class _Uvicorn(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self):
        # tarsd owns SIGTERM and SIGINT (main.py) and stops this server itself.
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        # asyncio listens with the backlog it accepts at once (ACCEPT_BACKLOG, kept small for the
        # file descriptors); the kernel's queue is made longer again, so that in a flood of
        # connections a real one is queued rather than dropped (a dropped SYN waits 1 s or more).
        for sock in sockets or []:
            sock.listen(LISTEN_QUEUE)


def listen(host: str, port: int, backlog: int) -> socket.socket:
    """A listening TCP socket: bound here, so a taken port is a clear error and port 0 gets a real port."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class HttpStartError(Exception):
    """The listener cannot start; the message says why and what to do."""


@dataclass
class HttpDoor:
    """The HTTP listener: started after the socket server, stopped before it (main.py)."""

    server: Server
    settings: HttpConfig
    token_file: Path
    mounts: list[MountFactory] = field(default_factory=list)
    url: str = ""
    counters: Counters = field(default_factory=Counters)

    def __post_init__(self) -> None:
        self._ids = itertools.count(1)
        self._task: asyncio.Task | None = None
        self._uvicorn: _Uvicorn | None = None
        self._stopping: asyncio.Future | None = None
        self._lifespans = contextlib.AsyncExitStack()
        self.gate: ConnectionGate | None = None

    def dispatch(self, request: Message) -> AsyncIterator[Message]:
        assert self._stopping is not None
        request.id = next(self._ids)
        return self.server.dispatch(request, _HttpPeer(self._stopping))

    async def start(self) -> None:
        settings = self.settings
        host = settings.host.strip()
        lan = not is_loopback(host)
        if lan and not settings.lan:
            raise HttpStartError(
                f"[http] host = {host!r} would serve beyond this machine: set [http] lan = true as well to mean it "
                '(and read the README on TLS: a reverse proxy or Tailscale), or use host = "127.0.0.1"'
            )
        try:
            token = TokenCheck(self.token_file)
            if token.error:
                ensure_token(self.token_file)
                token = TokenCheck(self.token_file)
            if token.error:
                raise HttpStartError(token.error)
            limiter = FailureLimiter(settings.auth_failures_burst, settings.auth_failures_per_second)
            total = connection_budget(settings.max_connections, self.server.max_connections)
            self.gate = ConnectionGate(min(settings.max_connections_per_client, total), total)
            if not (settings.header_timeout_seconds > 0 and settings.body_timeout_seconds > 0):
                raise ValueError(
                    "[http] header_timeout_seconds and body_timeout_seconds must be above 0 "
                    f"(got {settings.header_timeout_seconds}, {settings.body_timeout_seconds})"
                )
        except (OSError, ValueError, TokenError) as exc:
            raise HttpStartError(str(exc)) from exc
        try:
            sock = listen(host, settings.port, backlog=ACCEPT_BACKLOG)
        except OSError as exc:
            raise HttpStartError(
                f"cannot listen on {bracketed(host)}:{settings.port}: {exc.strerror or exc}; "
                "set [http] port to a free port (or stop what uses it)"
            ) from exc
        port = sock.getsockname()[1]
        policy = HostPolicy(port, host, settings.hostnames, settings.origins)
        self.url = page_url(host, port)
        loop = asyncio.get_running_loop()
        self._stopping = loop.create_future()
        mounts = [factory(self.dispatch) for factory in self.mounts]
        app = Guard(build_app(self.dispatch, self._stopping, mounts), policy, token, limiter, self.counters)
        protocol = type(
            "GuardedH11",
            (_GuardedH11,),
            {"gate": self.gate, "header_timeout": settings.header_timeout_seconds, "body_timeout": settings.body_timeout_seconds},
        )
        config = uvicorn.Config(
            app,
            lifespan="off",
            http=protocol,
            ws="none",
            log_config=None,  # tarsd's logging; no access log (paths and addresses only; tokens never travel in URLs)
            access_log=False,
            server_header=False,
            backlog=ACCEPT_BACKLOG,
            proxy_headers=False,  # the peer address is the one rate-limited; a local process could forge X-Forwarded-For
            # No limit_concurrency: it answers 503 to every request while as many connections are
            # open, however idle; the gate caps connections instead, closing idle ones to make room.
            timeout_graceful_shutdown=STOP_GRACE_SECONDS,
        )
        try:
            for mount in mounts:
                if mount.lifespan is not None:
                    await self._lifespans.enter_async_context(mount.lifespan())
        except Exception:
            sock.close()
            raise
        logging.getLogger("uvicorn.error").setLevel(logging.WARNING)  # its "started" and "shutting down" lines: tarsd says so
        self._uvicorn = _Uvicorn(config)
        self._task = asyncio.create_task(self._uvicorn.serve(sockets=[sock]), name="http")
        self._task.add_done_callback(_report_end)
        if lan:
            log.warning(
                "the HTTP API listens on %s:%d, beyond this machine, over plain HTTP: the token and your notes cross the "
                "network unencrypted. Put it behind a reverse proxy with TLS, or reach it over Tailscale (README).",
                bracketed(host),
                port,
            )
        log.info("HTTP API and web page on %s (the token: `tarsctl http token`)", self.url)

    async def close(self) -> None:
        """Chats in progress end (cancelled, with their chat_done), other streams get an error event,
        new connections are refused; whatever is still open after a moment is cancelled."""
        if self._stopping is not None and not self._stopping.done():
            self._stopping.set_result(None)
        if self._uvicorn is not None and self._task is not None:
            self._uvicorn.should_exit = True
            try:
                await asyncio.wait_for(asyncio.shield(self._task), CLOSE_TIMEOUT_SECONDS)
            except TimeoutError:
                self._uvicorn.force_exit = True
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await self._task
        with contextlib.suppress(Exception):
            await self._lifespans.aclose()

    def describe(self) -> HttpStatus:
        return HttpStatus(
            enabled=True,
            url=self.url,
            lan=not is_loopback(self.settings.host.strip()),
            requests=self.counters.requests,
            auth_failures=self.counters.auth_failures,
            rate_limited=self.counters.rate_limited,
        )


def _report_end(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the HTTP listener failed: %r", task.exception())
