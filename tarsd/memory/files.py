"""The memory files in the vault: Memory.md (semantic), the procedural rules, the feedback
files; remember, replace and forget, with provenance and the write guard.

The daemon writes memory, never the model: tools only ask. Every write re-reads the file,
applies the change and swaps a temp file in (tarsd/vault/atomic.py), so an edit saved in Obsidian
a moment earlier is kept; lines tars wrote are then watched for a few minutes so that an
editor's stale copy cannot lose them (tarsd/memory/guard.py). Each line tars writes carries
a provenance stamp (tarsd/memory/provenance.py); lines without one are the user's and are changed
only when the user asks (replace, forget).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tarsd.config.settings import MemoryConfig
from tarsd.memory import facts, provenance
from tarsd.memory.guard import WINDOW_SECONDS, WriteGuard
from tarsd.memory.journal import Journal, line_key
from tarsd.memory.lines import (
    LIST_PREFIX,
    MemoryLine,
    clip_long_lines,
    drop_emptied_heading,
    insert_under,
    join_lines,
    locate,
    memory_lines,
    split_lines,
    swap_line,
)
from tarsd.memory.pending_rules import REMOVE, REPLACE, RULE, PendingRule, PendingRules
from tarsd.memory.text import fact_text, section_text
from tarsd.vault.atomic import atomic_update, read_text, read_version
from tarsd.vault.files import OutsideVault, owned_file, read_owned
from tarsd.vault.root import make_folders, require_vault

__all__ = ["atomic_update", "read_text", "read_version", "MemoryFiles", "Remembered", "Forgotten", "Candidate"]

log = logging.getLogger(__name__)

DEFAULT_SECTION = "Notes"
RULES_SECTION = "Rules"
# A fact joins the section holding its most similar line when they are at least this close.
SECTION_COSINE = 0.35
SECTION_OVERLAP = 0.5
# Lines offered by forget: at least this good a match (facts.match_score).
FORGET_MIN_SCORE = 0.3

ADDED, REPLACED, PENDING = "added", "replaced", "pending"
DUPLICATE, POSSIBLE_UPDATE = facts.DUPLICATE, facts.UPDATE
MODES = ("", "replace", "force")
KINDS = ("semantic", "procedural")


class Cosines(Protocol):
    """What MemoryFiles needs from the line vectors (tarsd/memory/vectors.py)."""

    def cosines(self, text: str, lines: Sequence[str]):
        """An array of cosines (NaN: not known yet), or None without the model."""


@dataclass(frozen=True, slots=True)
class Remembered:
    status: str  # added | replaced | duplicate | possible_update | pending (a rule the model proposed)
    path: str  # relative to the vault
    section: str = ""
    line: str = ""  # the fact as written (added, replaced)
    similar: str = ""  # the line it repeats (duplicate) or resembles (possible_update), or replaced
    reason: str = ""  # for a possible update: what differs
    replaced: str = ""  # the old line (replaced)
    by_model: bool = False  # the model wrote it (stamped by:model)
    pending_id: int = 0  # pending: the proposal's number, for tarsctl rules approve/reject

    @property
    def added(self) -> bool:
        return self.status in (ADDED, REPLACED)

    @property
    def duplicate_of(self) -> str:
        return self.similar if self.status == DUPLICATE else ""


@dataclass(frozen=True, slots=True)
class Candidate:
    line: str
    section: str
    line_number: int  # 1-based
    score: float
    provenance: str = ""  # "added 2026-11-22 in chat nvim"; empty for the user's own lines


@dataclass(frozen=True, slots=True)
class Forgotten:
    path: str
    candidates: list[Candidate] = field(default_factory=list)
    removed: str = ""  # the line removed (after a confirmation)
    pending_id: int = 0  # a model asked to remove a line the user wrote: the proposal waiting for the user
    # After a removal: a save bringing the line back within this many seconds is taken for an
    # editor's stale copy and undone (guard.py); the user is told, with how to keep it instead.
    stale_copy_seconds: float = 0.0


class _Gone(Exception):
    """The line a change was about left the file between the look and the write."""


class MemoryFiles:
    def __init__(self, vault: Path, config: MemoryConfig, vectors: Cosines | None = None):
        self.vault = vault
        self.config = config
        self.vectors = vectors
        self._lock = threading.RLock()  # one writer of memory files at a time
        self.guard = WriteGuard(self.verify)
        self.guard.elsewhere = self._changed_elsewhere
        # Told a vault path after tars changed a memory file (a remember, a forget, the guard's
        # repair), so the index follows without each caller re-indexing by hand. It must not block.
        self.on_written: Callable[[str], None] | None = None
        self._refused: set[str] = set()  # memory files found symlinked out of the vault (logged once)
        self.pending: PendingRules | None = None  # where the model's rules wait for the user (none: refused)
        # tars's journal of the lines it writes and removes, in the vault for the other machines of a
        # synced vault (tarsd/memory/journal.py); set by tarsd/sync, None: not kept.
        self.journal: Journal | None = None

    def path(self, name: str) -> Path:
        """A memory file's path; raises OutsideVault if a symlink takes it out of the vault."""
        return owned_file(self.vault, name)

    @property
    def semantic(self) -> Path:
        return self.path(self.config.semantic_file)

    @property
    def procedural(self) -> Path:
        return self.path(self.config.procedural_file)

    def target(self, kind: str) -> Path:
        if kind not in KINDS:
            raise ValueError(f"kind must be semantic or procedural, not {kind!r}")
        return self.semantic if kind == "semantic" else self.procedural

    def rel(self, path: Path) -> str:
        return path.relative_to(self.vault).as_posix()

    def read_semantic(self) -> str:
        return self._read_for_prompt(self.config.semantic_file)

    def read_procedural(self) -> str:
        return self._read_for_prompt(self.config.procedural_file)

    def _read_for_prompt(self, name: str) -> str:
        """A memory file as the prompt gets it: a line far longer than a fact is cut."""
        try:
            return clip_long_lines(read_owned(self.vault, self.path(name)))
        except OutsideVault as exc:  # never into a prompt; remember, forget and status say so
            if name not in self._refused:
                self._refused.add(name)
                log.warning("%s: left out of the prompt: %s", exc, exc.hint)
            return ""

    def lines(self, kind: str = "semantic") -> list[MemoryLine]:
        return memory_lines(read_owned(self.vault, self.target(kind)))

    # ---- remember ----

    def remember(
        self,
        fact: str,
        kind: str = "semantic",
        section: str = "",
        mode: str = "",
        replace_line: str = "",
        conversation: str = "",
        by_model: bool = False,
    ) -> Remembered:
        """Add a fact (semantic, under a fitting heading of Memory.md) or a rule (procedural).
        Every write path ends here: the fact and the section pass tarsd/memory/text.py's check
        first, and what it refuses leaves the file untouched.

        mode "": refused when the file already says the same (duplicate) or something close
        that differs (possible_update: the caller asks the user). "replace": the line it
        resembles (or ``replace_line``, exactly) is replaced in place; with nothing alike the
        fact is added. "force": added even beside a similar line (never twice word for word).

        ``by_model``: the model asked (the chat tool, an MCP client). Its facts are stamped by:model;
        its rules, and its replacements of lines it did not write, are not written at all but wait in
        ``self.pending`` for the user's approval."""
        fact = LIST_PREFIX.sub("", fact_text(fact, kind)).strip()
        section = section_text(section)
        if not fact:
            raise ValueError("nothing to remember: the fact is empty")
        if len(fact) > facts.MAX_FACT_CHARS:
            raise ValueError(
                f"a fact of {len(fact):,} characters is too long to remember (at most {facts.MAX_FACT_CHARS:,}: "
                "Memory.md goes into every prompt); put the text in a note and remember the gist"
            )
        if mode not in MODES:
            raise ValueError(f"mode must be '', 'replace' or 'force', not {mode!r}")
        if replace_line.strip() and mode != "replace":
            raise ValueError("replace_line goes with mode 'replace'")
        target = self.target(kind)
        rel = self.rel(target)
        if by_model and kind == "procedural":
            return self._propose(fact, target, conversation)
        with self._lock:
            existing = memory_lines(read_owned(self.vault, target))
            texts = [line.text for line in existing]
            old: MemoryLine | None = None
            cosines = None
            if mode == "replace" and replace_line.strip():
                old = self._find(existing, replace_line)
                if old is None:
                    raise ValueError(
                        f"the line {replace_line.strip()!r} is not in {rel} any more; remember the fact again to see the lines now"
                    )
            elif mode == "force":  # kept beside anything similar, but never twice word for word
                same = next((line for line in existing if facts.key(line.text) == facts.key(fact)), None)
                if same is not None:
                    return Remembered(DUPLICATE, rel, same.section, similar=same.text, reason="word for word")
            else:
                cosines = self._cosines(fact, texts)
                verdict = facts.judge(fact, texts, cosines)
                similar = existing[verdict.index] if verdict.index >= 0 else None
                if similar is not None and mode == "":
                    return Remembered(verdict.kind, rel, similar.section, similar=similar.text, reason=verdict.reason)
                old = similar  # mode "replace": the line it repeats or updates, if any
            stamp = provenance.new_stamp(conversation, by_model=by_model)
            if old is not None and by_model and not _models(old):
                # The line is the user's word: a note the model read may have asked it to change it.
                return self._propose(fact, target, conversation, REPLACE, kind, old.text)
            if old is not None:
                return self._replace(target, old, fact, stamp)
            if not section.strip() and kind == "semantic" and cosines is None:
                cosines = self._cosines(fact, texts)
            chosen = section.strip() or (self._section_for(fact, existing, cosines) if kind == "semantic" else RULES_SECTION)
            line = f"- {fact} {stamp.render()}"
            self._write(target, lambda text: insert_under(text, chosen, line), added=[(line, chosen)])
        return Remembered(ADDED, rel, chosen, line=fact, by_model=by_model)

    def _propose(
        self, text: str, target: Path, conversation: str, action: str = RULE, kind: str = "procedural", old: str = ""
    ) -> Remembered:
        """A change the model may not make itself (a rule; replacing or removing a line it did not
        write): kept for the user's approval, the memory file untouched."""
        rel = self.rel(target)
        if action == RULE:
            lines = memory_lines(read_owned(self.vault, target))
            same = next((line for line in lines if facts.key(line.text) == facts.key(text)), None)
            if same is not None:
                return Remembered(DUPLICATE, rel, same.section, similar=same.text, reason="word for word")
        if self.pending is None:
            raise ValueError("what the model proposes needs the index database to wait in; ask the user to make the change")
        proposal, _ = self.pending.propose(text, provenance.new_stamp(conversation).conversation, action, kind, old)
        log.info("the model proposed a change, waiting for the user's approval (#%d): %s", proposal.id, proposal.describe())
        section = RULES_SECTION if action == RULE else ""
        return Remembered(PENDING, rel, section, line=proposal.rule, replaced=old, by_model=True, pending_id=proposal.id)

    def apply_proposal(self, proposal: PendingRule) -> Remembered:
        """A proposal the user approved, applied as the user's own change. Applying one already
        applied changes nothing (an approval interrupted by a kill is finished at the next start):
        a rule is never written twice, and a remove or a replace counts the lines reading as the
        line it changes before it writes (``PendingRules.counted``); finding fewer, it was written."""
        target = self.target(proposal.kind)
        rel = self.rel(target)
        if proposal.action == RULE:
            return self.remember(proposal.rule, proposal.kind, mode="force", conversation=proposal.conversation)
        wanted = proposal.rule if proposal.action == REMOVE else proposal.target
        done = Remembered("removed", rel, replaced=proposal.rule)
        if proposal.action == REPLACE:
            done = Remembered(REPLACED, rel, line=proposal.rule, replaced=proposal.target)
        with self._lock:
            lines = memory_lines(read_owned(self.vault, target))
            now = len(self._matching(lines, wanted))
            if proposal.lines_before is not None and now < proposal.lines_before:
                return done  # written before tarsd stopped: a second line reading the same stays
            if proposal.lines_before is None and self.pending is not None:
                self.pending.counted(proposal.id, now)
            if proposal.action == REMOVE:
                if now:
                    self.forget("", proposal.kind, confirm_line=proposal.rule)
                return done  # a line already gone is what the user wanted
            old = self._find(lines, proposal.target)
            if old is None:
                raise ValueError(
                    f"the line {proposal.target!r} is no longer in {rel}, so the proposal to replace it cannot be applied; reject it"
                )
            return self._replace(target, old, proposal.rule, provenance.new_stamp(proposal.conversation))

    def _replace(self, target: Path, old: MemoryLine, fact: str, stamp: provenance.Stamp) -> Remembered:
        prefix = LIST_PREFIX.match(old.raw)
        line = f"{prefix.group(0) if prefix else '- '}{fact} {stamp.render()}"
        old_key = facts.key(old.text)

        def change(text: str) -> str:
            index = locate(text, old, old_key)
            if index is None:
                raise _Gone
            return swap_line(text, index, line)

        try:
            self._write(target, change, added=[(line, old.section)], removed=[old.raw])
        except _Gone:
            raise ValueError(f"the line {old.text!r} left {self.rel(target)} meanwhile; remember the fact again") from None
        return Remembered(REPLACED, self.rel(target), old.section, line=fact, similar=old.text, replaced=old.text, by_model=stamp.by_model)

    def _cosines(self, text: str, lines: list[str]):
        return self.vectors.cosines(text, lines) if self.vectors is not None and lines else None

    @staticmethod
    def _matching(lines: list[MemoryLine], wanted: str) -> list[MemoryLine]:
        """The lines a client's ``wanted`` names: those of its exact text, else those that read the same."""
        wanted = LIST_PREFIX.sub("", provenance.strip(wanted.strip())).strip()
        exact = [line for line in lines if line.text == wanted]
        return exact or [line for line in lines if facts.key(line.text) == facts.key(wanted)]

    @classmethod
    def _find(cls, lines: list[MemoryLine], wanted: str) -> MemoryLine | None:
        """A line named by the client: its exact text, else one that reads the same."""
        matching = cls._matching(lines, wanted)
        return matching[0] if matching else None

    @staticmethod
    def _section_for(fact: str, existing: list[MemoryLine], cosines) -> str:
        placed = [i for i, line in enumerate(existing) if line.section]
        if not placed:
            return DEFAULT_SECTION
        if cosines is not None:
            known = [i for i in placed if cosines[i] == cosines[i]]
            if known:
                best = max(known, key=lambda i: cosines[i])
                if cosines[best] >= SECTION_COSINE:
                    return existing[best].section
        new = facts.features(fact)
        scores = {i: facts.closeness(new, facts.features(existing[i].text)) for i in placed}
        best = max(scores, key=scores.get)
        return existing[best].section if scores[best] >= SECTION_OVERLAP else DEFAULT_SECTION

    def append_rules(self, rules: list[str]) -> int:
        """Rules the user approved in /review: kept even beside a similar rule (never twice).
        All are checked before the first is written: one refused rule leaves the file as it was."""
        for rule in rules:
            fact_text(rule, "procedural")
        return sum(1 for rule in rules if self.remember(rule, "procedural", mode="force").added)

    # ---- forget ----

    def forget(self, text: str, kind: str = "semantic", confirm_line: str = "", limit: int = 5, by_model: bool = False) -> Forgotten:
        """Without ``confirm_line``: the lines closest to ``text``, best first, for the user to
        choose from. With it: that exact line is removed. ``by_model`` (an AI tool over MCP asked):
        only lines stamped by:model may go; the user's own lines are removed by the user."""
        require_vault(self.vault)  # a missing vault has no lines to offer, and none to remove
        target = self.target(kind)
        rel = self.rel(target)
        with self._lock:
            existing = memory_lines(read_owned(self.vault, target))
            if confirm_line.strip():
                old = self._find(existing, confirm_line)
                if old is None:
                    raise ValueError(f"{confirm_line.strip()!r} is not in {rel} (any more); run forget again to see its lines now")
                if by_model and not _models(old):
                    # A note the model read could ask it to delete what the user wrote: that waits for the user.
                    proposed = self._propose(old.text, target, "", REMOVE, kind)
                    return Forgotten(rel, [], pending_id=proposed.pending_id)
                old_key = facts.key(old.text)

                def change(current: str) -> str:
                    index = locate(current, old, old_key)
                    if index is None:
                        raise _Gone
                    lines = split_lines(current)
                    del lines[index]
                    if old.stamp is not None:  # a line tars wrote, maybe under a heading it made for it
                        drop_emptied_heading(lines, index)
                    return join_lines(lines, current)

                try:
                    self._write(target, change, removed=[old.raw])
                except _Gone:
                    return Forgotten(rel, [], removed=old.text)  # gone already: what the user wanted, and nothing watched
                return Forgotten(rel, [], removed=old.text, stale_copy_seconds=WINDOW_SECONDS)
        if not text.strip():
            raise ValueError("say what to forget: some words of the line")
        texts = [line.text for line in existing]
        cosines = self._cosines(text, texts)
        scored = []
        for i, line in enumerate(existing):
            cosine = None if cosines is None or cosines[i] != cosines[i] else float(cosines[i])
            score = facts.match_score(text, line.text, cosine)
            if score >= FORGET_MIN_SCORE:
                shown = line.stamp.describe() if line.stamp is not None else ""
                scored.append(Candidate(line.text, line.section, line.index + 1, round(score, 3), shown))
        scored.sort(key=lambda c: (-c.score, c.line_number))
        return Forgotten(rel, scored[: max(1, limit)])

    # ---- the memory review (tarsd/memory/review.py): a change the user approved, or its undo ----

    @property
    def lock(self) -> threading.RLock:
        """Held by a writer of memory files; the memory review holds it from reading a file to writing it."""
        return self._lock

    def rewrite(
        self,
        kind: str,
        change: Callable[[str], str | None],
        added: list[tuple[str, str]] | None = None,
        removed: list[str] | None = None,
        journaled: bool = True,
    ) -> str | None:
        """Apply ``change`` to a memory file's text, under the memory lock and guarded like a remember
        or a forget (the lines ``added`` and ``removed`` are watched against an editor's stale save);
        the text written, None when ``change`` left it as it was. The memory review's approved change
        or undo is journaled like tars's own writes (another machine's merge then knows the line went);
        a change tars makes for another machine (a conflict copy merged in, a line put back from the
        journal: tarsd/sync) passes ``journaled=False``: the journal holds each line where it was written."""
        with self._lock:
            return self._write(self.target(kind), change, added, removed, journaled=journaled)

    def section_for(self, fact: str) -> str:
        """The Memory.md heading a new fact would go under (as remember picks it, without the model)."""
        existing = memory_lines(read_owned(self.vault, self.semantic))
        return self._section_for(fact, existing, None)

    # ---- writing, and the guard ----

    def _write(
        self,
        target: Path,
        change: Callable[[str], str | None],
        added: list[tuple[str, str]] | None = None,
        removed: list[str] | None = None,
        journaled: bool = True,
    ) -> str | None:
        make_folders(self.vault, target.parent)
        written = atomic_update(target, change, **self._guarded(target, added or [], removed or []))
        if self.journal is not None and journaled and written is not None:
            try:
                self.journal.wrote(self.rel(target), added or [], removed or [])
            except (OSError, OutsideVault) as exc:  # the line is written: the journal only helps other machines
                log.warning("%s: the change is written, but tars's journal in the vault could not be: %s", self.rel(target), exc)
        if self.on_written is not None:
            self.on_written(self.rel(target))
        return written

    def _guarded(self, target: Path, added: list[tuple[str, str]], removed: list[str]) -> dict[str, Callable]:
        """atomic_update's hooks into the write guard, for a write adding and removing these lines."""
        return {
            "repair": lambda text, st: self.guard.repair(target, text, st),
            "written": lambda st: self.guard.wrote(target, st, added, removed),
            "displaced": lambda before, theirs, ours: self.guard.displaced(target, before, theirs, ours),
        }

    def _changed_elsewhere(self, target: Path, line: str, removed: bool, after: float) -> bool:
        """For the guard: whether another machine's tars wrote (``removed``: the line tars removed here)
        or removed (a line tars wrote here) this line after ``after``, as the journal shows."""
        if self.journal is None:
            return False
        view = self.journal.view()
        where = (self.rel(target), line_key(line))
        event = view.last_add.get(where) if removed else view.last_removal.get(where)
        return event is not None and event.t > after and event.machine != self.journal.machine

    def verify(self, target: Path) -> None:
        """The guard's check: put back lines a write race lost (see tarsd/memory/guard.py)."""
        with self._lock:
            if not self.guard.watching(target):
                return
            before = self.guard.restored + self.guard.removed_again
            atomic_update(target, lambda text: None, **self._guarded(target, [], []))
            repaired = self.guard.restored + self.guard.removed_again != before
        if repaired and self.on_written is not None:
            self.on_written(self.rel(target))

    def changed(self, rel: str) -> None:
        """A watcher event for a vault path: memory files tars wrote lately are checked."""
        if rel in (self.config.semantic_file, self.config.procedural_file):
            try:
                self.guard.changed(self.path(rel))
            except OutsideVault:  # a symlink out of the vault: tars never wrote there
                pass

    # ---- feedback: /w and /r ----

    def record_feedback(self, good: bool, question: str, answer: str, note: str = "") -> str:
        name = self.config.rewards_file if good else self.config.corrections_file
        stamp = time.strftime("%Y-%m-%d %H:%M")
        entry = [f"## {stamp}", f"- user: {_one_line(question)}", f"- tars: {_one_line(answer)}"]
        if note.strip():
            entry.append(f"- note: {_one_line(note)}")
        block = "\n".join(entry) + "\n"
        make_folders(self.vault, self.path(name).parent)
        atomic_update(self.path(name), lambda text: (text.rstrip("\n") + "\n\n" if text.strip() else "") + block)
        return name

    def load_feedback(self) -> tuple[str, str]:
        return read_owned(self.vault, self.path(self.config.corrections_file)), read_owned(self.vault, self.path(self.config.rewards_file))

    def archive_feedback(self) -> list[str]:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        archived = []
        for name in (self.config.corrections_file, self.config.rewards_file):
            path = self.path(name)
            if path.exists():
                target = path.with_name(f"{path.stem}-{stamp}{path.suffix}")
                os.replace(path, target)
                archived.append(target.relative_to(self.vault).as_posix())
        return archived


# Control characters other than tab and line ends: a NUL would make the vault file binary
# (never indexed again), the others show as nothing or garble the editor.
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")


def _models(line: MemoryLine) -> bool:
    """A line the model noted itself (stamped by:model): the only lines a model may change."""
    return line.stamp is not None and line.stamp.by_model


def printable(text: str) -> str:
    """Text from a client or a model as it may go into a vault file."""
    return _CONTROL.sub("", text)


def _one_line(text: str, limit: int = 500) -> str:
    flat = " ".join(printable(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
