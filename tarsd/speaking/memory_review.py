"""A routine whose run is the memory review (``review = "memory"`` in routines.toml, no prompt): the
runner's hook for it (tarsd/speaking/runner.py calls ``run_review``).

The run asks the doors' dispatcher for a review as the routine (a review only proposes, so a
routine may: tarsctl/authority.py), and says what it proposed where the routine delivers, each
proposal whole, with where to decide them. A quiet routine says nothing when nothing new was proposed.
Nothing is approved here: only the user decides, at the terminal, on the page or with /review
memory on the phone.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter

from tarsctl.protocol import Error, MemoryReview, MemoryReviewReply, Message
from tarsd.routines.book import Routine
from tarsd.routines.ledger import Run
from tarsd.serve.handlers.common import Peer

_ids = itertools.count(1)
_NAMES = {
    "duplicate": "duplicate",
    "supersede": "superseded line",
    "expired": "expired line",
    "budget": "section to move",
    "missing": "fact to add",
}


async def run_review(runner, routine: Routine, peer: Peer, run: Run) -> Run:
    """Run the memory review for ``routine``'s occurrence ``run`` and deliver what it found."""
    final: Message | None = None
    async for reply in runner.dispatch(MemoryReview(id=next(_ids)), peer):
        final = reply
    if not isinstance(final, MemoryReviewReply):
        why = f"{final.message} ({final.hint})" if isinstance(final, Error) else "the review gave no answer"
        return await asyncio.to_thread(runner.ledger.finish, run.id, "failed", why)
    detail = "; ".join(final.notes)
    if routine.quiet and not final.new:
        return await asyncio.to_thread(runner.ledger.finish, run.id, "quiet", detail)
    text = summary(final)
    item = await runner.deliveries.post(
        f"routine:{routine.name}", routine.name, text, runner.targets(routine), run.id, routine.note, routine.heading
    )
    return await asyncio.to_thread(runner.ledger.finish, run.id, "spoke", detail, "", item.id)


def summary(reply: MemoryReviewReply) -> str:
    """What a review found, for a message: each new proposal whole, and where to decide them."""
    if not reply.new:
        waiting = f" {len(reply.waiting)} proposals from earlier reviews wait for you." if reply.waiting else ""
        return f"Memory review: nothing new to propose for {reply.path}.{waiting}" + _notes(reply)
    kinds = Counter(p.kind for p in reply.new)
    counted = ", ".join(f"{count} {_NAMES.get(kind, kind)}{'s' if count > 1 else ''}" for kind, count in sorted(kinds.items()))
    many = "s" if len(reply.new) > 1 else ""
    lines = [f"Memory review: {len(reply.new)} new proposal{many} for {reply.path} ({counted}); {len(reply.waiting)} wait in all."]
    lines += [f"- #{p.id} {p.text}" for p in reply.new]
    lines.append("Nothing changes until you approve: `tarsctl memory review`, the web page, or /review memory in Telegram or WhatsApp.")
    return "\n".join(lines) + _notes(reply)


def _notes(reply: MemoryReviewReply) -> str:
    said = [*reply.left, *reply.notes]
    return ("\n(" + "; ".join(said) + ")") if said else ""
