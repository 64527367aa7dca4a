"""The memory handlers: remember and forget a fact or a rule, feedback on an answer, the rule
review, the rules the model proposed waiting for the user's decision, and the memory review (its
proposals, the user's decisions on them, the undo).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from tarsctl.protocol import (
    ApplyReview,
    DecideMemoryProposals,
    DecideRule,
    Feedback,
    FeedbackSaved,
    Forget,
    Forgotten,
    MemoryCandidate,
    MemoryProposal,
    MemoryProposals,
    MemoryProposalsDecided,
    MemoryProposalsReply,
    MemoryReview,
    MemoryReviewReply,
    MemoryUndo,
    MemoryUndone,
    Message,
    PendingRule,
    PendingRules,
    PendingRulesReply,
    Remember,
    Remembered,
    Review,
    ReviewApplied,
    ReviewProposals,
    RuleDecided,
)
from tarsd.chat.memory_review import review_memory
from tarsd.memory.review import describe
from tarsd.memory.review_store import Proposal as ReviewProposal
from tarsd.routines.book import Routine
from tarsd.serve.handlers.common import Peer, RequestError
from tarsd.serve.parts import DaemonParts


async def remember(daemon: DaemonParts, request: Remember, _peer: Peer) -> AsyncIterator[Message]:
    done = await asyncio.to_thread(
        daemon.assistant.memory.remember,
        request.fact,
        request.kind,
        request.section,
        request.mode,
        request.replace_line,
        request.conversation,
        request.by_model,
    )
    yield Remembered(
        id=request.id,
        added=done.added,
        path=done.path,
        section=done.section,
        duplicate_of=done.duplicate_of,
        status=done.status,
        similar=done.similar,
        reason=done.reason,
        replaced=done.replaced,
        line=done.line,
        pending_id=done.pending_id,
    )


async def forget(daemon: DaemonParts, request: Forget, _peer: Peer) -> AsyncIterator[Message]:
    done = await asyncio.to_thread(
        daemon.assistant.memory.forget, request.text, request.kind, request.confirm_line, request.limit, request.by_model
    )
    candidates = [MemoryCandidate(c.line, c.section, c.line_number, c.score, c.provenance) for c in done.candidates]
    yield Forgotten(
        id=request.id,
        path=done.path,
        candidates=candidates,
        removed=done.removed,
        pending_id=done.pending_id,
        stale_copy_seconds=done.stale_copy_seconds,
    )


async def feedback(daemon: DaemonParts, request: Feedback, _peer: Peer) -> AsyncIterator[Message]:
    path = await asyncio.to_thread(daemon.assistant.feedback, request.conversation, request.good, request.note)
    yield FeedbackSaved(id=request.id, path=path)


async def review(daemon: DaemonParts, request: Review, _peer: Peer) -> AsyncIterator[Message]:
    rules, anything = await asyncio.to_thread(daemon.assistant.review, request.provider, request.model)
    yield ReviewProposals(id=request.id, rules=rules, nothing_to_review=not anything)


async def apply_review(daemon: DaemonParts, request: ApplyReview, _peer: Peer) -> AsyncIterator[Message]:
    added, archived = await asyncio.to_thread(daemon.assistant.apply_review, request.rules)
    yield ReviewApplied(id=request.id, added=added, archived=archived)


async def pending_rules(daemon: DaemonParts, request: PendingRules, _peer: Peer) -> AsyncIterator[Message]:
    waiting = await asyncio.to_thread(daemon.assistant.pending_rules)
    files = daemon.config.memory
    rules = [
        PendingRule(
            p.id,
            p.rule,
            p.conversation,
            p.proposed_at,
            p.action,
            p.target,
            {"procedural": files.procedural_file, "routine": str(daemon.routine_book.path)}.get(p.kind, files.semantic_file),
        )
        for p in waiting
    ]
    yield PendingRulesReply(id=request.id, rules=rules, path=daemon.config.memory.procedural_file)


async def decide_rule(daemon: DaemonParts, request: DecideRule, _peer: Peer) -> AsyncIterator[Message]:
    proposal, written = await asyncio.to_thread(daemon.assistant.decide_rule, request.rule_id, request.approve, request.rule)
    yield RuleDecided(
        id=request.id,
        rule_id=proposal.id,
        rule=proposal.rule,
        approved=request.approve,
        status=written.status if written is not None else "rejected",
        path=written.path if written is not None else "",
        action=proposal.action,
    )


# ---- the memory review (tarsd/memory/review.py; docs/memory.md#the-memory-review) ----

REVIEW_ROUTINE = "memory-review"


def _proposal(proposal: ReviewProposal) -> MemoryProposal:
    body = proposal.body
    return MemoryProposal(
        id=proposal.id,
        kind=proposal.kind,
        text=describe(proposal),
        remove=[item["raw"] for item in proposal.removes] if proposal.kind != "budget" else [],
        keep=(body.get("keep") or {}).get("raw", ""),
        add=(body.get("add") or {}).get("text", ""),
        section=body.get("section", "") or (body.get("add") or {}).get("section", ""),
        note=body.get("note", ""),
        why=proposal.why,
        source=proposal.source,
        quote=body.get("quote", ""),
        review_id=proposal.review_id,
        proposed_at=proposal.proposed_at,
    )


def _who(peer: Peer) -> str:
    """Who decided, for the history note: "at the terminal", "on the web page", "you in Telegram (…)"."""
    return peer.who or {"socket": "at the terminal", "http": "on the web page", "routine": "by a routine"}.get(peer.door, peer.door)


async def memory_review(daemon: DaemonParts, request: MemoryReview, peer: Peer) -> AsyncIterator[Message]:
    path = daemon.config.memory.semantic_file
    if request.schedule.strip():
        name = await asyncio.to_thread(_schedule_review, daemon, request.schedule.strip(), list(request.deliver))
        if daemon.clock is not None:
            daemon.clock.rearm()
        yield MemoryReviewReply(id=request.id, routine=name, path=path)
        return
    source = peer.principal.value if peer.door != "routine" else peer.who
    result = await asyncio.to_thread(review_memory, daemon.assistant, source, request.sessions, request.provider, request.model)
    yield MemoryReviewReply(
        id=request.id,
        review_id=result.review_id,
        new=[_proposal(p) for p in result.new],
        waiting=[_proposal(p) for p in result.waiting],
        left=result.left,
        notes=result.notes,
        lines=result.lines,
        cap=result.cap,
        known=result.known,
        path=path,
    )


def _schedule_review(daemon: DaemonParts, schedule: str, deliver: list[str]) -> str:
    """The routine that runs the memory review on ``schedule``: added, or its schedule changed."""
    book = daemon.routine_book
    changes: dict[str, object] = {"schedule": schedule}
    if deliver:
        changes["deliver"] = tuple(deliver)
    if book.get(REVIEW_ROUTINE) is not None:
        book.update(REVIEW_ROUTINE, **changes)
    else:
        book.add(Routine(name=REVIEW_ROUTINE, created=time.time(), review="memory", by="user", **changes))
    return REVIEW_ROUTINE


async def memory_proposals(daemon: DaemonParts, request: MemoryProposals, _peer: Peer) -> AsyncIterator[Message]:
    waiting = await asyncio.to_thread(daemon.assistant.memory_review.proposals)
    yield MemoryProposalsReply(id=request.id, proposals=[_proposal(p) for p in waiting], path=daemon.config.memory.semantic_file)


async def decide_memory_proposals(daemon: DaemonParts, request: DecideMemoryProposals, peer: Peer) -> AsyncIterator[Message]:
    if request.seen and len(request.seen) != len(request.ids):
        raise RequestError(
            "bad_request", "seen must give one text per id, in the same order", "send the text of each proposal shown, or none"
        )
    seen = dict(zip(request.ids, request.seen, strict=True)) if request.seen else None
    review = daemon.assistant.memory_review
    decided = await asyncio.to_thread(review.decide, list(request.ids), request.approve, request.kind, seen, _who(peer))
    change = decided.change
    yield MemoryProposalsDecided(
        id=request.id,
        approve=request.approve,
        decided=decided.approved if request.approve else decided.rejected,
        gone=decided.gone,
        change_id=change.id if change is not None else 0,
        undo=f"tarsctl memory undo {change.id}" if change is not None else "",
        history=decided.history,
        path=daemon.config.memory.semantic_file,
        removed=[item["raw"] for item in change.summary.get("removed", [])] if change is not None else [],
        added=[item["raw"] for item in change.summary.get("added", [])] if change is not None else [],
    )


async def memory_undo(daemon: DaemonParts, request: MemoryUndo, _peer: Peer) -> AsyncIterator[Message]:
    change, exact, history = await asyncio.to_thread(daemon.assistant.memory_review.undo, request.change_id)
    yield MemoryUndone(
        id=request.id,
        change_id=change.id,
        exact=exact,
        restored=[item["raw"] for item in change.summary.get("removed", [])],
        removed=[item["raw"] for item in change.summary.get("added", [])],
        history=history,
        path=change.path,
    )
