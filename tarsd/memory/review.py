"""The memory review: tars looks at Memory.md as a whole (and, with a model, at what the session logs
said that Memory.md never got), and *proposes*; the user approves or rejects each proposal, every
applied change can be undone, and the history of what changed is a note in the vault.

What it proposes (docs/memory.md#the-memory-review):

- without a model (tarsd/memory/review_detect.py): to remove a duplicate, a line another updates
  (superseded: it goes to the history), a line whose time has passed; to move a section out of a
  file past its budget;
- with a model (tarsd/chat/memory_review.py reads the session logs since the last review): to add
  a durable fact a session log stated, citing its line (``sessions/...md#L12``). The model's words
  are only ever a proposal to *add* a line, checked here: one printable line, found in the log line
  it cites, not already in Memory.md.

Guard rails: one review proposes removing at most [memory] review_max_remove_percent of the file's
lines (10%, at least one; those waiting from earlier reviews count), and says what it left for the
next; a change proposed once is never proposed again, whatever was decided (review_store.py);
applying is the user's act alone (the authority table), in one journaled step that a kill cannot
leave half done (review_apply.py); user lines keep their provenance (lines move whole, stamp and
all, to the history and back on undo).
"""

from __future__ import annotations

import logging
import math
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date

import numpy as np

from tarsd.config.settings import MemoryConfig
from tarsd.memory import facts
from tarsd.memory.files import MemoryFiles
from tarsd.memory.lines import MemoryLine
from tarsd.memory.review_apply import Applier
from tarsd.memory.review_detect import (
    BUDGET,
    DUPLICATE,
    EXPIRED,
    NEAR_COSINE,
    NEAR_COUNT,
    SUPERSEDE,
    Context,
    Finding,
    find_budget,
    review_lines,
)
from tarsd.memory.review_git import git_dates
from tarsd.memory.review_store import APPLIED, GONE, PENDING, Change, NewProposal, Proposal, ReviewStore, line_key
from tarsd.memory.text import fact_text
from tarsd.store.database import Store

log = logging.getLogger(__name__)

MISSING = "missing"
KINDS = (DUPLICATE, SUPERSEDE, EXPIRED, BUDGET, MISSING)
# Removals proposed first when the cap leaves some out: the surest first.
_ORDER = {DUPLICATE: 0, EXPIRED: 1, SUPERSEDE: 2}
MAX_FACT_CHARS = 300  # a durable fact from a session log is a line, not a paragraph
NEIGHBOUR_BLOCK = 256  # rows of the cosine product at a time: memory stays small at any file size
# After a change to Memory.md, the review notes its lines once the file has been quiet this long (a line
# cut and pasted meanwhile keeps its dates anyway: review_store.MISSING_GRACE).
OBSERVE_SETTLE_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class SessionFact:
    """A fact the model says a session log states: its words, and the log line it cites."""

    text: str
    path: str  # the log, relative to the vault
    line: int  # 1-based
    quote: str  # that line of the log, as read


@dataclass(slots=True)
class ReviewResult:
    review_id: int
    new: list[Proposal]
    waiting: list[Proposal]
    left: list[str] = field(default_factory=list)  # what the cap left for the next review
    notes: list[str] = field(default_factory=list)  # what else to know (no model, facts dropped)
    lines: int = 0
    cap: int = 0
    known: int = 0  # found again, but proposed before (decided or waiting): not proposed twice


@dataclass(slots=True)
class Decided:
    approved: list[int] = field(default_factory=list)
    rejected: list[int] = field(default_factory=list)
    gone: list[int] = field(default_factory=list)  # their lines changed since: nothing done
    change: Change | None = None
    history: str = ""


