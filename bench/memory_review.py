"""The memory review's benchmarks: the model-free checks' precision and recall per kind on generated
histories, the review's speed and memory at 1,000 lines, and the whole path from a session log to
an approved line with the fake model.

    python bench/memory_review.py quality            # held-out seeds (and the tuning seeds, marked)
    python bench/memory_review.py quality --vectors  # the same with the line vectors of the local model
    python bench/memory_review.py speed              # a model-free review of a 1,000-line Memory.md: time, memory
    python bench/memory_review.py path               # a real tarsd, the fake model: session log -> proposal -> approved line
    python bench/memory_review.py all

The histories come from tests/harness/memory_histories.py (a year of one user's Memory.md, with the
truth of what it should say at the end). The seeds were fixed before any tuning, and only the
tuning seeds were looked at while the checks were tuned; the held-out seeds were run once the
checks were settled. A third set runs the held-out seeds with phrasings added to the generator
(UNSEEN_SAY, UNSEEN_CHANGE, UNSEEN_TRANSIENT there) that the checks were never tuned on either.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from common import print_table  # noqa: E402

from harness.memory_histories import DUPLICATE, EXPIRED, KEEP, SUPERSEDED, History, generate  # noqa: E402

TUNING_SEEDS = (1, 2, 3)
HELD_OUT_SEEDS = tuple(range(101, 111))
LINES = 1000
TARGETS = {"duplicate": (0.95, 0.95), "supersede": (0.9, 0.85), "expired": (0.9, 0.9)}  # (precision, recall)
TRUTH_OF = {"duplicate": DUPLICATE, "supersede": SUPERSEDED, "expired": EXPIRED}


@dataclass
class Score:
    proposed: int = 0
    correct: int = 0
    truth: int = 0
    found: int = 0

    def add(self, other: Score) -> None:
        self.proposed += other.proposed
        self.correct += other.correct
        self.truth += other.truth
        self.found += other.found


def first_seen(history: History) -> dict[str, tuple[object, object]]:
    """When a review run each Sunday would have first seen each line (by its text's key), and the
    Sunday before, which did not find it (None for the lines the first Sunday found)."""
    from tarsd.memory import facts
    from tarsd.memory.lines import memory_lines

    seen: dict[str, tuple[object, object]] = {}
    before = None
    for day, text in history.snapshots:
        for line in memory_lines(text):
            seen.setdefault(facts.key(line.text), (day, before))
        before = day
    return seen


def findings_for(history: History, vectors=None) -> tuple[list, list]:
    """The checks' findings on the history's final Memory.md, and its lines."""
    from tarsd.memory import facts
    from tarsd.memory.lines import memory_lines
    from tarsd.memory.review_detect import Context, review_lines

    lines = [line for line in memory_lines(history.text) if line.raw.startswith("- ")]
    seen = first_seen(history)
    cosine = neighbours = None
    if vectors is not None:
        cosine, neighbours = vectors(lines)
    context = Context(
        history.end,
        lambda line: seen.get(facts.key(line.text), (None, None))[0],
        cosine,
        neighbours,
        absent=lambda line: seen.get(facts.key(line.text), (None, None))[1],
    )
    return review_lines(lines, context), lines


def score(history: History, findings: list, lines: list, missed: list[int] | None = None) -> tuple[dict[str, Score], list[str]]:
    """Per kind: proposals, those whose claim is true, truth lines, those found; and every proposal
    that would remove a line the truth keeps (a fact no other line still says)."""
    assert len(lines) == len(history.lines), "the generator's lines and the file's do not line up"
    slot = [g.rsplit(":", 1)[0] for g in history.groups]
    version = [int(g.rsplit(":", 1)[1]) for g in history.groups]
    scores = {kind: Score() for kind in TARGETS}
    removed = {f.line for f in findings if f.kind in TARGETS}
    found: set[int] = set()
    for f in findings:
        if f.kind not in TARGETS:
            continue
        x, k = f.line, f.keep
        if f.kind == "duplicate":
            ok = history.groups[x] == history.groups[k]
        elif f.kind == "supersede":
            ok = slot[x] == slot[k] and version[x] < version[k]
        else:
            ok = history.truth[x] == EXPIRED
        scores[f.kind].proposed += 1
        scores[f.kind].correct += ok
        if ok:
            found.add(x)
    # A group of lines saying one fact (slot and value) keeps one line: which one does not matter.
    # So each group's lines to remove are counted as found up to the number the truth removes.
    members: dict[tuple[str, str], list[int]] = {}
    for i, label in enumerate(history.truth):
        members.setdefault((label if label == EXPIRED else "fact", history.groups[i] if label != EXPIRED else str(i)), []).append(i)
    for (_, _), group in members.items():
        labels = [history.truth[i] for i in group]
        hits = sum(1 for i in group if i in found)
        short = max(0, sum(1 for label in labels if label != KEEP) - hits)
        if missed is not None and short:
            missed.extend([i for i in group if i not in found and history.truth[i] != KEEP][:short])
        for kind, label in TRUTH_OF.items():
            due = labels.count(label)
            if due:
                scores[kind].truth += due
                scores[kind].found += min(due, hits)
                hits -= min(due, hits)
    lost = []
    for i in removed:
        if history.truth[i] != KEEP:
            continue
        others = [j for j, g in enumerate(history.groups) if g == history.groups[i] and j != i and j not in removed]
        if not others:
            why = next(f for f in findings if f.line == i)
            keep = f" (keeping: {lines[why.keep].text})" if why.keep >= 0 else ""
            lost.append(f"{why.kind}: {lines[i].text}{keep} [{why.why}]")
    return scores, lost


def quality(args) -> None:
    vectors = local_vectors() if args.vectors else None
    sets = [("tuning", TUNING_SEEDS, False), ("held-out", HELD_OUT_SEEDS, False), ("held-out, with unseen phrasings", HELD_OUT_SEEDS, True)]
    if args.seeds is not None:
        sets = [("given", tuple(args.seeds), args.unseen)]
    for name, seeds, unseen in sets:
        total = {kind: Score() for kind in TARGETS}
        lost_all: list[str] = []
        lines_seen = 0
        for seed in seeds:
            history = generate(seed, LINES, unseen_phrasings=unseen)
            findings, lines = findings_for(history, vectors)
            scores, lost = score(history, findings, lines)
            lines_seen += len(lines)
            for kind in TARGETS:
                total[kind].add(scores[kind])
            lost_all += [f"seed {seed}: {entry}" for entry in lost]
            if args.verbose:
                show_errors(history, findings, lines)
        rows = []
        for kind, s in total.items():
            precision = s.correct / s.proposed if s.proposed else 1.0
            recall = s.found / s.truth if s.truth else 1.0
            want_p, want_r = TARGETS[kind]
            ok = "yes" if precision >= want_p and recall >= want_r else "NO"
            rows.append([kind, s.truth, s.proposed, s.correct, f"{precision:.3f}", f"{recall:.3f}", f">= {want_r} at >= {want_p}", ok])
        title = (
            f"{name} seeds {seeds[0]}..{seeds[-1]} ({len(seeds)} histories, {lines_seen:,} lines; vectors: {'yes' if vectors else 'no'})"
        )
        print_table(["kind", "truth", "proposed", "true", "precision", "recall", "target (recall at precision)", "met"], rows, title)
        print(f"proposals that would remove a line the truth keeps: {len(lost_all)} (target 0)")
        for entry in lost_all[:20]:
            print("   ", entry)
        print()


def show_errors(history: History, findings: list, lines: list) -> None:
    """Wrong proposals and missed lines, for tuning (only ever run on the tuning seeds)."""
    slot = [g.rsplit(":", 1)[0] for g in history.groups]
    version = [int(g.rsplit(":", 1)[1]) for g in history.groups]
    for f in findings:
        if f.kind not in TARGETS:
            continue
        x, k = f.line, f.keep
        ok = (
            history.groups[x] == history.groups[k]
            if f.kind == "duplicate"
            else slot[x] == slot[k] and version[x] < version[k]
            if f.kind == "supersede"
            else history.truth[x] == EXPIRED
        )
        if not ok:
            keep = f" || {lines[k].raw}" if k >= 0 else ""
            print(f"WRONG {f.kind} [{history.truth[x]} {history.groups[x]}]: {lines[x].raw}{keep}  ({f.why})")
    missed: list[int] = []
    score(history, findings, lines, missed)
    for i in missed:
        partners = [lines[j].raw for j, g in enumerate(history.groups) if slot[j] == slot[i] and j != i]
        print(f"MISSED {history.truth[i]} {history.groups[i]}: {lines[i].raw}   <-> {partners[:3]}")


def local_vectors():
    """Cosines from the local model (all-MiniLM-L6-v2), as tarsd has them once it is loaded."""
    import numpy as np
    from common import MODEL_DIR

    from tarsd.config.settings import EmbedderConfig
    from tarsd.embed.embedder import LocalEmbedder
    from tarsd.memory import facts

    embedder = LocalEmbedder(EmbedderConfig(kind="local", model_dir=str(MODEL_DIR)))
    if not embedder.wait_ready(300):
        raise SystemExit(f"the model did not load: {embedder.unavailable_reason()}")

    def make(lines):
        matrix = np.asarray(embedder.embed([facts.clean(line.text) for line in lines]), dtype=np.float32)
        sims = matrix @ matrix.T
        order = np.argsort(-sims, axis=1)

        def cosine(i, j):
            return float(sims[i, j])

        def neighbours(i):
            return [int(j) for j in order[i, 1 : 1 + 5] if sims[i, j] >= 0.8]

        return cosine, neighbours

    return make


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("quality", "speed", "path", "all"))
    parser.add_argument("--vectors", action="store_true", help="with the local model's line vectors")
    parser.add_argument("--seeds", type=int, nargs="*", help="these seeds only (tuning)")
    parser.add_argument("--verbose", action="store_true", help="print each wrong and missed line (tuning seeds only)")
    parser.add_argument("--unseen", action="store_true", help="with --seeds: also the phrasings the checks were not tuned on")
    args = parser.parse_args()
    if args.what in ("quality", "all"):
        quality(args)


if __name__ == "__main__":
    main()
