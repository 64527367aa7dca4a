"""The tarsd wire protocol: every message type and its msgpack body.

Frames are a 4-byte big-endian body length followed by a msgpack body (transport.py has the
framing and the socket's location). Every body is a map
with a ``type`` tag naming one of the structs below. Rules that keep old clients working:
new fields always get defaults, tags are never renamed or reused, and a ``Hello`` exchange
(protocol version and capabilities, both ways) opens every connection.

This module imports only msgspec and the standard library: tarsctl must start fast.

It is kept whole on purpose. The message types are one contract: the client decodes every reply
through one tagged union (ServerMessage) and the daemon every request through the other
(ClientMessage), so both ends load all of them; split into modules they would still load together,
one module more on every tarsctl start.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta

from tarsctl.search_view import coverage_notes
from tarsctl.transport import HEADER, PROTOCOL_VERSION

# Bounds every request is checked against when it is decoded (a violation is a bad_request).
Text = Annotated[str, Meta(max_length=100_000)]
VaultPath = Annotated[str, Meta(max_length=4096, pattern="^[^\x00]*$")]  # no NUL byte
Limit = Annotated[int, Meta(ge=1, le=1000)]
Score = Annotated[float, Meta(ge=0.0, le=1.0)]  # NaN fails both bounds
LineNumber = Annotated[int, Meta(ge=1, le=100_000_000)]
# What Search.types may name (a hit's memory_type is one of them).
MEMORY_TYPES = ("semantic", "procedural", "episodic", "note")


class Message(msgspec.Struct, tag_field="type", forbid_unknown_fields=False, omit_defaults=True):
    pass


# ---- opening handshake ----


class Hello(Message, tag="hello"):
    protocol: int = PROTOCOL_VERSION
    client: str = ""
    capabilities: list[str] = []
    # A client that works for a model says so (tarsctl mcp: "mcp_client"), and the connection then
    # has that principal's rights only (tarsctl/authority.py). A client can only lower its rights
    # this way: the socket's own principal is the user at the terminal.
    acts_as: str = ""


class Welcome(Message, tag="welcome"):
    protocol: int = PROTOCOL_VERSION
    server: str = ""
    capabilities: list[str] = []


# ---- requests: each carries an id that its replies repeat ----


class Ping(Message, tag="ping"):
    id: int = 0


class Search(Message, tag="search"):
    id: int = 0
    query: Annotated[str, Meta(max_length=10_000)] = ""
    mode: str = "hybrid"  # fts | vec | hybrid
    limit: Limit = 10
    min_score: Score = 0.0
    types: Annotated[list[str], Meta(max_length=8)] = []  # of MEMORY_TYPES
    path: VaultPath = ""  # path prefix inside the vault
    all_chunks: bool = False  # every matching chunk instead of the best one per file
    tags: Annotated[list[Annotated[str, Meta(max_length=200)]], Meta(max_length=16)] = []  # all of them; "a" matches "a/b"
    since: float | None = None  # modified at or after (unix time; parse_when reads "2026-11-01", "7d")
    before: float | None = None  # modified before
    explain: bool = False  # add each hit's ranking signals (keyword rank and BM25, vector rank and similarity, boosts)


class Index(Message, tag="index"):
    id: int = 0
    paths: Annotated[list[VaultPath], Meta(max_length=10_000)] = []  # relative to the vault; empty means the whole vault
    full: bool = False  # re-read and re-chunk every file (cached vectors are still used)
    wait: bool = False  # also wait until every vector is made (embed progress events meanwhile)


class Links(Message, tag="links"):
    """Links from a note (direction "out"), to it ("in", backlinks), or every unresolved link ("unresolved")."""

    id: int = 0
    note: VaultPath = ""  # a vault path, a file name or an alias
    direction: str = "out"  # out | in | unresolved


class Related(Message, tag="related"):
    id: int = 0
    note: VaultPath = ""
    limit: Limit = 10


class Status(Message, tag="status"):
    id: int = 0
    files: bool = False  # also list every note that is not indexed, stale, skipped or repaired


class Stop(Message, tag="stop"):
    id: int = 0


class Chat(Message, tag="chat"):
    """One user message; answered by chat_delta and tool_activity events, then chat_done."""

    id: int = 0
    conversation: Annotated[str, Meta(max_length=200)] = "cli"  # client-chosen: cli, nvim, ...
    message: Text = ""
    provider: str = ""  # ollama | anthropic; empty: the daemon's default
    model: str = ""
    end: bool = False  # a one-shot chat: write the session log and end the conversation
    # A person can answer tool_approval events on this connection (tarsctl chat on a terminal, the
    # web page): without it, a tool that asks is not run, and the model is told why.
    approvals: bool = False
    # Tools (as the model knows them: `tarsctl tools` lists them) the user allows for this message
    # without being asked (tarsctl chat --allow-tools).
    allow_tools: Annotated[list[Annotated[str, Meta(max_length=200)]], Meta(max_length=100)] = []
    token_budget: Annotated[int, Meta(ge=0)] = 0  # the model tokens this turn may use (0: no limit): a routine's tokens_per_run


class Cancel(Message, tag="cancel"):
    """Sent while a chat is streaming: stop the answer in progress (the conversation stays)."""

    id: int = 0


class EndConversation(Message, tag="end_conversation"):
    """/new and /exit: write the session log and start the conversation afresh."""

    id: int = 0
    conversation: str = "cli"
    provider: str = ""
    model: str = ""


class Remember(Message, tag="remember"):
    id: int = 0
    fact: Annotated[str, Meta(max_length=10_000)] = ""
    kind: Annotated[str, Meta(max_length=32)] = "semantic"  # semantic (Memory.md) | procedural (rules)
    section: Annotated[str, Meta(max_length=1000)] = ""  # a heading in Memory.md; empty: tars picks one
    # "": refuse a duplicate, and a possible update (the reply names the similar line);
    # "replace": replace that line (or replace_line, exactly) in place; "force": keep both.
    mode: Annotated[str, Meta(max_length=16)] = ""
    replace_line: Annotated[str, Meta(max_length=10_000)] = ""
    conversation: Annotated[str, Meta(max_length=200)] = ""  # for the line's provenance: the chat it came from
    # A model asked, not the user (tarsctl mcp and /mcp set it: an AI tool calls remember on its own
    # judgement): the fact is stamped by:model, and a rule waits for the user's approval (docs/memory.md).
    by_model: bool = False


class Forget(Message, tag="forget"):
    """Without confirm_line: the lines closest to text (forgotten reply with candidates).
    With it: that exact line (as a candidate showed it) is removed."""

    id: int = 0
    text: Annotated[str, Meta(max_length=10_000)] = ""
    kind: Annotated[str, Meta(max_length=32)] = "semantic"
    confirm_line: Annotated[str, Meta(max_length=10_000)] = ""
    limit: Annotated[int, Meta(ge=1, le=50)] = 5
    by_model: bool = False  # an AI tool asked (tarsctl mcp, /mcp): only lines stamped by:model may be removed


class ReadNote(Message, tag="read_note"):
    """A note's lines: whole, a range (1-based, inclusive) or the section under a heading. Only
    real markdown files inside the vault are read (tarsd/vault/notes.py); the reply is bounded by max_chars."""

    id: int = 0
    path: VaultPath = ""  # relative to the vault (as search hits give it), or absolute
    start_line: LineNumber | None = None  # None: from the first line
    end_line: LineNumber | None = None  # None: to the last line
    heading: Annotated[str, Meta(max_length=1000)] = ""  # "Parent > Child" or its own name; not with a line range
    memory: Annotated[str, Meta(max_length=32)] = ""  # semantic | procedural: that memory file, whatever it is called (no path)
    max_chars: Annotated[int, Meta(ge=1, le=1_000_000)] = 100_000  # lines past this are left out (truncated in the reply)


class Sessions(Message, tag="sessions"):
    """Session logs (episodic memory): the newest first by the log's date; with a query, the
    best matches among them (a search restricted to memory type episodic)."""

    id: int = 0
    limit: Annotated[int, Meta(ge=1, le=100)] = 10
    query: Annotated[str, Meta(max_length=10_000)] = ""
    mode: str = "hybrid"  # with a query: fts | vec | hybrid


class Feedback(Message, tag="feedback"):
    """/w (good=False) and /r (good=True) about the last answer in a conversation."""

    id: int = 0
    conversation: str = "cli"
    good: bool = False
    note: str = ""


class Review(Message, tag="review"):
    id: int = 0
    provider: str = ""
    model: str = ""


class ApplyReview(Message, tag="apply_review"):
    id: int = 0
    rules: list[str] = []  # the rules the user approved, as edited


class PendingRules(Message, tag="pending_rules"):
    """The rules the model proposed in a chat, waiting for the user (answered by pending_rules_reply)."""

    id: int = 0


class DecideRule(Message, tag="decide_rule"):
    """The user's answer to a proposal (a rule, or a change to a memory line): approve applies it as
    the user's, reject drops it. ``rule``, when given, is the proposal's text as the user saw it: the
    decision is refused if the proposal under that id says anything else."""

    id: int = 0
    rule_id: Annotated[int, Meta(ge=1)] = 1
    approve: bool = False
    rule: Annotated[str, Meta(max_length=10_000)] = ""


class DecideToolCall(Message, tag="decide_tool_call"):
    """The user's answer to a tool_approval event. Sent on the chat's own connection while the chat
    streams (no reply: the chat goes on), or as a request of its own from any door (answered by
    tool_call_decided). ``always`` also allows the tool from now on (an allow rule in the rules file)."""

    id: int = 0
    approval: Annotated[str, Meta(max_length=64)] = ""
    approve: bool = False
    always: bool = False


class ListTools(Message, tag="list_tools"):
    """The MCP servers tars uses and their tools, with each tool's policy (answered by tools_reply)."""

    id: int = 0


