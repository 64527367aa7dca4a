"""The memory handlers: remember and forget a fact or a rule, feedback on an answer, the rule
review, and the rules the model proposed waiting for the user's decision.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from tarsctl.protocol import (
    ApplyReview,
    DecideRule,
    Feedback,
    FeedbackSaved,
    Forget,
    Forgotten,
    MemoryCandidate,
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
from tarsd.serve.handlers.common import Peer
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
