"""The chat handlers: a streamed chat turn (cancelled by a Cancel frame or a vanished client),
ending a conversation, and the conversations read back (the list, one conversation's messages).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

from tarsctl.authority import refusal
from tarsctl.protocol import (
    Cancel,
    Chat,
    ChatDelta,
    ChatDone,
    ConversationEnded,
    ConversationHistory,
    ConversationInfo,
    ConversationList,
    ConversationMessages,
    DecideToolCall,
    EndConversation,
    ListConversations,
    Message,
    ShownMessage,
    ToolActivity,
    ToolApproval,
    ToolCallDecided,
)
from tarsd.chat.conversations import ConversationStore
from tarsd.chat.external import AskUser
from tarsd.chat.tools import tool_effect, tool_summary
from tarsd.serve.handlers.common import Peer, RequestError
from tarsd.serve.parts import DaemonParts

TOOL_RESULT_PREVIEW = 300
# A conversation read back: each text and the whole reply bounded (a pasted note can be long).
HISTORY_MESSAGE_CHARS = 20_000
HISTORY_CHARS = 200_000


async def stray_cancel(_daemon: DaemonParts, _request: Cancel, _peer: Peer) -> AsyncIterator[Message]:
    return  # arrived after its chat had finished: nothing left to cancel, nothing to answer
    yield


async def end_conversation(daemon: DaemonParts, request: EndConversation, _peer: Peer) -> AsyncIterator[Message]:
    result = await asyncio.to_thread(daemon.assistant.end, request.conversation, request.provider, request.model)
    yield ConversationEnded(id=request.id, session_log=result.session_log, warnings=result.warnings)


async def list_conversations(daemon: DaemonParts, request: ListConversations, _peer: Peer) -> AsyncIterator[Message]:
    found, total = await asyncio.to_thread(daemon.assistant.conversations.overview, request.limit, request.archived)
    conversations = [
        ConversationInfo(
            c.id, c.created_at, c.updated_at, c.messages, c.unlogged, c.compacted, c.title, ConversationStore.is_archived(c.id)
        )
        for c in found
    ]
    yield ConversationList(id=request.id, conversations=conversations, total=total)


async def conversation_history(daemon: DaemonParts, request: ConversationHistory, _peer: Peer) -> AsyncIterator[Message]:
    conversations = daemon.assistant.conversations
    found = await asyncio.to_thread(conversations.history, request.conversation, request.limit, HISTORY_CHARS, HISTORY_MESSAGE_CHARS)
    yield ConversationMessages(
        id=request.id,
        conversation=request.conversation,
        found=found.found,
        messages=[ShownMessage(m.role, m.text, m.tools, m.at, m.cut) for m in found.messages],
        omitted=found.omitted,
        compacted=found.compacted,
        summary=found.summary,
    )


def answered_by(peer: Peer) -> str:
    """Who answered an approval, for the log: the user, through which door."""
    if peer.who:
        return peer.who
    return "you over HTTP (the web page or a client with the token)" if peer.door == "http" else "you in tarsctl chat"


def approval_event(request_id: int, ask: AskUser) -> ToolApproval:
    waiting = ask.request
    return ToolApproval(
        id=request_id,
        approval=waiting.id,
        server=waiting.server,
        tool=waiting.tool,
        name=waiting.name,
        arguments=waiting.arguments,
        why=ask.why,
        timeout_seconds=ask.timeout_seconds,
        rules_file=ask.rules_file,
    )


async def decide_tool_call(daemon: DaemonParts, request: DecideToolCall, peer: Peer) -> AsyncIterator[Message]:
    """An answer to an approval event sent as a request of its own (HTTP, another connection)."""
    decided = daemon.assistant.approvals.decide(request.approval, request.approve, request.always, answered_by(peer))
    if decided is None:
        raise RequestError(
            "not_found",
            f"no tool call waits for an answer under {request.approval!r}",
            "it was answered already, its time ran out (the model was told no), or tarsd restarted since it asked",
        )
    yield ToolCallDecided(
        id=request.id,
        approval=request.approval,
        approved=request.approve,
        always=request.approve and request.always,
        server=decided.server,
        tool=decided.tool,
    )


async def chat(daemon: DaemonParts, request: Chat, peer: Peer) -> AsyncIterator[Message]:
    """Stream a chat turn. A cancel frame, or the client going away, stops the answer."""
    loop = asyncio.get_running_loop()
    cancel = threading.Event()
    events: asyncio.Queue = asyncio.Queue()

    def emit(kind: str, value: object) -> None:
        loop.call_soon_threadsafe(events.put_nowait, (kind, value))

    job = asyncio.ensure_future(
        asyncio.to_thread(
            daemon.assistant.chat,
            request.conversation,
            request.message,
            request.provider,
            request.model,
            emit,
            cancel,
            request.end,
            request.approvals,
            request.allow_tools,
            request.token_budget,
        )
    )
    job.add_done_callback(lambda _: loop.call_soon_threadsafe(events.put_nowait, None))
    getter: asyncio.Future | None = None
    try:
        incoming = peer.read_ahead()
        while True:
            getter = asyncio.ensure_future(events.get())
            waiting = {getter} if incoming is None else {getter, incoming}
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if incoming is not None and incoming in done:
                try:
                    message = incoming.result()
                except Exception:
                    message = None  # a broken frame mid-chat: treat as a disconnect
                if isinstance(message, DecideToolCall):
                    # The user's answer to an approval event, on the chat's own connection: consumed,
                    # and the next frame read ahead again. It bypasses the dispatcher, so it asks the
                    # authority table here (an "always" needs the right to allow a tool).
                    if refusal(peer.principal, message) is None:
                        daemon.assistant.approvals.decide(message.approval, message.approve, message.always, answered_by(peer))
                    peer.pending = None
                    incoming = peer.read_ahead()
                else:
                    if message is None or isinstance(message, Cancel):
                        cancel.set()
                        if message is not None:
                            peer.pending = None  # the cancel is consumed
                    incoming = None
            if getter not in done:
                getter.cancel()
                continue
            event = getter.result()
            if event is None:
                break
            kind, value = event
            if kind == "delta":
                yield ChatDelta(id=request.id, text=value)
            elif kind == "tool_call":
                yield ToolActivity(id=request.id, phase="call", name=value.name, arguments=value.arguments)
            elif kind == "approval":
                yield approval_event(request.id, value)
            else:
                call, output, record = value
                activity = ToolActivity(
                    id=request.id,
                    phase="result",
                    name=call.name,
                    result=output[:TOOL_RESULT_PREVIEW],
                    summary=tool_summary(call.name, output),
                    effect=tool_effect(call.name, output),
                )
                if record is not None:
                    activity.server, activity.tool, activity.outcome = record.server, record.tool, record.outcome
                    activity.approved_by, activity.duration_ms, activity.chars = record.approved_by, record.duration_ms, record.chars
                yield activity
    finally:
        if not job.done():
            cancel.set()  # torn down mid-answer (a closed HTTP stream, a stopping daemon): the thread stops too
        if getter is not None:
            getter.cancel()
    result = job.result()  # raises ProviderError etc. for dispatch to answer
    yield ChatDone(
        id=request.id,
        conversation=result.conversation,
        text=result.text,
        tool_rounds=result.tool_rounds,
        cancelled=result.cancelled,
        session_log=result.session_log,
        warnings=result.warnings,
        tokens=result.tokens,
        context=result.context,
    )
