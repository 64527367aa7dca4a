"""Retrieval quality on a real vault: nDCG@10, MRR@10 and Recall@5 per search mode and question style.

The golden set (default ``bench/golden/dendron.jsonl``, for the shared Dendron vault) has one
JSON object per line: ``id``, ``style`` (paraphrase, keywords, title, deep, linked), ``query``,
``relevant`` (vault-relative path -> grade, 2 = answers it, 1 = partly helps) and ``why``. It
was written by reading the notes, before any tuning, and must not be edited to suit a ranking.

The vault is indexed with the real local model through the engine, into a database cached
under the temp dir (one per worktree, vault and model; TARS_BENCH_CACHE moves it) or at --db.
A re-run only syncs what changed in the vault; when the indexing code changed (chunker,
indexer, store, vault, embedder, config) every note is re-chunked, re-using cached vectors.
Each question runs in each mode with limit 10, one result per note. nDCG uses the grades;
MRR and Recall count any grade > 0 as relevant.

    python bench/search_vault_quality.py [--modes fts vec hybrid] [--style deep linked] [--json out.json] [--explain]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from common import DENDRON, MODEL_DIR, index_with_vectors, log, met, mrr, ndcg, open_engine, print_table, recall

MODES = ("fts", "vec", "hybrid")
STYLES = ("paraphrase", "keywords", "title", "deep", "linked")
LIMIT = 10
REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "bench" / "golden" / "dendron.jsonl"
# The modules whose code decides what lands in the index; a change to any re-chunks every note.
INDEX_SOURCES = ("chunker.py", "indexer.py", "store.py", "vault.py", "embed.py", "config.py")
METRICS = ("nDCG@10", "MRR@10", "R@5")


def load_golden(path: Path, vault: Path) -> list[dict]:
    """The questions of path, checked: known style, unique id, at least one grade 2, every path in the vault."""
    questions, problems, seen = [], [], set()
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            q = json.loads(line)
            where = f"{path.name}:{number} ({q.get('id')})"
            if q.get("style") not in STYLES:
                problems.append(f"{where}: unknown style {q.get('style')!r}")
            if q.get("id") in seen:
                problems.append(f"{where}: duplicate id")
            seen.add(q.get("id"))
            relevant = q.get("relevant") or {}
            if 2 not in relevant.values() or any(g not in (1, 2) for g in relevant.values()):
                problems.append(f"{where}: grades must be 1 or 2, with at least one 2")
            problems += [f"{where}: {p} is not in the vault" for p in relevant if not (vault / p).is_file()]
            questions.append(q)
    if problems:
        sys.exit("the golden set has problems:\n  " + "\n  ".join(problems))
    return questions


def default_db(vault: Path) -> Path:
    """A cache path per worktree, vault and model, so parallel worktrees never share an index."""
    key = hashlib.sha256("\0".join(map(str, (REPO, vault.resolve(), MODEL_DIR.resolve()))).encode()).hexdigest()[:12]
    cache = Path(os.environ.get("TARS_BENCH_CACHE", Path(tempfile.gettempdir()) / "tars-bench"))
    return cache / f"{vault.name}-{key}.sqlite3"


def index_stamp() -> str:
    digest = hashlib.sha256()
    for name in INDEX_SOURCES:
        digest.update((REPO / "tarsd" / name).read_bytes())
    return digest.hexdigest()


def chunkless_notes(engine) -> set[str]:
    """Notes in the index with no chunk (front matter only, or empty): search cannot return them."""
    sql = "SELECT path FROM files f WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.file_id = f.id)"
    return {row[0] for row in engine.store.reader().execute(sql)}


def run(engine, questions: list[dict], modes: list[str]) -> list[dict]:
    """Every question in every mode: the ranked note paths and the three metrics."""
    results = []
    for q in questions:
        entry = {"id": q["id"], "style": q["style"], "query": q["query"], "relevant": q["relevant"], "modes": {}}
        for mode in modes:
            response = engine.searcher.search(q["query"], mode=mode, limit=LIMIT, per_file=True)
            if response.mode != mode:
                sys.exit(f"{mode} search fell back to {response.mode}: {'; '.join(response.warnings)}")
            ranked = [r.path for r in response.results]
            grades = q["relevant"]
            entry["modes"][mode] = {
                "ranked": ranked,
                "nDCG@10": ndcg(ranked, grades, 10),
                "MRR@10": mrr(ranked, grades, 10),
                "R@5": recall(ranked, grades, 5),
            }
        results.append(entry)
    return results


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def summary(results: list[dict], modes: list[str]) -> list[tuple[str, int, dict[str, dict[str, float]]]]:
    """(style or "all", questions, mode -> metric -> mean), overall first then each style present."""
    groups = [("all", results)] + [(s, [r for r in results if r["style"] == s]) for s in STYLES]
    return [
        (name, len(group), {m: {k: mean([r["modes"][m][k] for r in group]) for k in METRICS} for m in modes})
        for name, group in groups
        if group
    ]


def explain(results: list[dict], modes: list[str], unreachable: set[str]) -> None:
    """Per question and mode: the rank of each relevant note (- when not in the top 10) and the top 3."""
    for r in results:
        print(f"\n[{r['id']}] ({r['style']}) {r['query']}")
        for path, grade in sorted(r["relevant"].items(), key=lambda item: -item[1]):
            note = "  (no chunks: unreachable)" if path in unreachable else ""
            ranks = "  ".join(f"{m} {r['modes'][m]['ranked'].index(path) + 1 if path in r['modes'][m]['ranked'] else '-'}" for m in modes)
            print(f"  {grade} {path}: {ranks}{note}")
        for m in modes:
            top = ", ".join(p.removesuffix(".md") for p in r["modes"][m]["ranked"][:3])
            print(f"  {m:6} nDCG {r['modes'][m]['nDCG@10']:.2f}  top: {top}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--golden", type=Path, default=GOLDEN, help=f"golden set (default {GOLDEN.relative_to(REPO)})")
    parser.add_argument("--vault", type=Path, default=DENDRON, help="vault the golden set is about (default the shared Dendron vault)")
    parser.add_argument("--db", type=Path, help="index database to create or reuse (default: cached under the temp dir)")
    parser.add_argument("--full", action="store_true", help="re-chunk every note even if the indexing code did not change")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES), help="search modes (default: all three)")
    parser.add_argument("--style", nargs="+", choices=STYLES, help="only questions of these styles (default: all)")
    parser.add_argument("--json", type=Path, help="write the per-question results (ranked notes and metrics) here")
    parser.add_argument("--explain", action="store_true", help="print where each relevant note ranked, per question and mode")
    args = parser.parse_args()

    vault = args.vault.resolve()
    questions = load_golden(args.golden, vault)
    if args.style:
        questions = [q for q in questions if q["style"] in args.style]
    if not questions:
        sys.exit("no questions to run")
    db = args.db if args.db is not None else default_db(vault)
    stamp_file = db.with_name(db.name + ".bench.json")
    stamp = index_stamp()
    try:
        previous = json.loads(stamp_file.read_text(encoding="utf-8")).get("index_sources")
    except (OSError, ValueError):
        previous = None
    full = args.full or (db.exists() and previous != stamp)
    log(f"index {db} ({'re-chunking every note' if full else 'incremental sync' if db.exists() else 'new'})")

    engine = open_engine(vault, db)
    try:
        _, counts = index_with_vectors(engine, full=full)
        stamp_file.write_text(json.dumps({"index_sources": stamp}) + "\n", encoding="utf-8")

        unreachable = chunkless_notes(engine)
        started = time.perf_counter()
        results = run(engine, questions, args.modes)
        log(f"{len(questions)} questions x {len(args.modes)} modes in {time.perf_counter() - started:,.1f} s")
    finally:
        engine.close()

    if args.explain:
        explain(results, args.modes, unreachable)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        log(f"per-question results in {args.json}")

    headers = ["style", "n"] + [f"{m} {k}" for m in args.modes for k in METRICS]
    compare = set(MODES) <= set(args.modes)  # the bar: hybrid at least the best single mode
    if compare:
        headers.append("hybrid>=best")
    rows = []
    for name, n, scores in summary(results, args.modes):
        row: list[object] = [name, n] + [f"{scores[m][k]:.3f}" for m in args.modes for k in METRICS]
        if compare:
            row.append(met(all(scores["hybrid"][k] >= max(scores["fts"][k], scores["vec"][k]) for k in METRICS)))
        rows.append(row)
    blocked = {q["id"] for q in questions if all(p in unreachable for p in q["relevant"])}
    print_table(
        headers,
        rows,
        f"{args.golden.name}: {len(questions)} questions over {counts['files']:,} notes ({counts['chunks']:,} chunks); "
        f"{len(unreachable)} notes have no chunks, {len(blocked)} questions only have such notes as answers",
    )


if __name__ == "__main__":
    main()
