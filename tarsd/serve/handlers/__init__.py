"""The request handlers, one per protocol request type, and ``dispatch``: the one way into them
for every door (the Unix socket, HTTP, MCP over HTTP). ``HANDLERS`` is the table of request type
to handler; ``dispatch`` runs one and turns whatever goes wrong into a typed Error reply.

Each reply is built once here from the engine's result; the doors only render it (a frame, JSON,
a server-sent event).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import apsw

from tarsctl.authority import refusal
from tarsctl.protocol import (
    ApplyReview,
    Cancel,
    Chat,
    ConversationHistory,
    DecideMemoryProposals,
    DecideRule,
    DecideToolCall,
    EndConversation,
    Error,
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
from tarsd.chat.providers import ProviderError
from tarsd.index.sync_queue import SyncFailed
from tarsd.serve.handlers import chat, control, memory, routines, search, tools
from tarsd.serve.handlers.common import Handler, Peer, RequestError
from tarsd.serve.parts import DaemonParts
from tarsd.store.errors import explain
from tarsd.vault.files import OutsideVault
from tarsd.vault.root import VaultMissing

log = logging.getLogger(__name__)

HANDLERS: dict[type, Handler] = {
    Ping: control.ping,
    Status: control.status,
    Stop: control.stop,
    Index: control.index,
    Search: search.search,
    Links: search.links,
    Related: search.related,
    ReadNote: search.read_note,
    Sessions: search.session_logs,
    Chat: chat.chat,
    Cancel: chat.stray_cancel,
    EndConversation: chat.end_conversation,
    ListConversations: chat.list_conversations,
    ConversationHistory: chat.conversation_history,
    DecideToolCall: chat.decide_tool_call,
    ListTools: tools.list_tools,
    Remember: memory.remember,
    Forget: memory.forget,
    Feedback: memory.feedback,
    Review: memory.review,
    ApplyReview: memory.apply_review,
    PendingRules: memory.pending_rules,
    DecideRule: memory.decide_rule,
    Routines: routines.routines,
    SaveRoutine: routines.save_routine,
    RoutineAction: routines.routine_action,
    Remind: routines.remind,
    Inbox: routines.inbox,
    PreviewSchedule: routines.preview_schedule,
    MemoryReview: memory.memory_review,
    MemoryProposals: memory.memory_proposals,
    DecideMemoryProposals: memory.decide_memory_proposals,
    MemoryUndo: memory.memory_undo,
}


async def dispatch(daemon: DaemonParts, request: Message, peer: Peer) -> AsyncIterator[Message]:
    """A request's replies: stream events, then one final reply (an Error for anything that
    went wrong). The one way into the handlers, for the socket and the HTTP door alike."""
    request_id = getattr(request, "id", 0)
    handler = HANDLERS.get(type(request))
    try:
        if handler is None:
            yield Error(id=request_id, code="bad_request", message=f"{type(request).__name__.lower()} is not a request here")
            return
        refused = refusal(peer.principal, request)
        if refused is not None:  # the one place every door's request is held against the authority table
            log.info("refused %s from %s: %s", type(request).__name__, peer.principal.value, refused[0])
            yield Error(id=request_id, code="forbidden", message=refused[0], hint=refused[1])
            return
        async for reply in handler(daemon, request, peer):
            yield reply
    except RequestError as exc:
        exc.error.id = request_id
        yield exc.error
    except ProviderError as exc:
        yield Error(id=request_id, code=exc.code, message=exc.message, hint=exc.hint)
    except SyncFailed as exc:
        yield Error(id=request_id, code="index_failed", message=str(exc), hint="`tarsctl status` shows the state; tars retries on its own")
    except OutsideVault as exc:
        yield Error(id=request_id, code="bad_request", message=str(exc), hint=exc.hint)
    except VaultMissing as exc:
        yield Error(id=request_id, code="vault_missing", message=str(exc), hint=exc.hint)
    except (apsw.FullError, apsw.ReadOnlyError, apsw.BusyError, apsw.LockedError, apsw.CantOpenError) as exc:
        # The index database (conversations, proposals) cannot be written: what that means and what to do.
        message = explain(exc, daemon.engine.store.path).removesuffix("; tars retries on its own")  # a request is not retried
        log.warning("request %s failed: %s", type(request).__name__, message)
        yield Error(id=request_id, code="io_error", message=message, hint="nothing was half written: try again once it is fixed")
    except OSError as exc:  # a full disk, a read-only vault, a file locked by another program
        message = f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc)
        log.warning("request %s failed: %s", type(request).__name__, message)
        hint = "check the free space and the permissions there, then try again; nothing was half written"
        yield Error(id=request_id, code="io_error", message=message, hint=hint)
    except ValueError as exc:  # a memory text refused says what to do in its hint (tarsd/memory/text.py)
        yield Error(id=request_id, code="bad_request", message=str(exc), hint=getattr(exc, "hint", ""))
    except Exception as exc:
        log.exception("request %s failed", type(request).__name__)
        yield Error(id=request_id, code="internal", message=f"{type(exc).__name__}: {exc}", hint="see the tarsd log for details")
    finally:
        daemon.queue.answered()  # what the request freed goes back to the system once tarsd is quiet
