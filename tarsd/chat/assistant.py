"""The assistant: one chat turn with memory and tools, compaction, session logs, feedback
and /review. Runs in worker threads; the server streams its events to the client."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from tarsd.chat import prompts
from tarsd.chat.conversations import ChatMessage, Conversation, ConversationStore, ToolCall, ToolRecord, with_every_call_answered
from tarsd.chat.external import ExternalCalls, Turn
from tarsd.chat.providers import Done, Provider, ProviderError, TextDelta, ToolCallEvent, make_provider
from tarsd.chat.recall import MemoryRecall, Recall, opening_context
from tarsd.chat.routine_tools import RoutineTools, routine_from_proposal
from tarsd.chat.tools import OWN_TOOL_NAMES, SPECS, Tools
from tarsd.config.settings import Config
from tarsd.memory.files import MemoryFiles, Remembered, atomic_update, printable
from tarsd.memory.lines import memory_lines
from tarsd.memory.pending_rules import ROUTINE, PendingRule, PendingRules
from tarsd.memory.review import MemoryReview
from tarsd.memory.vectors import LineVectors
from tarsd.routines.book import Book
from tarsd.search.engine import Engine
from tarsd.tools.approvals import Approvals
from tarsd.tools.servers import ToolServers
from tarsd.vault.files import OutsideVault, owned_file
from tarsd.vault.root import make_folders

log = logging.getLogger(__name__)

# ("delta", text) | ("tool_call", ToolCall) | ("approval", external.AskUser) | ("tool_result", (ToolCall, str, ToolRecord | None))
Emit = Callable[[str, object], None]
MAX_SUMMARY_CHARS = 4000
PRUNE_SECONDS = 3600.0  # stored vectors of lines gone from the memory files are pruned at most this often
COUNT_EXACT_CHARS = 100_000  # token counts past this many characters are estimated
TOOL_BUDGET_NOTE = "\n\n(The tool budget for this message is used up: answer now from what you have, without calling tools.)"
STOPPED = "not run: the user stopped the answer"
TOOL_LOG_ARGUMENT_CHARS = 300  # of a call's arguments, in the session log's list of tool calls
TRANSCRIPT_MESSAGE_CHARS = 2000  # of each message, in a session log written from the transcript (no summary came)


@dataclass(slots=True)
class TurnResult:
    conversation: str
    text: str = ""
    tool_rounds: int = 0
    cancelled: bool = False
    session_log: str = ""
    warnings: list[str] = field(default_factory=list)
    tokens: int = 0  # model tokens this turn used, as tars counts them (what it sent and what came back)
    context: str = ""  # what the opening context spent (a conversation's first message only), in words


class Assistant:
    def __init__(
        self,
        config: Config,
        engine: Engine,
        reindex: Callable[[str], None],
        reindex_soon: Callable[[str], None] | None = None,
        tool_servers: ToolServers | None = None,
    ):
        """``reindex`` commits a path to the index before returning; ``reindex_soon`` only
        queues it at the front (a remember from the socket answers without waiting for the
        index: the fact is on disk, and a search right after settles on the queued path).
        ``tool_servers``: other MCP servers whose tools the model may call (tarsd/tools)."""
        self.config = config
        self.chat_config = config.chat
        self.engine = engine
        self.vault = config.vault_path
        self.vectors = LineVectors(engine.store, engine.embedder)
        self.memory = MemoryFiles(self.vault, config.memory, self.vectors)
        self.memory.pending = PendingRules(engine.store)
        # The memory review: proposals on Memory.md as a whole, decided by the user (tarsd/memory/review.py).
        self.memory_review = MemoryReview(self.memory, engine.store, config.memory, self.vectors)
        self.recall = MemoryRecall(config.memory, self.vectors, self._count_tokens)
        self.conversations = ConversationStore(engine.store)
        self.reindex = reindex
        self.reindex_soon = reindex_soon or reindex
        self.memory.on_written = self.reindex_soon
        self.tools = Tools(
            self.vault, engine.searcher, self.memory, reindex, int(config.vault.max_file_mb * 1_000_000), config.chat.context_chars
        )
        self.tool_servers = tool_servers if tool_servers is not None else ToolServers(config.mcp, reserved=OWN_TOOL_NAMES)
        self.approvals = Approvals()
        self.external = ExternalCalls(self.tool_servers, self.approvals, config.mcp)
        self.routine_book: Book | None = None  # the routines file, once the daemon opens it (open_routines)
        self.on_routines_changed: Callable[[], None] | None = None  # the clock re-arms when a proposal adds a routine
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._warming = threading.Lock()
        self._pruned_at = float("-inf")
        # Memory lines get their vectors as soon as the model is there (never waited for).
        engine.embedder.on_change(self.warm_memory_vectors)

    def open_routines(self, book: Book, on_changed: Callable[[], None]) -> None:
        """The routines file the model's reminder and proposal tools write to (tarsd/chat/routine_tools.py)."""
        self.routine_book = book
        self.on_routines_changed = on_changed
        routines = self.config.routines
        self.tools.routines = RoutineTools(book, self.memory.pending, list(routines.deliver), routines.enabled)

    def _lock(self, conversation_id: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(conversation_id, threading.Lock())

    def _count_tokens(self, text: str) -> int:
        """Exact up to COUNT_EXACT_CHARS; past that, from the rate of that first part (a
        budget check needs no more, and the tokenizer takes seconds on megabytes)."""
        counter, _ = self.engine.embedder.counter()
        if len(text) <= COUNT_EXACT_CHARS:
            return counter.count([text])[0] if text else 0
        return round(counter.count([text[:COUNT_EXACT_CHARS]])[0] * len(text) / COUNT_EXACT_CHARS)

    def warm_memory_vectors(self) -> None:
        """Give every memory line its vector, in the background (model loaded, a file changed)."""
        if not self._warming.acquire(blocking=False):
            return  # one pass at a time; the lines a pass misses get theirs when next used
        try:
            lines = [line.text for kind in ("semantic", "procedural") for line in self.memory.lines(kind)]
            self.vectors.warm(lines)
            if time.monotonic() - self._pruned_at > PRUNE_SECONDS:
                self._pruned_at = time.monotonic()
                self.vectors.prune(lines)
        except Exception:  # a help, never a failure
            log.exception("could not prepare memory line vectors")
        finally:
            self._warming.release()

    def file_changed(self, rel: str) -> None:
        """A watcher event (any thread): memory files are checked for lines lost in a write race."""
        if rel in (self.config.memory.semantic_file, self.config.memory.procedural_file):
            self.memory.changed(rel)
            if rel == self.config.memory.semantic_file:
                self.memory_review.noticed()  # when each line appeared: the review's dates for lines without a stamp
            if not self._warming.locked():
                threading.Thread(target=self.warm_memory_vectors, name="memory-warm", daemon=True).start()

    # ---- a chat turn ----

    def chat(
        self,
        conversation_id: str,
        text: str,
        provider: str = "",
        model: str = "",
        emit: Emit | None = None,
        cancel: threading.Event | None = None,
        end: bool = False,
        can_ask: bool = False,
        allowed_tools: list[str] | tuple[str, ...] = (),
        token_budget: int = 0,
    ) -> TurnResult:
        """One message and its answer. ``can_ask``: a person can answer approval events where this
        chat comes from; ``allowed_tools``: other servers' tools the user allows for this message;
        ``token_budget``: the model tokens the turn may use (0: no limit; a routine's tokens_per_run)."""
        emit = emit or (lambda kind, value: None)
        cancel = cancel or threading.Event()
        if not text.strip():
            raise ValueError("the message is empty")
        with self._lock(conversation_id):
            conversation = self.conversations.load(conversation_id)
            result = TurnResult(conversation_id)
            if not conversation.messages and not conversation.summary:
                self.conversations.set_context(conversation, self._opening_context(text, result))
            # Saved before anything can fail: a provider error never loses the user's message.
            self.conversations.append(conversation, ChatMessage(role="user", content=text))
            chosen = make_provider(self.chat_config, provider, model)
            turn = Turn(conversation_id, can_ask, frozenset(allowed_tools), emit, cancel)
            self._answer(conversation, chosen, turn, result, text, token_budget)
            if not result.cancelled and not token_budget:  # a budgeted turn (a routine's run) ends now: nothing to compact
                self._maybe_compact(conversation, chosen, result)
            if end:
                result.session_log = self._end(conversation, chosen, result, token_budget)
            return result

    def _opening_context(self, text: str, result: TurnResult) -> str:
        """The lines recalled for the opening message (the same recall as memory_search), saying what they spent."""
        try:
            context = opening_context(self.engine.searcher, text, self.chat_config)
        except Exception as exc:  # context is a help, never a reason to fail the chat
            result.warnings.append(f"no relevant context: {exc}")
            return ""
        result.warnings.extend(context.recalled.warnings)
        result.context = context.spent
        log.info("opening context: %s", context.spent)
        return context.text

    def recall_memory(self, message: str) -> Recall:
        """Memory.md for the prompt: whole, or (past the budget) the core plus what is relevant to ``message``."""
        return self.recall.select(prompts.mark_model_lines(self.memory.read_semantic()), message)

    def _answer(
        self, conversation: Conversation, provider: Provider, turn: Turn, result: TurnResult, message: str, token_budget: int = 0
    ) -> None:
        emit, cancel = turn.emit, turn.cancel
        memory = self.recall_memory(message)
        omitted = memory.omitted if memory.mode == "selective" else None
        rules = prompts.users_rules(self.memory.read_procedural())
        offer = self.external.offer()  # other servers' tools, fixed for this turn
        specs = SPECS + offer.specs
        unknown = sorted(turn.allowed - offer.tools.keys())
        if unknown:
            result.warnings.append(f"--allow-tools: no tool is offered as {', '.join(unknown)} now: `tarsctl tools` lists the names")
        system = prompts.system_prompt(memory.text, rules, conversation.context, conversation.summary, omitted, offer.note)
        while True:
            budget_left = result.tool_rounds < self.chat_config.max_tool_rounds
            parts: list[str] = []
            calls: list[ToolCall] = []
            history = with_every_call_answered([m for _, m in conversation.messages])
            if token_budget:
                # The provider bills what it is sent each round (the system prompt and the whole history) and
                # what it answers: counted here with the embedder's tokenizer, an estimate that errs high.
                sending = self._count_tokens(system) + sum(self._count_tokens(m.content) for m in history)
                if result.tokens + sending > token_budget:
                    note = f"(stopped: the next model call would pass this run's limit of {token_budget:,} model tokens)"
                    self.conversations.append(conversation, ChatMessage(role="assistant", content=note))
                    result.text = note
                    result.warnings.append(note.strip("()"))
                    return
                result.tokens += sending
            try:
                for event in provider.stream(system if budget_left else system + TOOL_BUDGET_NOTE, history, specs, cancel):
                    if isinstance(event, TextDelta):
                        parts.append(event.text)
                        emit("delta", event.text)
                    elif isinstance(event, ToolCallEvent):
                        calls.append(event.call)
                    elif isinstance(event, Done) and event.stop_reason == "cancelled":
                        result.cancelled = True
            except ProviderError as exc:
                if exc.partial:
                    self.conversations.append(conversation, ChatMessage(role="assistant", content=exc.partial + " [answer broke off]"))
                raise
            text = "".join(parts)
            if token_budget:
                result.tokens += self._count_tokens(text) + sum(self._count_tokens(json.dumps(c.arguments, default=str)) for c in calls)
            if result.cancelled or cancel.is_set():
                result.cancelled = True
                if text:
                    self.conversations.append(conversation, ChatMessage(role="assistant", content=text + " [cancelled]"))
                result.text = text
                return
            if calls and not budget_left:
                # The model kept calling tools past its budget: stop rather than loop.
                text = (text + "\n\n" if text else "") + f"(stopped after {result.tool_rounds} rounds of tool calls)"
                calls = []
            self.conversations.append(conversation, ChatMessage(role="assistant", content=text, tool_calls=calls))
            if not calls:
                result.text = text
                return
            result.tool_rounds += 1
            for call in calls:
                emit("tool_call", call)
                record: ToolRecord | None = None
                if cancel.is_set():
                    output = STOPPED
                elif call.name in OWN_TOOL_NAMES:
                    output = self.tools.run(call, conversation.id)
                else:
                    output, record = self.external.run(call, offer, turn)
                emit("tool_result", (call, output, record))
                self.conversations.append(
                    conversation, ChatMessage(role="tool", content=output, tool_call_id=call.id, tool_name=call.name, record=record)
                )
            if cancel.is_set():
                result.cancelled = True
                result.text = text
                return

    # ---- compaction and session logs ----

    def _maybe_compact(self, conversation: Conversation, provider: Provider, result: TurnResult) -> None:
        messages = conversation.messages
        if conversation.chars <= self.chat_config.compact_chars or len(messages) <= self.chat_config.keep_recent:
            return
        # Keep the recent tail from a user message on, so no tool call is parted from its result.
        cut = next((i for i in range(len(messages) - self.chat_config.keep_recent, len(messages)) if messages[i][1].role == "user"), None)
        if not cut:
            return
        old = messages[:cut]
        unlogged = [(seq, m) for seq, m in old if seq > conversation.logged_seq]
        try:
            parts = self._summarise_parts([m for _, m in old], provider)
        except ProviderError as exc:
            result.warnings.append(f"could not compact the conversation: {exc.message}")
            return
        if parts is None:
            return
        title, bullets = parts
        # One summary serves both: the session log of this span, and the running summary
        # that replaces the span in the prompt (bounded, newest kept).
        if any(m.role == "user" for _, m in unlogged):
            result.session_log = self._write_log(conversation, unlogged, title, bullets)
        running = "\n".join(filter(None, [conversation.summary, f"{title}:", *bullets]))[-MAX_SUMMARY_CHARS:]
        self.conversations.mark_logged(conversation, old[-1][0])
        self.conversations.compact(conversation, old[-1][0], running)

    def _summarise_parts(self, messages: list[ChatMessage], provider: Provider) -> tuple[str, list[str]] | None:
        """(title, bullets) from the model, or None when there is nothing to summarise."""
        transcript = prompts.transcript(messages)
        if not transcript.strip():
            return None
        reply = provider.complete(prompts.SUMMARY_INSTRUCTIONS, prompts.block("conversation", transcript))
        lines = [line.strip() for line in printable(reply).splitlines() if line.strip()]
        if not lines:
            return None
        title = lines[0].lstrip("#-* ").strip() or "Conversation"
        bullets = [line if line.startswith("- ") else f"- {line.lstrip('-*• ').strip()}" for line in lines[1:]]
        return title, bullets

    def _write_log(self, conversation: Conversation, span: list[tuple[int, ChatMessage]], title: str, bullets: list[str]) -> str:
        """sessions/YYYY-MM-DD-HHMM-<slug>.md: a timestamped summary with front matter."""
        started = datetime.fromtimestamp(span[0][1].at).astimezone()
        ended = datetime.fromtimestamp(span[-1][1].at).astimezone()
        folder = owned_file(self.vault, self.config.memory.sessions_dir)
        stem = session_log_stem(started, title)
        path = folder / f"{stem}.md"
        counter = 2
        while path.exists():
            path = folder / f"{stem}-{counter}.md"
            counter += 1
        said = sum(1 for _, m in span if m.role in ("user", "assistant") and m.content)
        body = session_log_text(conversation.id, started, ended, said, title, bullets, tool_calls_section([m for _, m in span]))
        make_folders(self.vault, folder)
        atomic_update(path, lambda _: body)
        rel = path.relative_to(self.vault).as_posix()
        self.reindex(rel)
        log.info("session log written: %s", rel)
        return rel

    def _log_unlogged(
        self, conversation: Conversation, provider: Provider, warnings: list[str] | None = None, token_budget: int = 0, spent: int = 0
    ) -> str:
        """A session log for what is not in one yet; empty when there is nothing to log. When the
        model gives no summary, the log holds the transcript instead (and ``warnings`` says so):
        a conversation is never dropped for want of a summary. With a ``token_budget`` (a routine's
        run, ``spent`` of it used), a summary that would pass it is not asked for: the transcript is logged."""
        unlogged = conversation.unlogged()
        if not any(m.role == "user" for _, m in unlogged):
            return ""
        messages = [m for _, m in unlogged]
        if token_budget and spent + self._count_tokens(prompts.SUMMARY_INSTRUCTIONS + prompts.transcript(messages)) > token_budget:
            if warnings is not None:
                warnings.append("its session log holds the transcript: a summary by the model would pass the run's token limit")
            path = self._write_log(conversation, unlogged, *transcript_parts(messages))
            self.conversations.mark_logged(conversation, unlogged[-1][0])
            return path
        parts = self._summarise_parts(messages, provider)
        if parts is None:
            parts = transcript_parts(messages)
            if warnings is not None:
                warnings.append("the model gave no summary of this conversation: its session log holds the transcript instead")
        path = self._write_log(conversation, unlogged, *parts)
        self.conversations.mark_logged(conversation, unlogged[-1][0])
        return path

    def _end(self, conversation: Conversation, provider: Provider, result: TurnResult, token_budget: int = 0) -> str:
        try:
            path = self._log_unlogged(conversation, provider, result.warnings, token_budget, result.tokens)
        except (ProviderError, OutsideVault, OSError) as exc:
            # Keep the messages under another id: the idle snapshot writes the log later.
            self.conversations.archive(conversation.id)
            result.warnings.append(f"session log not written yet ({_why(exc)}); it will be retried in the background")
            return ""
        self.conversations.delete(conversation.id)
        return path or result.session_log

    def end(self, conversation_id: str, provider: str = "", model: str = "") -> TurnResult:
        """/new and /exit: log the conversation and start afresh."""
        with self._lock(conversation_id):
            conversation = self.conversations.load(conversation_id)
            result = TurnResult(conversation_id)
            if not conversation.unlogged():
                self.conversations.delete(conversation_id)
                return result
            result.session_log = self._end(conversation, make_provider(self.chat_config, provider, model), result)
            return result

    def snapshot_idle(self) -> list[str]:
        """Session logs for conversations idle past the configured time (scheduled job)."""
        written = []
        for conversation_id in self.conversations.idle(self.chat_config.idle_minutes * 60):
            with self._lock(conversation_id):
                conversation = self.conversations.load(conversation_id)
                try:
                    path = self._log_unlogged(conversation, make_provider(self.chat_config))
                except (ProviderError, OutsideVault, OSError) as exc:
                    log.warning("idle snapshot of %s postponed: %s", loggable(conversation_id), _why(exc))
                    continue
                if path:
                    written.append(path)
                if self.conversations.is_archived(conversation_id):
                    self.conversations.delete(conversation_id)
        return written

    # ---- memory and feedback ----

    def feedback(self, conversation_id: str, good: bool, note: str = "") -> str:
        conversation = self.conversations.load(conversation_id)
        messages = [m for _, m in conversation.messages]
        answer_at = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "assistant" and messages[i].content), None)
        if answer_at is None:
            raise ValueError("there is no answer to mark yet in this conversation")
        question = next((m.content for m in reversed(messages[:answer_at]) if m.role == "user"), "")
        path = self.memory.record_feedback(good, question, messages[answer_at].content, note)
        self.reindex(path)
        return path

    def review(self, provider: str = "", model: str = "") -> tuple[list[str], bool]:
        """Proposed procedural rules from corrections and rewards; (rules, anything_to_review)."""
        corrections, rewards = self.memory.load_feedback()
        if not corrections.strip() and not rewards.strip():
            return [], False
        material = prompts.block("corrections", corrections or "(none)") + "\n" + prompts.block("rewards", rewards or "(none)")
        reply = make_provider(self.chat_config, provider, model).complete(prompts.REVIEW_INSTRUCTIONS, material)
        rules = [line.strip()[2:].strip() for line in reply.splitlines() if line.strip().startswith("- ") and line.strip()[2:].strip()]
        return rules, True

    def apply_review(self, rules: list[str]) -> tuple[int, list[str]]:
        added = self.memory.append_rules([r for r in rules if r.strip()])
        if added:
            self.reindex(self.config.memory.procedural_file)
        archived = self.memory.archive_feedback()
        for path in [self.config.memory.corrections_file, self.config.memory.rewards_file, *archived]:
            self.reindex(path)
        return added, archived

    def pending_rules(self) -> list[PendingRule]:
        """Rules the model proposed, waiting for the user (oldest first)."""
        return self.memory.pending.list()

    def decide_rule(self, rule_id: int, approve: bool, seen_text: str = "") -> tuple[PendingRule, Remembered | None]:
        """The user's answer to a proposal (tarsd/memory/pending_rules.py): approved, it is applied
        as the user's (the same checks as any remember); rejected, it is dropped. The decision is
        claimed first, in one transaction, so a second answer is told it came too late; an approval
        that cannot be applied (the line gone, a full disk) waits again."""
        proposal = self.memory.pending.claim(rule_id, approve, seen_text)
        written = None
        if approve:
            try:
                written = self._apply(proposal)
            except BaseException:
                self.memory.pending.reopen(proposal.id)
                raise
            self.memory.pending.finish(proposal.id)
        log.info("the user %s proposal #%d: %s", "approved" if approve else "rejected", rule_id, proposal.describe())
        return proposal, written

    def _apply(self, proposal: PendingRule) -> Remembered:
        """An approved proposal applied as the user's: a memory change, or a routine into the routines file."""
        if proposal.action != ROUTINE:
            return self.memory.apply_proposal(proposal)
        if self.routine_book is None:
            raise ValueError("the routines file is not open yet: approve it again in a moment")
        routine = routine_from_proposal(proposal.rule)
        if self.routine_book.get(routine.name) is None:  # applied before a kill: not added twice
            self.routine_book.add(routine)
        if self.on_routines_changed is not None:
            self.on_routines_changed()
        return Remembered("added", str(self.routine_book.path), line=routine.name)

    def finish_decisions(self) -> None:
        """At start: approvals a kill interrupted (applied or not, not yet dropped) are finished."""
        for proposal in self.memory.pending.unfinished():
            try:
                self._apply(proposal)
            except Exception as exc:  # a vault gone, a full disk: never a reason not to start
                log.warning("could not finish approving proposal #%d (%s): %s; it waits again", proposal.id, proposal.describe(), _why(exc))
                self.memory.pending.reopen(proposal.id)
                continue
            self.memory.pending.finish(proposal.id)
            log.info("finished approving proposal #%d, interrupted when tarsd stopped: %s", proposal.id, proposal.describe())
        try:  # the memory review's approvals and their history notes (tarsd/memory/review_apply.py)
            self.memory_review.recover()
        except Exception as exc:  # a vault gone, a full disk: never a reason not to start
            log.warning("could not finish the memory review's interrupted approvals: %s; they are finished at the next start", _why(exc))
        self.memory_review.noticed()  # lines written while tarsd was stopped: noted as new since its last look

    def warnings(self) -> list[str]:
        found = []
        for name in (self.config.memory.semantic_file, self.config.memory.procedural_file, self.config.memory.sessions_dir):
            try:
                self.memory.path(name)
            except OutsideVault as exc:
                found.append(f"{exc}: never read or written; {exc.hint}")
        return found + self.recall.warnings(self.memory.read_semantic())

    def memory_status(self) -> dict[str, object]:
        """For status: the size of Memory.md, the recall mode in force, and the write guard."""
        recall = self.recall.select(self.memory.read_semantic())
        settings = self.config.memory
        noted = self.model_lines()
        return {
            "file": settings.semantic_file,
            "mode": recall.mode,
            "lines": recall.lines,
            "tokens": recall.tokens,
            "budget_lines": settings.prompt_lines,
            "budget_tokens": settings.prompt_tokens,
            "core_section": settings.core_section,
            "core_found": recall.core_found,
            "always_lines": recall.always_lines,
            "always_tokens": recall.always_tokens,
            "facts": len(memory_lines(self.memory.read_semantic())) + len(memory_lines(self.memory.read_procedural())),
            "vectors_pending": self.vectors.pending(),
            "vectors_known": self.vectors.known(),
            **self.memory.guard.describe(),
            "missing": not self._exists(settings.semantic_file),
            "model_lines": noted[:10],
            "model_lines_total": len(noted),
            "pending_rules": len(self.memory.pending.list()),
        }

    def _exists(self, name: str) -> bool:
        try:
            return self.memory.path(name).is_file()
        except OutsideVault:
            return True  # there, but refused: warnings() says so

    def model_lines(self) -> list[dict[str, str]]:
        """Lines the model stored in the memory files (stamped by:model), newest first, for the
        user to see in status and undo with forget."""
        found = []
        files = self.config.memory
        # As the prompt reads them (a file out of the vault reads empty, a huge line is cut).
        for rel, text in ((files.semantic_file, self.memory.read_semantic()), (files.procedural_file, self.memory.read_procedural())):
            lines = memory_lines(text)
            found += [(line.stamp.date, line.index, rel, line) for line in lines if line.stamp is not None and line.stamp.by_model]
        found.sort(key=lambda entry: (entry[0], entry[1]), reverse=True)
        return [{"line": line.text, "file": rel, "noted": line.stamp.describe()} for _, _, rel, line in found]

    def close(self) -> None:
        self.memory_review.close()
        self.memory.guard.stop()
        self.vectors.close()


