"""Conversations keyed by a client-chosen id, persisted in the index database so a daemon
restart loses nothing. Messages are stored in a neutral shape (user, assistant with tool
calls, tool results) and converted to each provider's own format when sent."""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field

import msgspec

from tarsd.store.database import Store


class ToolCall(msgspec.Struct):
    id: str
    name: str
    arguments: dict = {}


class ToolRecord(msgspec.Struct, omit_defaults=True):
    """A tool result's story, for the session log: another MCP server's tool, and what came of it."""

    server: str
    tool: str  # as the server names it
    outcome: str  # ok | error | failed | unavailable | denied | timed_out | not_asked | cancelled | refused
    approved_by: str = ""
    duration_ms: float = 0.0
    chars: int = 0


class ChatMessage(msgspec.Struct, omit_defaults=True):
    role: str  # user | assistant | tool
    content: str = ""
    tool_calls: list[ToolCall] = []  # assistant: what it asked to run
    tool_call_id: str = ""  # tool: which call this answers
    tool_name: str = ""
    at: float = 0.0
    record: ToolRecord | None = None  # tool: a call of another server's tool (tars's own leave it out)


# What a call that never got its result is answered with when the conversation is sent again:
# tarsd stopped (or was killed) during the call or while the user was asked. Nothing ran for it
# after that: an approval does not outlive the daemon.
UNANSWERED = "not run: tarsd stopped before this call finished or was approved; nothing more happened for it"


def with_every_call_answered(messages: list[ChatMessage]) -> list[ChatMessage]:
    """``messages`` with a result for every tool call that has none, after the results that follow
    the call (the providers refuse a history where a call has no result)."""
    out: list[ChatMessage] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        out.append(message)
        index += 1
        if message.role != "assistant" or not message.tool_calls:
            continue
        answered = set()
        while index < len(messages) and messages[index].role == "tool":
            answered.add(messages[index].tool_call_id)
            out.append(messages[index])
            index += 1
        out.extend(
            ChatMessage(role="tool", content=UNANSWERED, tool_call_id=call.id, tool_name=call.name)
            for call in message.tool_calls
            if call.id not in answered
        )
    return out


@dataclass(slots=True)
class Conversation:
    id: str
    summary: str = ""
    context: str = ""
    logged_seq: int = 0
    created_at: float = 0.0
    updated_at: float = 0.0
    # (seq, message) of messages not yet compacted, oldest first
    messages: list[tuple[int, ChatMessage]] = field(default_factory=list)

    @property
    def chars(self) -> int:
        return sum(len(m.content) + sum(len(str(c.arguments)) for c in m.tool_calls) for _, m in self.messages)

    def unlogged(self) -> list[tuple[int, ChatMessage]]:
        return [(seq, m) for seq, m in self.messages if seq > self.logged_seq]


@dataclass(slots=True, frozen=True)
class ConversationSummary:
    id: str
    created_at: float
    updated_at: float
    messages: int  # user and assistant messages with text (not a bare tool call), compacted ones included
    unlogged: int
    compacted: int
    title: str  # the start of the first user message


@dataclass(slots=True, frozen=True)
class ReadBack:
    """A message as a person reads it back: what the user said, or the assistant's answer with
    one short line per tool call it made on the way."""

    role: str  # user | assistant
    text: str
    tools: list[str]
    at: float
    cut: int = 0  # characters of the text left out for length


@dataclass(slots=True, frozen=True)
class History:
    found: bool
    messages: list[ReadBack]  # oldest first
    omitted: int  # earlier messages (not compacted) left out by the bounds
    compacted: int  # earlier messages the summary stands in for
    summary: str


TITLE_CHARS = 80
TOOL_LINE_CHARS = 120
ARCHIVED = "@archived-"
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(ChatMessage).decode