class ListConversations(Message, tag="list_conversations"):
    """The conversations kept in the daemon, most recently active first (answered by conversation_list)."""

    id: int = 0
    limit: Limit = 100
    archived: bool = False  # also those set aside after an end whose session log is still owed


class ConversationHistory(Message, tag="conversation_history"):
    """A conversation's messages as its reader saw them, oldest first (answered by conversation_messages)."""

    id: int = 0
    conversation: Annotated[str, Meta(max_length=200)] = "cli"
    limit: Annotated[int, Meta(ge=1, le=200)] = 50  # the last this many messages


# ---- routines and reminders (docs/routines.md) ----

RoutineName = Annotated[str, Meta(max_length=64)]
Targets = Annotated[list[Annotated[str, Meta(max_length=32)]], Meta(max_length=8)]  # inbox | telegram | whatsapp | note


class Routines(Message, tag="routines"):
    """The routines and reminders in the routines file, each with its next and last run (answered by routines_reply)."""

    id: int = 0
    name: RoutineName = ""  # one routine; empty: all
    runs: Annotated[int, Meta(ge=0, le=100)] = 0  # also its newest runs (with a name)


class SaveRoutine(Message, tag="save_routine"):
    """Add a routine, or change one (``edit``: only the fields given change; answered by routine_saved)."""

    id: int = 0
    name: RoutineName = ""
    edit: bool = False
    schedule: Annotated[str, Meta(max_length=200)] | None = None  # "30 7 * * *", "every 2h", "2026-11-27 15:00"
    prompt: Text | None = None
    deliver: Targets | None = None  # empty: [routines] deliver
    tools: Annotated[list[Annotated[str, Meta(max_length=200)]], Meta(max_length=100)] | None = None
    quiet: bool | None = None  # speak only when there is something to say
    runs_per_day: Annotated[int, Meta(ge=1, le=100_000)] | None = None
    tokens_per_run: Annotated[int, Meta(ge=1, le=10_000_000)] | None = None
    grace_minutes: Annotated[int, Meta(ge=0, le=525_600)] | None = None
    note: VaultPath | None = None  # the note target: a vault path, {date} for the day's date
    heading: Annotated[str, Meta(max_length=200)] | None = None


class RoutineAction(Message, tag="routine_action"):
    """pause | resume | remove a routine or a reminder, or run a routine now (answered by routine_saved,
    or routine_ran for a run)."""

    id: int = 0
    name: RoutineName = ""
    action: str = ""  # pause | resume | remove | run


class Remind(Message, tag="remind"):
    """A reminder: ``text`` sent to the user at ``when``, no model run (answered by routine_saved)."""

    id: int = 0
    when: Annotated[str, Meta(max_length=100)] = ""  # HH:MM, an ISO date-time, or "in N s|min|h|d"
    text: Annotated[str, Meta(max_length=4000)] = ""
    to: Targets = []  # empty: [routines] deliver


