"""Shared benchmark helpers: where the data and model live, test vaults, the engine, timing, tables.

Data and model come from ``../shared`` next to the repository (override with TARS_SHARED;
the model directory alone with TARS_MODEL_DIR).
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import resource
import sys
import time
from pathlib import Path

SHARED = Path(os.environ.get("TARS_SHARED") or Path(__file__).resolve().parents[2] / "shared")
SCIFACT = SHARED / "data" / "beir-scifact"
DENDRON = SHARED / "data" / "vaults" / "dendron-site"
MODEL_DIR = Path(os.environ.get("TARS_MODEL_DIR") or SHARED / "models" / "all-MiniLM-L6-v2-int8")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---- data ----


def _jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def scifact_corpus() -> list[dict]:
    """SciFact abstracts: dicts with _id, title, text, in file order."""
    return _jsonl(SCIFACT / "corpus.jsonl")


def scifact_queries() -> dict[str, str]:
    """Query id -> text, in file order."""
    return {q["_id"]: q["text"] for q in _jsonl(SCIFACT / "queries.jsonl")}


def scifact_qrels(split: str = "test") -> dict[str, set[str]]:
    """Query id -> relevant doc ids (score > 0), queries in file order."""
    qrels: dict[str, set[str]] = {}
    with (SCIFACT / "qrels" / f"{split}.tsv").open(encoding="utf-8") as handle:
        next(handle)  # header
        for line in handle:
            qid, doc_id, score = line.split("\t")
            if int(score) > 0:
                qrels.setdefault(qid, set()).add(doc_id)
    return qrels


def note_markdown(title: str, text: str) -> str:
    return f"# {title}\n\n{text}\n"


def build_vault(dest: Path, n: int) -> int:
    """Write n notes of real text into dest and return n.

    The pool is every SciFact abstract (``scifact/{id}.md``) plus the dendron-site notes
    (``dendron/``, copied byte for byte). Up to the pool size a deterministic sample of it is
    written; beyond it, extra notes (``mixed/``) each join the abstracts of two different
    documents under a second heading. Titles of the extra notes are numbered so that no chunk
    repeats an existing one (which would hit the embedding cache and flatter the figures).
    """
    docs = scifact_corpus()
    pool = [(f"scifact/{d['_id']}.md", note_markdown(d["title"], d["text"]).encode()) for d in docs]
    pool += [(f"dendron/{p.name}", p.read_bytes()) for p in sorted(DENDRON.glob("*.md"))]
    rng = random.Random(0)
    if n <= len(pool):
        notes = rng.sample(pool, n)
    else:
        notes = pool
        for k in range(n - len(pool)):
            a, b = rng.sample(docs, 2)
            text = f"# {a['title']} ({k})\n\n{a['text']}\n\n## {b['title']}\n\n{b['text']}\n"
            notes.append((f"mixed/{k:05d}.md", text.encode()))
    for rel, data in notes:
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return len(notes)


# ---- the engine ----


def open_engine(vault: Path, db: Path, embedder: str = "local"):
    """An Engine on vault with its index at db; embedder "local" (the shared model) or "none"."""
    from tarsd.config.settings import load_config
    from tarsd.search.engine import Engine

    model_dir = str(MODEL_DIR) if embedder == "local" else None
    return Engine(load_config(vault_path=str(vault), index_db_path=str(db), embedder_kind=embedder, embedder_model_dir=model_dir))


class Progress:
    """A sync progress callback: reports to stderr at most every ``every`` seconds, and
    remembers when each phase ("scan", "embed") finished, in seconds since it was made."""

    def __init__(self, label: str, every: float = 30.0):
        self.label, self.every = label, every
        self.start = self.last = time.perf_counter()
        self.finished: dict[str, float] = {}

    def __call__(self, phase: str, done: int, total: int) -> None:
        now = time.perf_counter()
        if done >= total:
            self.finished.setdefault(phase, now - self.start)
        if now - self.last >= self.every or done >= total:
            self.last = now
            log(f"[{self.label}] {phase}: {done:,}/{total:,} after {now - self.start:,.0f} s")


# ---- figures ----


def index_with_vectors(engine, full: bool = False):
    """Sync the vault into the index with a vector for every chunk, logging the counts; exits when
    any chunk is left without one (a quality figure without vectors would measure nothing)."""
    report = engine.indexer.sync(full=full, progress=Progress("index"))
    counts = engine.store.counts()
    log(
        f"synced in {report.seconds:,.1f} s: {counts['files']:,} notes, {counts['chunks']:,} chunks, "
        f"{report.indexed:,} (re-)chunked, {report.vectors_embedded:,} embedded, {report.vectors_from_cache:,} vectors from cache"
    )
    if report.embedder_error or counts["pending_vectors"] or counts.get("pending_line_vectors"):
        sys.exit(f"the index has no vectors for every chunk: {report.embedder_error or 'pending vectors left'}")
    return report, counts


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (0..100), interpolating linearly between ranks like numpy."""
    xs = sorted(values)
    if not xs:
        return math.nan
    k = (len(xs) - 1) * p / 100
    lo = math.floor(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def peak_rss_mb() -> float:
    """Peak resident set size of this process (ru_maxrss, KiB on Linux) in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def proc_status_mb(key: str = "VmRSS") -> float:
    """A memory figure of /proc/self/status in MiB: VmRSS (current) or VmHWM (peak since exec;
    unlike ru_maxrss, which a child started by subprocess inherits from its parent's fork)."""
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(f"{key}:"):
                return int(line.split()[1]) / 1024
    return math.nan


def ndcg(ranked: list[str], grades: dict[str, int], k: int = 10) -> float:
    """nDCG@k with graded relevance (linear gain, as trec_eval and BEIR): grades maps doc -> grade > 0."""
    dcg = sum(grades.get(doc, 0) / math.log2(i + 1) for i, doc in enumerate(ranked[:k], 1))
    ideal = sum(g / math.log2(i + 1) for i, g in enumerate(sorted(grades.values(), reverse=True)[:k], 1))
    return dcg / ideal if ideal else 0.0


def mrr(ranked: list[str], grades: dict[str, int], k: int = 10) -> float:
    """Reciprocal rank of the first doc with a grade > 0 within the top k (0 when none)."""
    return next((1 / i for i, doc in enumerate(ranked[:k], 1) if grades.get(doc, 0) > 0), 0.0)


def recall(ranked: list[str], grades: dict[str, int], k: int) -> float:
    """Share of the docs with a grade > 0 found in the top k."""
    relevant = {doc for doc, g in grades.items() if g > 0}
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0


def met(ok: bool) -> str:
    return "yes" if ok else "NO"


_NUMERIC = re.compile(r"^[-+]?\.?\d")  # a cell starting with a number


def print_table(headers: list[str], rows: list[list[object]], title: str = "") -> None:
    """Print rows as aligned plain-text columns; columns of numbers are right-aligned."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    right = [all(_NUMERIC.match(r[i]) for r in cells if r[i]) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        return "  ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, widths, right, strict=True)).rstrip()

    if title:
        print(f"\n{title}")
    print(line(headers))
    print(line(["-" * w for w in widths]))
    for row in cells:
        print(line(row))