def transcript_parts(messages: list[ChatMessage]) -> tuple[str, list[str]]:
    """(title, bullets) for a session log written without the model's summary: what each side
    said, one bullet a message, each bounded; the title from the user's first words."""
    said = [m for m in messages if m.role in ("user", "assistant") and m.content.strip()]
    title = transcript_title(next((m.content for m in said if m.role == "user"), ""))
    return title, [said_line("you" if message.role == "user" else "tars", message.content) for message in said]


def transcript_title(first: str) -> str:
    """A transcript log's title: the user's first words."""
    words = " ".join(printable(first).split())
    return f"Conversation: {words[:60].rstrip()}" + ("…" if len(words) > 60 else "") if words else "Conversation"


def said_line(who: str, text: str) -> str:
    """One line of a session log's transcript: who said it, and what, on one bounded line."""
    text = " ".join(printable(text).split())
    if len(text) > TRANSCRIPT_MESSAGE_CHARS:
        text = text[: TRANSCRIPT_MESSAGE_CHARS - 1] + "…"
    return f"- {who}: {text}"


def session_log_stem(started: datetime, title: str) -> str:
    """A session log's file name without the extension: YYYY-MM-DD-HHMM-<slug of the title>."""
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:50] or "conversation"
    return f"{started:%Y-%m-%d-%H%M}-{slug}"