class Inbox(Message, tag="inbox"):
    """What routines and reminders said, newest first, with each delivery's state (answered by inbox_reply)."""

    id: int = 0
    limit: Limit = 20
    unread: bool = False  # only those not read yet
    mark_read: Annotated[list[int], Meta(max_length=1000)] = []  # these are read now
    mark_all_read: bool = False


class PreviewSchedule(Message, tag="preview_schedule"):
    """Is this schedule one tars can use, and when would it run next? Read as saving a routine reads
    it (tarsd/routines/schedule.py); nothing is saved (answered by schedule_preview)."""

    id: int = 0
    schedule: Annotated[str, Meta(max_length=200)] = ""
    name: RoutineName = ""  # the routine being edited: an `every` series counts from its creation; "": from now
    runs: Annotated[int, Meta(ge=1, le=10)] = 3  # how many of the next runs


# ---- the memory review (docs/memory.md#the-memory-review) ----


class MemoryReview(Message, tag="memory_review"):
    """Review Memory.md as a whole and propose changes, never make them (answered by memory_review_reply).
    With ``schedule``: review nothing now, but write the routine ``memory-review`` that runs one on that
    schedule (a routine with ``review = "memory"``, no prompt: docs/routines.md)."""

    id: int = 0
    sessions: bool = True  # also read the session logs since the last review with the model, when one answers
    provider: Annotated[str, Meta(max_length=32)] = ""
    model: Annotated[str, Meta(max_length=200)] = ""
    schedule: Annotated[str, Meta(max_length=200)] = ""
    deliver: Annotated[list[Annotated[str, Meta(max_length=32)]], Meta(max_length=8)] = []  # with schedule: where it says what it found


class MemoryProposals(Message, tag="memory_proposals"):
    """The memory review's proposals waiting for the user (answered by memory_proposals_reply)."""

    id: int = 0


class DecideMemoryProposals(Message, tag="decide_memory_proposals"):
    """Approve (applied as one change, undoable) or reject (remembered: never proposed again) memory
    proposals: those in ``ids``, or every one waiting of ``kind`` (answered by memory_proposals_decided).
    ``seen``, when given, is each proposal's ``text`` as the user saw it, in the order of ``ids``: the
    decision is refused if a proposal says anything else now."""

    id: int = 0
    ids: Annotated[list[Annotated[int, Meta(ge=1)]], Meta(max_length=1000)] = []
    kind: Annotated[str, Meta(max_length=32)] = ""  # duplicate | supersede | expired | budget | missing
    approve: bool = False
    seen: Annotated[list[Annotated[str, Meta(max_length=20_000)]], Meta(max_length=1000)] = []


class MemoryUndo(Message, tag="memory_undo"):
    """Undo a change the memory review applied (answered by memory_undone)."""

    id: int = 0
    change_id: Annotated[int, Meta(ge=0)] = 0  # 0: the last change applied


# ---- replies and stream events ----


class Pong(Message, tag="pong"):
    id: int = 0
    server: str = ""
    uptime: float = 0.0


class Explain(msgspec.Struct):
    """Why a hit ranks where it does (search with explain=True)."""

    keyword_rank: int = 0  # among notes in the keyword list; 0: not in it
    bm25: float = 0.0
    coverage: float = 0.0  # share of the query's words (IDF-weighted) its passage holds
    title_coverage: float = 0.0
    vector_rank: int = 0  # among notes in the vector list; 0: not in it (cosine still measured)
    cosine: float = 0.0
    title_boost: float = 0.0
    link_boost: float = 0.0
    linked_from: int = 0  # other top hits that link to it
    fused: float = 0.0  # the mode's value (fts: keyword value, vec: cosine, hybrid: the fusion), before it is mapped onto the bands
    named: bool = False  # the query is the note's file name, title or an alias: it leads
    calibrated: float = 0.0  # fused mapped onto the bands' 0..1 scale: the shown score unless a rule set it
    scale: str = ""  # what fused is and where the bands begin on it, e.g. "fused on hybrid's scale: maybe from 0.50, ..."
    rule: str = ""  # why the shown score is not calibrated, in words ("kinda at least: the only note ..."); "" when it is


class Hit(msgspec.Struct, omit_defaults=True):
    path: str
    title: str
    heading_path: str  # as written in the note: what get_note's heading takes
    start_line: int
    end_line: int
    snippet: str  # plain text around the best match, matched words between ** marks
    score: float
    band: str
    memory_type: str
    text: str = ""  # the passage as written (markdown)
    heading: str = ""  # what to show next to the title: heading_path as plain text, "" when it only repeats the title
    explain: Explain | None = None


class Coverage(msgspec.Struct):
    """How much of the vault the index holds right now: every search reply carries it, so a
    client can tell "no results" from "not indexed yet"."""

    reconciled: bool = False  # a whole-vault scan has finished since tarsd started
    scan_done: int = 0  # progress of the scan under way (scan_total 0: none running)
    scan_total: int = 0
    notes_indexed: int = 0
    notes_skipped: int = 0
    notes_on_disk: int = -1  # found by the last whole-vault scan; -1: not known yet
    queued: int = 0  # saved notes waiting for their turn
    chunks: int = 0  # passages in the index
    pending_vectors: int = 0  # passages without a vector yet
    embedder: str = ""  # ready | loading | unavailable | disabled
    embedder_reason: str = ""  # why there are no vectors now, and what to do
    vault_error: str = ""  # the vault folder is missing: results come from the index as it was
    watcher: str = ""  # the file watcher is down, or was restarted and the rescan has not finished

    def incomplete(self, semantic: bool) -> list[str]:
        """One sentence per way results may be incomplete ("semantic": vectors matter too)."""
        return coverage_notes(self, semantic)


class SearchResults(Message, tag="search_results"):
    id: int = 0
    mode: str = ""
    results: list[Hit] = []
    warnings: list[str] = []
    elapsed_ms: float = 0.0
    coverage: Coverage | None = None


class LinkHit(msgspec.Struct):
    source: str  # the note the link is in
    line: int
    kind: str  # wiki | embed | markdown
    target: str  # as written
    heading: str = ""
    label: str = ""
    resolved: str = ""  # the note it leads to; "" when none does