class ConversationStore:
    """The conversation tables (schema version 2 in store.py), on a connection of their own:
    a message is committed on its own, never inside an indexing batch that might roll back."""

    def __init__(self, store: Store):
        self.store = store
        self.conn = store.writer_connection()
        self.lock = threading.RLock()

    def load(self, conversation_id: str) -> Conversation:
        with self.lock, self.conn:
            now = time.time()
            self.conn.execute(
                "INSERT OR IGNORE INTO conversations(id, created_at, updated_at) VALUES (?, ?, ?)", (conversation_id, now, now)
            )
            row = self.conn.execute(
                "SELECT summary, context, logged_seq, created_at, updated_at FROM conversations WHERE id = ?", (conversation_id,)
            ).fetchall()[0]
            messages = [
                (seq, _decode(body))
                for seq, body in self.conn.execute(
                    "SELECT seq, body FROM messages WHERE conversation_id = ? AND compacted = 0 ORDER BY seq", (conversation_id,)
                )
            ]
        return Conversation(conversation_id, row[0], row[1], row[2], row[3], row[4], messages)

    def append(self, conversation: Conversation, message: ChatMessage) -> int:
        """Persist a message at once (a user's message is never lost to a failing provider)."""
        message.at = message.at or time.time()
        with self.lock, self.conn:
            # The write comes first: it waits for the write lock. A read first would pin a snapshot,
            # and a commit by the indexer before the write makes SQLite refuse it at once (BUSY).
            self.conn.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (message.at, conversation.id))
            seq = self.conn.execute(
                "SELECT coalesce(max(seq), 0) + 1 FROM messages WHERE conversation_id = ?", (conversation.id,)
            ).fetchall()[0][0]
            self.conn.execute("INSERT INTO messages(conversation_id, seq, body) VALUES (?, ?, ?)", (conversation.id, seq, _encode(message)))
        conversation.messages.append((seq, message))
        conversation.updated_at = message.at
        return seq

    def set_context(self, conversation: Conversation, context: str) -> None:
        with self.lock, self.conn:
            self.conn.execute("UPDATE conversations SET context = ? WHERE id = ?", (context, conversation.id))
        conversation.context = context

    def compact(self, conversation: Conversation, upto_seq: int, summary: str) -> None:
        """Replace messages up to ``upto_seq`` by the summary."""
        with self.lock, self.conn:
            self.conn.execute("UPDATE messages SET compacted = 1 WHERE conversation_id = ? AND seq <= ?", (conversation.id, upto_seq))
            self.conn.execute("UPDATE conversations SET summary = ? WHERE id = ?", (summary, conversation.id))
        conversation.summary = summary
        conversation.messages = [(seq, m) for seq, m in conversation.messages if seq > upto_seq]

    def mark_logged(self, conversation: Conversation, upto_seq: int) -> None:
        with self.lock, self.conn:
            self.conn.execute("UPDATE conversations SET logged_seq = max(logged_seq, ?) WHERE id = ?", (upto_seq, conversation.id))
        conversation.logged_seq = max(conversation.logged_seq, upto_seq)

    def delete(self, conversation_id: str) -> None:
        """End a conversation: the next message under this id starts afresh."""
        with self.lock, self.conn:
            self.conn.execute("DELETE FROM messages WHERE conversation_id = ?", (conversation_id,))
            self.conn.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))

    def archive(self, conversation_id: str) -> str:
        """Set a conversation aside under a new id (its log is still owed) so the id starts afresh."""
        # Unique even for two ends in one second (a provider down, /new twice).
        archived = f"{conversation_id}{ARCHIVED}{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
        with self.lock, self.conn:
            self.conn.execute(
                """INSERT INTO conversations(id, created_at, updated_at, summary, context, logged_seq)
                   SELECT ?, created_at, updated_at, summary, context, logged_seq FROM conversations WHERE id = ?""",
                (archived, conversation_id),
            )
            self.conn.execute("UPDATE messages SET conversation_id = ? WHERE conversation_id = ?", (archived, conversation_id))
            self.conn.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
        return archived

    @staticmethod
    def is_archived(conversation_id: str) -> bool:
        return ARCHIVED in conversation_id

    def overview(self, limit: int, archived: bool = False) -> tuple[list[ConversationSummary], int]:
        """Conversations with messages, most recently active first: (up to ``limit`` of them, how many in all)."""
        # body is a BLOB, which json_extract would read as JSONB: read it as the JSON text it is.
        role = "json_extract(CAST(m.body AS TEXT), '$.role')"
        said = f"({role} IN ('user', 'assistant') AND coalesce(json_extract(CAST(m.body AS TEXT), '$.content'), '') != '')"
        with self.lock:
            rows = self.conn.execute(
                f"""SELECT c.id, c.created_at, c.updated_at,
                       sum({said}),
                       sum({said} AND m.seq > c.logged_seq),
                       sum({said} AND m.compacted),
                       (SELECT json_extract(CAST(f.body AS TEXT), '$.content') FROM messages f
                        WHERE f.conversation_id = c.id AND json_extract(CAST(f.body AS TEXT), '$.role') = 'user' ORDER BY f.seq LIMIT 1)
                   FROM conversations c JOIN messages m ON m.conversation_id = c.id
                   GROUP BY c.id ORDER BY c.updated_at DESC, c.id"""
            ).fetchall()
        found = [
            ConversationSummary(
                cid, created, updated, total or 0, unlogged or 0, compacted or 0, " ".join((title or "").split())[:TITLE_CHARS]
            )
            for cid, created, updated, total, unlogged, compacted, title in rows
            if archived or not self.is_archived(cid)
        ]
        return found[:limit], len(found)

    def history(self, conversation_id: str, limit: int, max_chars: int, max_message_chars: int) -> History:
        """The conversation as its reader saw it: the last ``limit`` messages, newest kept first
        within ``max_chars`` in all (each text cut at ``max_message_chars``); compacted messages
        are stood in for by the running summary. Reads only: an unknown id is not created."""
        with self.lock:
            row = self.conn.execute("SELECT summary FROM conversations WHERE id = ?", (conversation_id,)).fetchall()
            if not row:
                return History(False, [], 0, 0, "")
            rows = self.conn.execute(
                "SELECT body, compacted FROM messages WHERE conversation_id = ? ORDER BY seq", (conversation_id,)
            ).fetchall()
        compacted = 0
        shown: list[ReadBack] = []
        tools: list[str] = []  # tool calls waiting for the answer they lead to
        at = 0.0
        for body, was_compacted in rows:
            message = _decode(body)
            if was_compacted:
                compacted += message.role in ("user", "assistant") and bool(message.content)
                continue
            at = message.at
            if message.role == "assistant":
                tools += [_tool_line(call) for call in message.tool_calls]
            if message.role in ("user", "assistant") and message.content:
                text = message.content[:max_message_chars]
                shown.append(ReadBack(message.role, text, tools, message.at, len(message.content) - len(text)))
                tools = []
        if tools:  # calls whose answer never came (cancelled, the provider failed)
            shown.append(ReadBack("assistant", "", tools, at))
        kept: list[ReadBack] = []
        size = 0
        for message in reversed(shown[-limit:]):
            size += len(message.text) + sum(len(line) for line in message.tools)
            if kept and size > max_chars:
                break
            kept.append(message)
        kept.reverse()
        return History(True, kept, len(shown) - len(kept), compacted, row[0][0])

    def idle(self, idle_seconds: float) -> list[str]:
        """Conversations quiet for longer than ``idle_seconds`` with messages not yet in a log."""
        cutoff = time.time() - idle_seconds
        with self.lock:
            return [
                row[0]
                for row in self.conn.execute(
                    """SELECT c.id FROM conversations c WHERE c.updated_at < ?
                       AND EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id AND m.seq > c.logged_seq)""",
                    (cutoff,),
                )
            ]


def _tool_line(call: ToolCall) -> str:
    """memory_search(query: sourdough starter), as the web page shows a call while it happens."""
    args = ", ".join(
        f"{key}: {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}" for key, value in call.arguments.items()
    )
    line = f"{call.name}({args})"
    return line if len(line) <= TOOL_LINE_CHARS else line[: TOOL_LINE_CHARS - 1] + "…"
