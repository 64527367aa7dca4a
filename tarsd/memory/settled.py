"""Proposals the vault shows done already: closed, never applied twice.

Each machine of a synced vault keeps its own proposals (in its own index database: pending_rules.py).
The same change can wait on both (an AI tool over MCP asked each machine's tars), or the user can
approve it on one machine, or make it by hand. The vault line is the truth: once the memory file
reads as the proposal would make it, the proposal has nothing left to do, so this machine closes its
copy (``PendingRules.close``) instead of waiting for an approval that would change a second line:

- a rule: Procedural.md holds a line that reads the same;
- a removal: no line reads as the one it would remove;
- a replacement: a line reads as the new text, none as the old one, and tars's journal shows the
  replacement made (on any machine: one write that removed the old line and added the new). Without
  that, the new text may be another line that happens to read so, and the old one edited away by
  hand: the proposal waits for the user to reject it (as on one machine).

A routine the model proposed goes into this machine's own routines file, not the vault: it is left
alone. ``settle`` runs when a memory file changes and at start (tarsd/sync/coordinator.py).
"""

from __future__ import annotations

import logging

from tarsd.memory import facts
from tarsd.memory.files import MemoryFiles
from tarsd.memory.journal import JournalView
from tarsd.memory.pending_rules import REMOVE, REPLACE, RULE, PendingRule

log = logging.getLogger(__name__)


def done_by_vault(proposal: PendingRule, keys: set[str], file: str = "", journal: JournalView | None = None) -> str:
    """Why the file (its lines' keys) shows ``proposal`` done already; "" when it does not."""
    if proposal.action == RULE and facts.key(proposal.rule) in keys:
        return "the rule is in the file already"
    if proposal.action == REMOVE and facts.key(proposal.rule) not in keys:
        return "the line is no longer in the file"
    old, new = facts.key(proposal.target), facts.key(proposal.rule)
    if proposal.action == REPLACE and new in keys and old not in keys and journal is not None and (file, old, new) in journal.replacements:
        return "the line was replaced as proposed already"
    return ""


def settle(memory: MemoryFiles, kinds: set[str] | frozenset[str] = frozenset({"semantic", "procedural"})) -> list[tuple[PendingRule, str]]:
    """Close the proposals waiting here that the memory files of ``kinds`` show done; (proposal, why) for
    each closed. The caller leaves out a file that is not there or not whole now (a sync tool between
    two versions): its absence proves nothing."""
    if memory.pending is None:
        return []
    closed, keys_of = [], {}
    journal = memory.journal.view() if memory.journal is not None else None
    for proposal in memory.pending.list():
        if proposal.action not in (RULE, REMOVE, REPLACE) or proposal.kind not in kinds:
            continue
        if proposal.kind not in keys_of:
            keys_of[proposal.kind] = {facts.key(line.text) for line in memory.lines(proposal.kind)}
        rel = memory.rel(memory.target(proposal.kind))
        why = done_by_vault(proposal, keys_of[proposal.kind], rel, journal)
        if why and memory.pending.close(proposal.id):
            log.info(
                "closed proposal #%d (%s): %s in %s (approved on another machine, or made by hand)",
                proposal.id,
                proposal.describe(),
                why,
                rel,
            )
            closed.append((proposal, f"{why} in {rel}"))
    return closed