class LinksReply(Message, tag="links_reply"):
    id: int = 0
    note: str = ""  # the note the links are of (resolved from the request)
    direction: str = ""
    links: list[LinkHit] = []


class RelatedNote(msgspec.Struct):
    path: str
    title: str
    similarity: float
    linked: bool  # the two notes already link, one way or the other


class RelatedReply(Message, tag="related_reply"):
    id: int = 0
    note: str = ""
    notes: list[RelatedNote] = []
    reason: str = ""  # with no notes: why nothing is listed ("it has no text to compare", ...)


class NoteText(Message, tag="note_text"):
    id: int = 0
    path: str = ""  # relative to the vault
    title: str = ""
    start_line: int = 0  # the line number of lines[0]; 0 for an empty note
    end_line: int = 0  # of the last line in lines (inclusive)
    lines: list[str] = []
    total_lines: int = 0
    truncated: bool = False  # stopped at max_chars: ask again from end_line + 1
    heading: str = ""  # the heading path read ("Parent > Child"), when one was asked for
    memory_type: str = ""  # semantic | procedural | episodic | note
    problem: str = ""  # read, but e.g. invalid UTF-8 bytes were replaced


class SessionLog(msgspec.Struct):
    path: str
    title: str = ""
    started: str = ""  # when the conversation started: ISO 8601, local time, to the minute ("" unknown)
    started_at: float = 0.0  # the same as unix time (0: unknown)
    summary: str = ""  # listing: the log's text after its title (bounded)
    snippet: str = ""  # with a query: the matching passage, matched terms in **bold**
    score: float = 0.0  # with a query (0..1, the search bands)
    band: str = ""
    start_line: int = 0  # with a query: the passage's lines
    end_line: int = 0


class SessionsReply(Message, tag="sessions_reply"):
    id: int = 0
    sessions: list[SessionLog] = []
    total: int = 0  # listing: session logs in the vault
    mode: str = ""  # with a query: the search mode used
    warnings: list[str] = []
    coverage: Coverage | None = None  # with a query: how complete the index is


class Progress(Message, tag="progress"):
    """A stream event: zero or more precede the final reply of a long request."""

    id: int = 0
    phase: str = ""  # queued | scan | embed
    done: int = 0
    total: int = 0
    message: str = ""  # for people: "queued behind a reconcile", "waiting for the model to load"


class IndexDone(Message, tag="index_done"):
    id: int = 0
    scanned: int = 0
    indexed: int = 0
    unchanged: int = 0
    deleted: int = 0
    skipped: int = 0
    chunks: int = 0
    vectors_embedded: int = 0
    vectors_from_cache: int = 0
    pending_vectors: int = 0
    seconds: float = 0.0
    embedder_error: str = ""
    problems: dict[str, str] = {}


class EmbedderStatus(msgspec.Struct):
    state: str = ""  # ready | loading | unavailable | disabled
    kind: str = ""  # local | ollama | none
    model: str = ""
    fingerprint: str = ""
    dims: int = 0
    reason: str = ""  # why it is not ready, and what to do
    failures: int = 0  # failed load attempts since the last success
    next_retry_at: float = 0.0  # unix time of the next attempt; 0: none planned


class NotedLine(msgspec.Struct):
    """A memory line the model stored during a chat (stamped by:model)."""

    line: str
    file: str = ""
    noted: str = ""  # "noted by the model 2026-11-22 in chat cli"


class MemoryStatus(msgspec.Struct):
    """Memory.md in the prompt (whole or selective) and the write guard."""

    file: str = ""
    mode: str = ""  # whole | selective
    lines: int = 0
    tokens: int = 0
    budget_lines: int = 0
    budget_tokens: int = 0
    core_section: str = ""
    core_found: bool = False
    always_lines: int = 0  # what is in every prompt: the whole file, or the core
    always_tokens: int = 0
    facts: int = 0  # lines of Memory.md and the procedural rules
    vectors_pending: int = 0  # memory lines still waiting for a vector
    vectors_known: int = 0  # memory line vectors at hand
    watched: int = 0  # lines tars wrote lately and still checks
    restored: int = 0  # lines put back after a write race, since start
    removed_again: int = 0
    last_restored: list[str] = []
    last_restored_at: float = 0.0
    missing: bool = False  # the file does not exist yet (nothing remembered)
    model_lines: list[NotedLine] = []  # lines the model stored (by:model), newest first, at most 10
    model_lines_total: int = 0
    pending_rules: int = 0  # rules the model proposed, waiting for the user's approval


class FileHealth(msgspec.Struct):
    path: str  # relative to the vault; undecodable bytes escaped
    state: str  # not_indexed | stale | skipped | repaired | deleted
    reason: str = ""


class HttpStatus(msgspec.Struct):
    """The optional HTTP listener ([http] in the config)."""

    enabled: bool = False
    url: str = ""  # where it listens, e.g. http://127.0.0.1:8277/ (the page; the token goes in the #fragment)
    lan: bool = False  # listening beyond loopback
    error: str = ""  # why it is not listening, and what to do
    requests: int = 0  # answered since start
    auth_failures: int = 0  # requests refused for a wrong token (a missing one is not counted)
    rate_limited: int = 0  # refused with 429 after repeated failures


class ChannelStatus(msgspec.Struct):
    """A messenger channel ([whatsapp] or another messenger's section in the config): tars in a chat
    app. Every channel fills what it has and leaves the rest at its default: ``tarsctl status``
    shows a line per channel from these fields alone, whatever the messenger."""

    name: str = ""  # the config section: whatsapp
    title: str = ""  # for people: WhatsApp
    path: str = ""  # the webhook on the HTTP listener (/channels/whatsapp); "" for a channel that does not take deliveries
    receives: str = ""  # how a channel without a webhook gets its messages, for people: "long polling"
    error: str = ""  # why it cannot work now, and what to do; "" when it can
    allowed_senders: int = 0
    received: int = 0  # messages taken in from the allowed senders since start
    answered: int = 0
    duplicates: int = 0  # deliveries of a message already taken in (retries), not answered again
    unknown_senders: int = 0  # messages from senders not allowed: dropped unread
    bad_signatures: int = 0  # webhook requests refused for a missing or wrong signature
    sent: int = 0  # messages sent through the messenger's API
    retries: int = 0  # sends tried again after a 429, a 5xx or a dropped connection
    send_failures: int = 0  # sends given up (the log says why, with the API's error text)
    window_closed: int = 0  # replies refused because the 24-hour window had closed
    window_closed_at: float = 0.0  # the last such refusal (unix time)
    # The messenger said an allowed sender's id changed (WhatsApp: a new BSUID): the new id waits
    # for the owner to add it to the allow list; the sender was told on the channel.
    id_changes: int = 0
    last_error: str = ""
    last_error_at: float = 0.0
    questions_waiting: int = 0  # tool approvals (buttons) waiting for an answer
    # WhatsApp: the approved template a message tars starts goes as outside the 24-hour window
    # ([whatsapp] template); "" when none is set, and such a message cannot be sent.
    template: str = ""