class MemoryReview:
    def __init__(
        self, files: MemoryFiles, store: Store, config: MemoryConfig, vectors=None, settle_seconds: float = OBSERVE_SETTLE_SECONDS
    ):
        self.files = files
        self.settle_seconds = settle_seconds
        self._timer: threading.Timer | None = None
        self._timer_lock = threading.Lock()
        self._closed = False
        self.config = config
        self.vectors = vectors
        self.store = ReviewStore(store)
        self.applier = Applier(files.vault, self.store, lambda: files.semantic, self._write, config.history_folder, self._written)
        self._lock = threading.RLock()  # one review or decision at a time

    def _write(self, change: Callable[[str], str | None], added: list[tuple[str, str]], removed: list[str]) -> str | None:
        return self.files.rewrite("semantic", change, added, removed)

    def _written(self, rel: str) -> None:
        if self.files.on_written is not None:
            self.files.on_written(rel)

    # ---- looking ----

    def lines(self) -> list[MemoryLine]:
        return [line for line in self.files.lines("semantic") if len(line.raw) <= facts.LONG_LINE_CHARS]

    def observe(self, lines: Sequence[MemoryLine] | None = None) -> None:
        """Note the day each line was first seen (a line without a stamp has no other date). An empty
        or missing Memory.md teaches nothing (a sync tool putting it back, an editor mid-save) and
        makes no line look missing."""
        with self._lock:
            lines = self.lines() if lines is None else lines
            if lines:
                self.store.observe(line_key(line.text) for line in lines)

    def noticed(self) -> None:
        """Memory.md changed (a watcher event): look at it once it has been quiet OBSERVE_SETTLE_SECONDS,
        so every line gets its first-seen date whether or not a review runs, and a look never lands
        in the middle of an edit (a line cut and not yet pasted)."""
        with self._timer_lock:
            if self._timer is not None:
                self._timer.cancel()
            if self._closed:
                return
            self._timer = threading.Timer(self.settle_seconds, self._look)
            self._timer.daemon = True
            self._timer.start()

    def _look(self) -> None:
        try:
            self.observe()
        except Exception:  # a look is a help, never a failure
            log.exception("memory review: could not note the lines of Memory.md")

    def close(self) -> None:
        with self._timer_lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()

    def run(
        self, source: str = "", found: Sequence[SessionFact] = (), sessions_until: float | None = None, notes: Sequence[str] = ()
    ) -> ReviewResult:
        """One review: the model-free checks on Memory.md, the facts the model found in the session
        logs (``found``), the cap, and what was proposed before left out. Nothing in the file changes."""
        with self._lock:
            lines = self.lines()
            self.observe(lines)
            written_by, written_after = self.dates(lines)
            context = Context(date.today(), written_by, *self._cosines(lines), absent=written_after)
            findings = review_lines(lines, context) + find_budget(lines, self.config.prompt_lines, self.config.core_section)
            candidates = [self._from_finding(f, lines) for f in findings]
            candidates += self._from_sessions(found, lines)
            known = self.store.known(c.key for c in candidates)
            fresh = [c for c in candidates if c.key not in known]
            waiting = self._fresh_waiting(self.store.waiting())
            cap = self.cap(len(lines))
            room = max(0, cap - sum(p.body.get("removes", 0) for p in waiting))
            fresh.sort(key=lambda c: (_ORDER.get(c.kind, 9), c.body.get("remove", [{}])[0].get("line", 0) if c.body.get("remove") else 0))
            chosen, left = [], Counter()
            for candidate in fresh:
                if candidate.removes and candidate.removes > room:
                    left[candidate.kind] += 1
                    continue
                room -= candidate.removes
                chosen.append(candidate)
            review_id = self.store.start_review(source, len(lines))
            new = self.store.add(review_id, chosen)
            said = [
                f"{count} more {_named(kind, count)} left for the next review: one review proposes removing at most "
                f"{cap} of {len(lines)} lines ([memory] review_max_remove_percent = {self.config.review_max_remove_percent})"
                for kind, count in sorted(left.items())
            ]
            self.store.finish_review(review_id, len(new), "; ".join(said), sessions_until)
            log.info(
                "memory review #%d (%s): %d new proposals, %d left for the next review",
                review_id,
                source or "?",
                len(new),
                sum(left.values()),
            )
            return ReviewResult(
                review_id, new, self._fresh_waiting(self.store.waiting()), said, list(notes), len(lines), cap, len(candidates) - len(fresh)
            )

    def dates(self, lines: Sequence[MemoryLine]) -> tuple[Callable[[MemoryLine], float | None], Callable[[MemoryLine], float | None]]:
        """When each line without a stamp was written, as two moments (in the file by, not in it yet):
        from the review's own looks (review_store.observe), and from git when the vault is kept in
        git (review_git.py). The tighter of each; moments that disagree (in the file before it was
        written) are both dropped: a wrong date is worse than none."""
        seen = self.store.seen()
        git = git_dates(self.files.vault, self.config.semantic_file) if any(line.stamp is None for line in lines) else {}
        bounds: dict[int, tuple[float | None, float | None]] = {}
        for line in lines:
            looked = seen.get(line_key(line.text), (None, None))
            committed = git.get(line.index, (None, None, ""))
            if committed[2] != line.raw:
                committed = (None, None, "")  # saved since git read it: another line stands there
            by = [t for t in (looked[0], committed[0]) if t is not None]
            after = [t for t in (looked[1], committed[1]) if t is not None]
            latest, earliest = (min(by) if by else None), (max(after) if after else None)
            if latest is not None and earliest is not None and earliest >= latest:
                latest = earliest = None
            bounds[line.index] = (latest, earliest)
        return (lambda line: bounds.get(line.index, (None, None))[0]), (lambda line: bounds.get(line.index, (None, None))[1])

    def cap(self, lines: int) -> int:
        """Lines one review may propose to remove: the configured share of the file, at least one."""
        return max(1, math.floor(lines * self.config.review_max_remove_percent / 100))

    def _cosines(self, lines: Sequence[MemoryLine]) -> tuple[Callable | None, Callable | None]:
        """Cosine and nearest lines from the line vectors already at hand (none is made now: the
        rest are made in the background for the next review)."""
        if self.vectors is None or not self.vectors.ready():
            return None, None
        found = self.vectors.vectors([line.text for line in lines], embed_missing=0)
        known = [i for i, v in enumerate(found) if v is not None]
        if len(known) < 2:
            return None, None
        matrix = np.stack([found[i] for i in known]).astype(np.float32)
        position = {line: row for row, line in enumerate(known)}
        near: dict[int, list[int]] = {}
        for start in range(0, len(known), NEIGHBOUR_BLOCK):
            sims = matrix[start : start + NEIGHBOUR_BLOCK] @ matrix.T
            for offset, row in enumerate(sims):
                order = np.argsort(-row)[: NEAR_COUNT + 1]
                near[known[start + offset]] = [known[j] for j in order if row[j] >= NEAR_COSINE and known[j] != known[start + offset]]

        def cosine(i: int, j: int) -> float | None:
            if i in position and j in position:
                return float(matrix[position[i]] @ matrix[position[j]])
            return None

        return cosine, lambda i: near.get(i, [])

    def _from_finding(self, finding: Finding, lines: Sequence[MemoryLine]) -> NewProposal:
        def line_of(index: int) -> dict:
            line = lines[index]
            return {"raw": line.raw, "text": line.text, "line": line.index, "section": line.section, "by": _who(line)}

        if finding.kind == BUDGET:
            moved = [line_of(i) for i in finding.lines]
            note = f"{self.config.semantic_file.removesuffix('.md')}/{_file_name(finding.section)}.md"
            body = {"remove": moved, "section": finding.section, "note": note, "removes": 0}
            key = f"budget|{finding.section}|{'|'.join(sorted(facts.key(m['text']) for m in moved))}"
            why = f"{finding.why}: the section {finding.section!r} ({len(moved)} lines) would move to {note}, linked from where it stood"
            return NewProposal(BUDGET, key, body, why, f"{self.config.semantic_file} {finding.section}", 0)
        body = {"remove": [line_of(finding.line)], "removes": 1}
        source = f"{self.config.semantic_file}:{lines[finding.line].index + 1}"
        if finding.keep >= 0:
            body["keep"] = line_of(finding.keep)
            source += f" and :{lines[finding.keep].index + 1}"
        key = f"{finding.kind}|{lines[finding.line].raw}|{lines[finding.keep].raw if finding.keep >= 0 else ''}"
        return NewProposal(finding.kind, key, body, finding.why, source, 1)

    def _from_sessions(self, found: Sequence[SessionFact], lines: Sequence[MemoryLine]) -> list[NewProposal]:
        """The model's facts that hold up: one printable line, stated in the line they cite, not in Memory.md."""
        texts = [line.text for line in lines]
        proposals, keys = [], set()
        for item in found:
            try:
                fact = fact_text(item.text, "semantic").strip()
            except ValueError as exc:
                log.info("memory review: a fact from %s#L%d was dropped: %s", item.path, item.line, exc)
                continue
            if not fact or len(fact) > MAX_FACT_CHARS or not supported(fact, item.quote):
                log.info("memory review: a fact from %s#L%d was dropped: not what that line says", item.path, item.line)
                continue
            if facts.judge(fact, texts).kind == facts.DUPLICATE or facts.key(fact) in keys:
                continue
            keys.add(facts.key(fact))
            section = self.files.section_for(fact)
            body = {"add": {"text": fact, "section": section}, "quote": item.quote, "removes": 0}
            source = f"{item.path}#L{item.line}"
            proposals.append(
                NewProposal(MISSING, f"missing|{facts.key(fact)}", body, "a durable fact a session log stated, not in Memory.md", source, 0)
            )
        return proposals

    # ---- deciding ----

    def proposals(self) -> list[Proposal]:
        """The proposals waiting, oldest first (those whose lines changed since are set aside as gone)."""
        with self._lock:
            return self._fresh_waiting(self.store.waiting())

    def _fresh_waiting(self, waiting: list[Proposal]) -> list[Proposal]:
        if not waiting:
            return waiting
        present = Counter(line.raw for line in self.files.lines("semantic"))
        gone = [p.id for p in waiting if any(present[item["raw"]] == 0 for item in p.removes)]
        if gone:
            self.store.set_state(gone, GONE, only_from=PENDING)
        return [p for p in waiting if p.id not in gone]

    def decide(self, ids: Sequence[int], approve: bool, kind: str = "", seen: dict[int, str] | None = None, who: str = "") -> Decided:
        """Approve (apply, as one change, undoable) or reject (remembered, never proposed again)
        these proposals, or all waiting of ``kind``."""
        with self._lock:
            chosen = list(dict.fromkeys(ids))
            if kind:
                if kind not in KINDS:
                    raise ValueError(f"no kind of proposal {kind!r}: they are {', '.join(KINDS)}")
                chosen += [p.id for p in self._fresh_waiting(self.store.waiting()) if p.kind == kind and p.id not in chosen]
            if not chosen:
                raise ValueError("no proposal to decide" + (f": none of kind {kind} waits" if kind else ""))
            claimed = self.store.claim(chosen, approve, seen, describe)
            if not approve:
                log.info("the user rejected memory proposals %s", ", ".join(f"#{p.id}" for p in claimed))
                return Decided(rejected=[p.id for p in claimed])
            with self.files.lock:
                try:
                    change, gone, history = self.applier.apply(claimed, who)
                except BaseException:
                    self.store.set_state([p.id for p in claimed], PENDING, only_from="approving")
                    raise
            approved = [p.id for p in claimed if p.id not in gone]
            if change is not None:
                log.info("the user approved memory proposals %s: change %d", ", ".join(f"#{i}" for i in approved), change.id)
            return Decided(approved=approved, gone=gone, change=change, history=history)

    def undo(self, change_id: int = 0) -> tuple[Change, bool, str]:
        """Undo an applied change (0: the last): (the change, byte for byte, the history note)."""
        with self._lock, self.files.lock:
            change = self.store.last_applied() if change_id == 0 else self.store.change(change_id)
            if change is None:
                raise ValueError("no memory change to undo" if change_id == 0 else f"there is no memory change {change_id}")
            if change.state != APPLIED:
                raise ValueError(f"memory change {change.id} is {change.state}, not applied: nothing to undo")
            exact, history = self.applier.undo(change)
            log.info(
                "the user undid memory change %d (%s)", change.id, "byte for byte" if exact else "line by line, keeping edits made since"
            )
            undone = self.store.change(change.id)
            assert undone is not None
            return undone, exact, history

    def recover(self) -> None:
        """At start: finish or roll back approvals a kill interrupted."""
        with self._lock, self.files.lock:
            for said in self.applier.recover():
                log.info("memory review: %s", said)

    def sessions_read_until(self) -> float | None:
        return self.store.sessions_read_until()