def session_log_text(
    conversation_id: str, started: datetime, ended: datetime, messages: int, title: str, bullets: list[str], tool_calls: list[str] = ()
) -> str:
    """A session log: front matter, the title, when it took place, one line per bullet (a summary's
    point or a transcript's message), then the tool calls (tool_calls_section)."""
    return "\n".join(
        [
            "---",
            "type: session-log",
            f"conversation: {conversation_id}",
            # A routine's run (tarsd/speaking/runner.py) was started by tars's scheduler, not by the user.
            *(["source: scheduler"] if conversation_id.startswith("routine:") else []),
            f"started: {started.isoformat(timespec='seconds')}",
            f"ended: {ended.isoformat(timespec='seconds')}",
            f"messages: {messages}",
            "---",
            f"# {title}",
            "",
            f"_{started:%Y-%m-%d %H:%M} – {ended:%H:%M}_",
            "",
            *(bullets or ["- (no details)"]),
            *tool_calls,
            "",
        ]
    )


def tool_calls_section(messages: list[ChatMessage]) -> list[str]:
    """The session log's list of other servers' tool calls in a span, as they happened (written by
    tars, not summarised by the model): when, server, tool, arguments, what came of it, in how long,
    how much came back, and who approved it."""
    arguments = {}
    lines = []
    for message in messages:
        for call in message.tool_calls:
            arguments[call.id] = json.dumps(call.arguments, ensure_ascii=False)
        record = message.record
        if message.role != "tool" or record is None:
            continue
        shown = arguments.get(message.tool_call_id, "{}")
        if len(shown) > TOOL_LOG_ARGUMENT_CHARS:
            shown = shown[: TOOL_LOG_ARGUMENT_CHARS - 1] + "…"
        when = datetime.fromtimestamp(message.at).astimezone().strftime("%H:%M:%S")
        took = f", {record.duration_ms / 1000:.1f} s" if record.duration_ms else ""
        size = f", {record.chars:,} characters back" if record.chars else ""
        by = f", approved by {record.approved_by}" if record.approved_by else ""
        # A line of its own whatever the arguments hold: JSON escapes line breaks.
        lines.append(f"- {when} {record.server} {record.tool} {shown}: {record.outcome}{took}{size}{by}")
    return ["", "## Tool calls", "", *lines] if lines else []


def loggable(conversation_id: str) -> str:
    """A conversation as the log may name it: a channel's conversation is named after its sender
    (``whatsapp:<number>``), and a phone number never goes into the log."""
    channel, colon, _ = conversation_id.partition(":")
    return f"a {channel} conversation" if colon else conversation_id


def _why(exc: Exception) -> str:
    if isinstance(exc, ProviderError):
        return exc.message
    if isinstance(exc, OutsideVault):
        return f"{exc}; {exc.hint}"
    return str(exc)