class RunInfo(msgspec.Struct, omit_defaults=True):
    """One occurrence of a routine: run (spoke, quiet), or not (skipped, limited), or broken (failed, interrupted)."""

    scheduled_at: float = 0.0  # the time it was due (unix time)
    started_at: float = 0.0
    finished_at: float = 0.0
    outcome: str = ""  # running | spoke | quiet | reminded | skipped | limited | failed | interrupted
    late: bool = False  # run after its time (tarsd was stopped or the machine slept)
    detail: str = ""  # why it was skipped, limited or failed; what was denied
    conversation: str = ""  # routine:NAME, its session log is in sessions/


class RoutinesStatus(msgspec.Struct, omit_defaults=True):
    """Routines in status: how many, what runs next, what ran last, and what went wrong."""

    enabled: bool = True
    routines: int = 0
    reminders: int = 0
    paused: int = 0
    next_name: str = ""
    next_at: float = 0.0
    last_name: str = ""
    last: RunInfo | None = None
    unread: int = 0  # inbox messages not read yet
    pending_deliveries: int = 0  # waiting for a retry
    failed_deliveries: int = 0  # given up (the messages are in the inbox)
    problem: str = ""  # the routines file's problem, or a delivery that cannot work (a WhatsApp template missing)
    errors: list[str] = []  # each routine whose latest run went wrong (once), each target whose latest delivery was given up
    timezone: str = ""  # the routines' time zone, to say next_at in
    set_aside: list[str] = []  # "NAME: why": routines the clock cannot compute the times of (also in problem), for doctor


class ConflictInfo(msgspec.Struct, omit_defaults=True):
    """A sync tool's conflict copy in the vault (docs/two-machines.md)."""

    path: str = ""  # the copy, relative to the vault
    original: str = ""  # the file it is a copy of
    tool: str = ""  # whose naming it has: Syncthing, Dropbox, Obsidian Sync, iCloud Drive
    state: str = ""  # merging: a file tars writes, merged soon | yours: a note of yours, left to you to merge


class MergeInfo(msgspec.Struct, omit_defaults=True):
    """A conflict copy tars merged into the file it is a copy of."""

    at: float = 0.0
    file: str = ""
    copy: str = ""  # the copy's path, as it was
    kept_at: str = ""  # where the copy's content is kept, in the vault (.tars/merged/...)
    added: int = 0  # lines of the copy now in the file
    duplicates: int = 0  # lines of the copy the file held already
    removed: list[str] = []  # lines left out, with why: removed by tars after their last edit
    kept: list[str] = []  # lines one version lacked that were kept, with why: look at them


class MachineInfo(msgspec.Struct, omit_defaults=True):
    """A tarsd on this vault, as its heartbeat in the vault's .tars/machines/ says."""

    machine: str = ""
    name: str = ""
    this: bool = False  # the tarsd answering
    live: bool = False
    beat_at: float = 0.0  # its last beat, by its own clock
    stopped: bool = False  # it stopped cleanly
    telegram: str = ""  # off | polling | standby
    routines: list[str] = []
    version: str = ""


class SyncStatus(msgspec.Struct, omit_defaults=True):
    """A vault kept in step with other machines: the sync tools seen, the tarsd on it, conflict
    copies, merges, and who polls Telegram (docs/two-machines.md)."""

    machine: str = ""  # this tarsd's machine id
    tools: list[str] = []  # "Syncthing (.stfolder in /home/sam/Notes)"
    machines: list[MachineInfo] = []
    conflicts: list[ConflictInfo] = []
    merges: list[MergeInfo] = []  # the newest first, at most 10
    merged: int = 0  # conflict copies merged since start
    put_back: int = 0  # lines put back from tars's journal since start (a copy that dropped them)
    telegram: str = ""  # this machine's part: why it polls or stands by ("" without Telegram)
    closed_proposals: list[str] = []  # proposals closed because the vault shows them done, since start
    warnings: list[str] = []


class StatusReply(Message, tag="status_reply"):
    id: int = 0
    vault: str = ""
    database: str = ""
    database_bytes: int = 0
    counts: dict[str, int] = {}
    embedder: EmbedderStatus = msgspec.field(default_factory=EmbedderStatus)
    coverage: Coverage = msgspec.field(default_factory=Coverage)
    queue_depth: int = 0
    indexing: bool = False
    last_sync: dict[str, Any] = {}  # at (unix time), error, indexed, deleted, seconds, next_attempt_at
    watcher: dict[str, Any] = {}  # alive, events, restarts, overflows, last_event_at, last_restart_at, last_restart_reason, error
    problems: list[list[str]] = []  # [path, "skipped" | "repaired", reason]
    health: dict[str, int] = {}  # files needing attention by state (status --files lists them)
    files: list[FileHealth] = []  # with Status(files=True)
    uptime: float = 0.0
    versions: dict[str, str] = {}
    warnings: list[str] = []
    memory: MemoryStatus = msgspec.field(default_factory=MemoryStatus)
    http: HttpStatus = msgspec.field(default_factory=HttpStatus)
    vault_error: str = ""  # why the vault folder cannot be used now (missing, drive unmounted); "" when fine
    tool_servers: list[ToolServerInfo] = []  # the MCP servers whose tools the chat may use (no tool lists: `tarsctl tools`)
    tool_calls: list[ToolCallRecord] = []  # the newest calls of their tools, at most 10
    channels: list[ChannelStatus] = []  # messenger channels ([whatsapp]) when enabled
    memory_budget: str = ""  # the memory tarsd plans for, where that comes from, and the settings it picked
    routines: RoutinesStatus = msgspec.field(default_factory=RoutinesStatus)
    sync: SyncStatus = msgspec.field(default_factory=SyncStatus)  # other machines on this vault, conflict copies, merges