def describe(proposal: Proposal) -> str:
    """What a proposal changes, in one line, whole: what the user sees and approves (a decision that
    names the text it saw is refused when the proposal says anything else)."""
    body = proposal.body
    if proposal.kind == MISSING:
        add = body["add"]
        where = f" under {add['section']}" if add.get("section") else ""
        return f"add {add['text']!r}{where} (from {proposal.source})"
    if proposal.kind == BUDGET:
        return f"move the section {body['section']!r} ({len(proposal.removes)} lines) to the note {body['note']}, linked from Memory.md"
    line = proposal.removes[0]
    where = f"remove {line['text']!r} (line {line['line'] + 1})"
    keep = body.get("keep")
    if proposal.kind == DUPLICATE and keep:
        return f"{where}: line {keep['line'] + 1} says the same: {keep['text']!r}"
    if proposal.kind == SUPERSEDE and keep:
        return f"{where}: superseded by line {keep['line'] + 1}: {keep['text']!r} (it goes to the history)"
    return f"{where}: {proposal.why}"


def supported(fact: str, quote: str) -> bool:
    """Whether a log line says the fact: most of the fact's content words are in it."""
    mine, theirs = facts.features(fact).content, facts.features(quote).content
    if not mine:
        return False
    shared = len(mine & theirs)
    return shared >= min(2, len(mine)) and shared / len(mine) >= 0.5


def _who(line: MemoryLine) -> str:
    if line.stamp is None:
        return "you"
    return "the model" if line.stamp.by_model else "tars, on your word"


def _day(when: float | None) -> date | None:
    return None if when is None else date.fromtimestamp(when)


def _named(kind: str, count: int) -> str:
    name = {DUPLICATE: "duplicate", SUPERSEDE: "superseded line", EXPIRED: "expired line"}.get(kind, kind)
    return name if count == 1 else name + "s"


def _file_name(section: str) -> str:
    """A section's name as a note's file name: path characters out."""
    name = "".join(" " if c in '/\\:*?"<>|#^[]' else c for c in section).strip()
    return " ".join(name.split()) or "Section"