class Stopping(Message, tag="stopping"):
    id: int = 0


class ChatDelta(Message, tag="chat_delta"):
    id: int = 0
    text: str = ""


class ToolEffect(msgspec.Struct, omit_defaults=True):
    """What a call of tars's own tools did on the model's account, beyond its answer (a reminder
    set, a line noted, a rule, change or routine proposed), as data: each client draws it in its own
    words with its own undo (a messenger: ``/routines rm NAME``, ``/forget LINE``). The texts are the
    model's: clean them for where they are shown."""

    kind: str  # reminder | noted | replaced | proposed_rule | proposed_change | proposed_routine
    text: str = ""  # the reminder's text, the line noted or written, the rule, the routine's name
    old: str = ""  # replaced, proposed_change: the line before
    at: str = ""  # reminder: when, in the routines' time zone ("2026-11-27 15:00 CET")
    name: str = ""  # reminder: its name (`routines rm NAME` removes it)
    to: list[str] = []  # reminder: where it is sent (inbox, telegram, whatsapp, note:...)
    path: str = ""  # noted, replaced, proposed_change: the memory file
    pending_id: int = 0  # proposed_*: the proposal (`tarsctl rules approve|reject N`)


class ToolActivity(Message, tag="tool_activity"):
    id: int = 0
    phase: str = ""  # call | result
    name: str = ""
    arguments: dict[str, Any] = {}
    result: str = ""  # the start of the result, for display
    summary: str = ""  # a result: what it changed in the user's memory, for people ("" for none)
    effect: ToolEffect | None = None  # a result of tars's own tools: what the model did on its own, as data (None: nothing)
    # Another MCP server's tool: which server and tool, and (a result) what came of it.
    server: str = ""
    tool: str = ""  # as the server names it
    outcome: str = ""  # ok | error | failed | unavailable | denied | timed_out | not_asked | cancelled | refused
    approved_by: str = ""  # "allow rule in the config", "you in tarsctl chat", ...
    duration_ms: float = 0.0
    chars: int = 0  # the whole result's length


class ToolApproval(Message, tag="tool_approval"):
    """A stream event during a chat: the model wants to run a tool that asks first. Answer it with
    decide_tool_call (approval, approve, always) before timeout_seconds, or it counts as no."""

    id: int = 0
    approval: str = ""  # the id to answer with
    server: str = ""
    tool: str = ""  # as the server names it
    name: str = ""  # as the model knows it
    arguments: dict[str, Any] = {}
    why: str = ""  # why it asks: "ask 'add-*' in the config", "not marked read-only by the server"
    timeout_seconds: float = 0.0
    rules_file: str = ""  # where an "always" answer is written


class ToolCallDecided(Message, tag="tool_call_decided"):
    id: int = 0
    approval: str = ""
    approved: bool = False
    always: bool = False
    server: str = ""
    tool: str = ""


class ExternalTool(msgspec.Struct, omit_defaults=True):
    """A tool of another MCP server, as tars offers it to the model (or not)."""

    tool: str  # as the server names it
    name: str = ""  # as the model knows it; "" when it is not offered (denied, or a schema the providers cannot take)
    policy: str = ""  # allow | ask | deny
    why: str = ""  # where the policy comes from
    title: str = ""
    description: str = ""  # as the model sees it (cut)
    read_only: bool = False  # the server marks it read-only (a claim: the policy can overrule it)
    problem: str = ""


class ToolServerInfo(msgspec.Struct, omit_defaults=True):
    """An MCP server tars uses ([mcp.servers.NAME]), and its state."""

    name: str
    transport: str = ""  # stdio | http
    target: str = ""  # the command, or the URL
    enabled: bool = True
    state: str = ""  # starting | ready | restarting | failed | stopped | misconfigured
    error: str = ""  # the last problem (kept after a restart: it says why)
    error_at: float = 0.0
    restarts: int = 0
    next_start_at: float = 0.0  # restarting: when it is tried again (unix time)
    connected_at: float = 0.0
    server_info: str = ""  # the server's own name and version
    circuit: str = ""  # closed | open | half_open
    circuit_failures: int = 0
    circuit_reason: str = ""
    circuit_retry_at: float = 0.0
    tool_count: int = 0
    tools: list[ExternalTool] = []  # tools_reply only
    stderr: list[str] = []  # a stdio server's last lines on stderr (tools_reply only)
    pattern_warnings: list[str] = []  # allow/ask/deny patterns in its config that match none of its tools


class ToolCallRecord(msgspec.Struct, omit_defaults=True):
    """One call of another server's tool, newest first in status and tools_reply."""

    at: float
    server: str
    tool: str
    outcome: str
    conversation: str = ""
    arguments: str = ""  # JSON, cut
    approved_by: str = ""
    duration_ms: float = 0.0
    chars: int = 0


class ToolsReply(Message, tag="tools_reply"):
    id: int = 0
    servers: list[ToolServerInfo] = []
    calls: list[ToolCallRecord] = []  # the newest first
    waiting: int = 0  # calls waiting for the user's approval now
    rules_file: str = ""  # where "always" answers are kept
    rules_problem: str = ""  # why that file's rules are not used, if so


class ChatDone(Message, tag="chat_done"):
    id: int = 0
    conversation: str = ""
    text: str = ""
    tool_rounds: int = 0
    cancelled: bool = False
    session_log: str = ""  # path of a session log written by this turn, if any
    warnings: list[str] = []
    tokens: int = 0  # model tokens the turn used, counted by tars (only with a token_budget)
    context: str = ""  # what the opening context spent, in words ("" when this turn recalled none: not a conversation's first message)


class ConversationEnded(Message, tag="conversation_ended"):
    id: int = 0
    session_log: str = ""
    warnings: list[str] = []


class Remembered(Message, tag="remembered"):
    id: int = 0
    added: bool = False  # added or replaced
    path: str = ""
    section: str = ""
    duplicate_of: str = ""  # the line already there, when a duplicate
    status: str = ""  # added | replaced | duplicate | possible_update | pending (a model's rule awaiting approval)
    similar: str = ""  # the line it repeats or resembles (or replaced)
    reason: str = ""  # a possible update: what differs
    replaced: str = ""  # the old line, when replaced
    line: str = ""  # the fact as written
    pending_id: int = 0  # pending: the proposal's id (tarsctl rules approve N)


class MemoryCandidate(msgspec.Struct, omit_defaults=True):
    line: str  # as shown; send it back as Forget.confirm_line
    section: str = ""
    line_number: int = 0
    score: float = 0.0
    provenance: str = ""  # "added 2026-11-22 in chat nvim"; empty: a line the user wrote


class Forgotten(Message, tag="forgotten"):
    id: int = 0
    path: str = ""
    candidates: list[MemoryCandidate] = []
    removed: str = ""  # the line removed, after a confirm_line
    pending_id: int = 0  # a model asked to remove the user's line: the proposal waiting for the user (tarsctl rules)
    # After a removal: a save bringing the line back within this many seconds is taken for an editor's stale copy and undone.
    stale_copy_seconds: float = 0.0


class ConversationInfo(msgspec.Struct):
    id: str
    created_at: float = 0.0  # unix time
    updated_at: float = 0.0  # the last message
    messages: int = 0  # user and assistant messages with text (not bare tool calls), compacted ones included
    unlogged: int = 0  # of those, not yet in a session log
    compacted: int = 0  # summarised into the running summary
    title: str = ""  # the start of the first user message, for a list
    archived: bool = False


class ConversationList(Message, tag="conversation_list"):
    id: int = 0
    conversations: list[ConversationInfo] = []
    total: int = 0  # before the limit


class ShownMessage(msgspec.Struct, omit_defaults=True):
    role: str  # user | assistant
    text: str = ""
    tools: list[str] = []  # assistant: one short line per tool call made for this answer
    at: float = 0.0  # unix time
    cut: int = 0  # characters of the text left out for length


class ConversationMessages(Message, tag="conversation_messages"):
    id: int = 0
    conversation: str = ""
    found: bool = False  # no conversation under this id (never used, or ended): no messages
    messages: list[ShownMessage] = []  # oldest first
    omitted: int = 0  # earlier messages left out by the bounds (count, then size)
    compacted: int = 0  # earlier messages summarised: ``summary`` stands in for them
    summary: str = ""


class FeedbackSaved(Message, tag="feedback_saved"):
    id: int = 0
    path: str = ""


class ReviewProposals(Message, tag="review_proposals"):
    id: int = 0
    rules: list[str] = []
    nothing_to_review: bool = False


class ReviewApplied(Message, tag="review_applied"):
    id: int = 0
    added: int = 0
    archived: list[str] = []


class PendingRule(msgspec.Struct, omit_defaults=True):
    id: int  # DecideRule.rule_id (never reused)
    rule: str  # the rule; for a change to a memory line, the line's new text (replace) or the line to remove (remove)
    conversation: str = ""  # the chat the model proposed it in
    proposed_at: float = 0.0  # unix time
    action: str = "rule"  # rule | replace | remove
    target: str = ""  # replace: the line it replaces, as it read when proposed
    path: str = ""  # the memory file it changes


class PendingRulesReply(Message, tag="pending_rules_reply"):
    id: int = 0
    rules: list[PendingRule] = []
    path: str = ""  # the rules file an approved rule goes into


class RuleDecided(Message, tag="rule_decided"):
    id: int = 0
    rule_id: int = 0
    rule: str = ""
    approved: bool = False
    status: str = ""  # approved: added | duplicate (already in the file) | replaced | removed; rejected: rejected
    path: str = ""
    action: str = "rule"  # rule | replace | remove


class RoutineInfo(msgspec.Struct, omit_defaults=True):
    name: str
    kind: str = "routine"  # routine | reminder
    schedule: str = ""
    prompt: str = ""
    text: str = ""  # a reminder's message
    deliver: list[str] = []  # where its messages go (the config's default filled in)
    tools: list[str] = []  # tools a run may use without asking
    quiet: bool = False  # speaks only when there is something to say
    paused: bool = False
    by: str = "user"  # user | model (a reminder the model set when asked)
    next_run: float = 0.0  # unix time; 0: none (paused, or a one-shot that has run)
    last_run: RunInfo | None = None
    runs: list[RunInfo] = []  # newest first, with Routines(runs=N)
    runs_today: int = 0
    runs_per_day: int = 0
    tokens_per_run: int = 0
    grace_minutes: int = 0
    note: str = ""
    heading: str = ""
    undo: str = ""  # the command that removes it
    review: str = ""  # a built-in run instead of a prompt: "memory" (the memory review)


class RoutinesReply(Message, tag="routines_reply"):
    id: int = 0
    routines: list[RoutineInfo] = []
    file: str = ""  # the routines file
    timezone: str = ""
    enabled: bool = True  # [routines] enabled: false on a machine that leaves them to another
    problem: str = ""  # why (part of) the routines file is not used, and what to do
    skipped: list[str] = []  # runs missed past their grace at the last start, for people


class RoutineSaved(Message, tag="routine_saved"):
    id: int = 0
    routine: RoutineInfo = msgspec.field(default_factory=lambda: RoutineInfo(name=""))
    status: str = ""  # added | updated | paused | resumed | removed
    file: str = ""
    timezone: str = ""  # the routines' time zone ([routines] timezone), to say its times in


class RoutineRan(Message, tag="routine_ran"):
    id: int = 0
    name: str = ""
    run: RunInfo = msgspec.field(default_factory=RunInfo)
    text: str = ""  # what it said (empty when it had nothing to say)


class DeliveryInfo(msgspec.Struct, omit_defaults=True):
    target: str
    state: str = "pending"  # pending | sent | failed (given up: the message stays in the inbox)
    attempts: int = 0
    last_error: str = ""
    next_attempt_at: float = 0.0
    sent_at: float = 0.0


class InboxMessage(msgspec.Struct, omit_defaults=True):
    id: int
    created_at: float = 0.0
    source: str = ""  # routine:NAME | reminder:NAME
    title: str = ""
    text: str = ""
    read: bool = False
    deliveries: list[DeliveryInfo] = []


class InboxReply(Message, tag="inbox_reply"):
    id: int = 0
    messages: list[InboxMessage] = []
    unread: int = 0  # in all, after this request's marks
    timezone: str = ""  # the routines' time zone, to say the messages' times in


class SchedulePreview(Message, tag="schedule_preview"):
    id: int = 0
    schedule: str = ""  # as read (runs of blanks made one)
    valid: bool = False
    kind: str = ""  # cron | every | once (when valid)
    runs: list[float] = []  # the next runs, unix time, soonest first (one for a one-shot)
    timezone: str = ""  # the routines' time zone: the schedule is read in it, and its times are said in it
    problem: str = ""  # why it cannot be used ("" when valid)
    hint: str = ""  # what is accepted instead


class MemoryProposal(msgspec.Struct, omit_defaults=True):
    """One proposal of the memory review: ``text`` says, whole, what approving it changes."""

    id: int
    kind: str  # duplicate | supersede | expired | budget | missing
    text: str  # what changes, in words: what the user approves (DecideMemoryProposals.seen)
    remove: list[str] = []  # the lines it takes out of Memory.md, as they read (stamps too)
    keep: str = ""  # duplicate, supersede: the line that stays
    add: str = ""  # missing: the line it adds
    section: str = ""  # missing: the heading it goes under; budget: the section that moves
    note: str = ""  # budget: the note the section moves to
    why: str = ""
    source: str = ""  # where it came from: Memory.md:12 and :40, or sessions/...md#L12
    quote: str = ""  # missing: the session log's line, as it reads
    review_id: int = 0
    proposed_at: float = 0.0


class MemoryReviewReply(Message, tag="memory_review_reply"):
    id: int = 0
    review_id: int = 0
    new: list[MemoryProposal] = []  # proposed by this review
    waiting: list[MemoryProposal] = []  # every proposal waiting, this review's included
    left: list[str] = []  # what the cap on removals left for the next review, and why
    notes: list[str] = []  # what else to know (the session logs not read, and why)
    lines: int = 0  # Memory.md's lines
    cap: int = 0  # lines one review may propose to remove
    known: int = 0  # found again, but proposed before: not proposed twice
    path: str = ""  # the memory file reviewed
    routine: str = ""  # with schedule: the routine written


class MemoryProposalsReply(Message, tag="memory_proposals_reply"):
    id: int = 0
    proposals: list[MemoryProposal] = []
    path: str = ""


class MemoryProposalsDecided(Message, tag="memory_proposals_decided"):
    id: int = 0
    approve: bool = False
    decided: list[int] = []  # approved (applied) or rejected
    gone: list[int] = []  # their lines changed since they were proposed: nothing was done
    change_id: int = 0  # the change applied (0: none)
    undo: str = ""  # the command that undoes it
    history: str = ""  # the note in the vault that records it
    path: str = ""
    removed: list[str] = []
    added: list[str] = []


class MemoryUndone(Message, tag="memory_undone"):
    id: int = 0
    change_id: int = 0
    exact: bool = False  # the file is back byte for byte (nobody edited it since the change)
    restored: list[str] = []  # the lines put back
    removed: list[str] = []  # the lines taken out again
    history: str = ""
    path: str = ""


class Error(Message, tag="error"):
    id: int = 0
    code: str = ""  # bad_frame | too_large | bad_request | unsupported | unavailable | internal | ...
    message: str = ""
    hint: str = ""


ClientMessage = (
    Hello
    | Ping
    | Search
    | Index
    | Status
    | Stop
    | Chat
    | Cancel
    | EndConversation
    | Remember
    | Feedback
    | Review
    | ApplyReview
    | Links
    | Related
    | Forget
    | ReadNote
    | Sessions
    | ListConversations
    | ConversationHistory
    | PendingRules
    | DecideRule
    | DecideToolCall
    | ListTools
    | Routines
    | SaveRoutine
    | RoutineAction
    | Remind
    | Inbox
    | PreviewSchedule
    | MemoryReview
    | MemoryProposals
    | DecideMemoryProposals
    | MemoryUndo
)
ServerMessage = (
    Welcome
    | Pong
    | SearchResults
    | Progress
    | IndexDone
    | StatusReply
    | Stopping
    | Error
    | ChatDelta
    | ToolActivity
    | ChatDone
    | ConversationEnded
    | Remembered
    | FeedbackSaved
    | ReviewProposals
    | ReviewApplied
    | LinksReply
    | RelatedReply
    | Forgotten
    | NoteText
    | SessionsReply
    | ConversationList
    | ConversationMessages
    | PendingRulesReply
    | RuleDecided
    | ToolApproval
    | ToolCallDecided
    | ToolsReply
    | RoutinesReply
    | RoutineSaved
    | RoutineRan
    | InboxReply
    | SchedulePreview
    | MemoryReviewReply
    | MemoryProposalsReply
    | MemoryProposalsDecided
    | MemoryUndone
)
FINAL_REPLIES = (
    Pong,
    SearchResults,
    IndexDone,
    StatusReply,
    Stopping,
    Error,
    ChatDone,
    ConversationEnded,
    Remembered,
    FeedbackSaved,
    ReviewProposals,
    ReviewApplied,
    LinksReply,
    RelatedReply,
    Forgotten,
    NoteText,
    SessionsReply,
    ConversationList,
    ConversationMessages,
    PendingRulesReply,
    RuleDecided,
    ToolCallDecided,
    ToolsReply,
    RoutinesReply,
    RoutineSaved,
    RoutineRan,
    InboxReply,
    SchedulePreview,
    MemoryReviewReply,
    MemoryProposalsReply,
    MemoryProposalsDecided,
    MemoryUndone,
)

encoder = msgspec.msgpack.Encoder()
# The daemon's decoders are made where it reads (tarsd.serve.codecs): tarsctl never decodes a request.
server_decoder = msgspec.msgpack.Decoder(ServerMessage)


def frame(message: Message) -> bytes:
    body = encoder.encode(message)
    return HEADER.pack(len(body)) + body


def every_field(obj: object) -> object:
    """Builtins with every field, defaults included (``type`` first for a message): what
    scripts get from --json and MCP clients as structured content, so every key is always there."""
    if isinstance(obj, msgspec.Struct):
        fields = {name: every_field(getattr(obj, name)) for name in obj.__struct_fields__}
        tag = obj.__struct_config__.tag
        return {"type": tag, **fields} if isinstance(tag, str) else fields
    if isinstance(obj, dict):
        return {key: every_field(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [every_field(value) for value in obj]
    return obj
