"""Search quality on six judged sets of different shapes (bench/search_sets.py): nDCG@10,
MRR@10 and Recall@5 per mode, per query-length band and per split, and how often a hit in
each score band is relevant.

Each set's notes are indexed by the real pipeline with the real local model, into databases
cached under the temp dir (TARS_BENCH_CACHE moves them); a re-run only syncs what changed,
and re-chunks every note (re-using cached vectors) when the indexing code changed. Every query
runs in every mode with limit 10, one result per note.

The rule the tables check: in every set, split and length band, hybrid is not below the best
single mode by more than 0.005, on nDCG@10 and on MRR@10. Tune on ``dev``; ``held-out`` is
the figure to report.

    python bench/search_quality.py [--sets scifact dendron arguana squad foam demo] [--modes fts vec hybrid]
                                   [--split dev|held-out] [--queries N] [--json out.json] [--explain] [--markdown]
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

from common import MODEL_DIR, index_with_vectors, log, met, mrr, ndcg, open_engine, print_table, recall
from search_sets import LENGTH_BANDS, NAMES, QuerySet, length_band, load, split_of

MODES = ("fts", "vec", "hybrid")
LIMIT = 10
METRICS = ("nDCG@10", "MRR@10", "R@5")
BANDS = ("relevant", "kinda", "maybe", "not")
TOLERANCE = 0.005  # hybrid may trail the best single mode by this much
REPO = Path(__file__).resolve().parents[1]
# The packages whose code decides what lands in the index; a change to any re-chunks every note.
INDEX_PACKAGES = ("config", "markdown", "vault", "embed", "store", "index")


def cache_dir() -> Path:
    return Path(os.environ.get("TARS_BENCH_CACHE", Path(tempfile.gettempdir()) / "tars-bench"))


def index_stamp() -> str:
    digest = hashlib.sha256()
    for package in INDEX_PACKAGES:
        for path in sorted((REPO / "tarsd" / package).glob("*.py")):
            digest.update(path.read_bytes())
    return digest.hexdigest()


def vault_for(query_set: QuerySet, cache: Path) -> Path:
    """The set's own vault, or its notes written once under cache."""
    if query_set.vault is not None:
        return query_set.vault.resolve()
    notes = list(query_set.notes())
    key = hashlib.sha256("".join(f"{path}\0{text}\0" for path, text in notes).encode()).hexdigest()[:12]
    return write_notes(cache / f"vault-{query_set.name}-{key}", notes, query_set.name)


def write_notes(vault: Path, notes, name: str) -> Path:
    """The (path, text) notes written under ``vault`` once (a .written mark says they are all there)."""
    done = vault / ".written"
    if not done.exists():
        notes = list(notes)
        log(f"[{name}] writing {len(notes):,} notes into {vault}")
        for path, text in notes:
            target = vault / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        done.touch()
    return vault


def open_index(query_set: QuerySet, vault: Path, cache: Path):
    """An engine on the set's vault whose index holds every note with its vectors."""
    return open_cached_index(query_set.name, vault, cache)


def open_cached_index(name: str, vault: Path, cache: Path):
    """An engine on ``vault`` with its index cached under ``cache`` (by the repository, vault and
    model), synced with vectors, every note re-chunked when the indexing code changed since."""
    key = hashlib.sha256("\0".join(map(str, (REPO, vault, MODEL_DIR.resolve()))).encode()).hexdigest()[:12]
    db = cache / f"{name}-{key}.sqlite3"
    stamp_file = db.with_name(db.name + ".bench.json")
    stamp = index_stamp()
    try:
        previous = json.loads(stamp_file.read_text(encoding="utf-8")).get("index_sources")
    except (OSError, ValueError):
        previous = None
    full = db.exists() and previous != stamp
    log(f"[{name}] index {db} ({'re-chunking every note' if full else 'incremental sync' if db.exists() else 'new'})")
    engine = open_engine(vault, db)
    index_with_vectors(engine, full=full)
    stamp_file.write_text(json.dumps({"index_sources": stamp}) + "\n", encoding="utf-8")
    return engine


def run(engine, query_set: QuerySet, modes: list[str]) -> list[dict]:
    """Every query in every mode: the ranked notes with their bands, and the metrics."""
    results = []
    for query in query_set.queries:
        entry = {
            "id": query.id,
            "split": split_of(query_set.name, query.id),
            "length": length_band(query.text),
            "style": query.style,
            "query": query.text,
            "grades": query.grades,
            "modes": {},
        }
        for mode in modes:
            response = engine.searcher.search(query.text, mode=mode, limit=LIMIT + len(query.ignore), per_file=True, explain=True)
            if response.mode != mode:
                sys.exit(f"{mode} search fell back to {response.mode}: {'; '.join(response.warnings)}")
            hits = [r for r in response.results if r.path not in query.ignore][:LIMIT]
            ranked = [r.path for r in hits]
            entry["modes"][mode] = {
                "ranked": ranked,
                "bands": [r.band for r in hits],
                "scores": [round(r.score, 4) for r in hits],
                "rules": [r.explain.rule for r in hits],
                "nDCG@10": ndcg(ranked, query.grades, 10),
                "MRR@10": mrr(ranked, query.grades, 10),
                "R@5": recall(ranked, query.grades, 5),
            }
        results.append(entry)
    return results


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def groups(results: list[dict]) -> list[tuple[str, str, list[dict]]]:
    """(split, group, results): each split whole, then by length band and by question style
    (the golden set's), those not empty."""
    out = []
    for split in ("dev", "held-out"):
        in_split = [r for r in results if r["split"] == split]
        out.append((split, "all", in_split))
        if len({r["length"] for r in in_split}) > 1:
            out += [(split, f"{band} words", [r for r in in_split if r["length"] == band]) for band in LENGTH_BANDS]
        for style in sorted({r["style"] for r in in_split if r["style"]}):
            out.append((split, style, [r for r in in_split if r["style"] == style]))
    return [(split, name, group) for split, name, group in out if group]


def quality_table(name: str, results: list[dict], modes: list[str]) -> list[str]:
    """Prints the set's metrics; returns where hybrid trails the best single mode by more than TOLERANCE."""
    rows, misses = [], []
    singles = [m for m in modes if m != "hybrid"]
    for split, band, group in groups(results):
        means = {m: {k: mean([r["modes"][m][k] for r in group]) for k in METRICS} for m in modes}
        row: list[object] = [split, band, len(group)]
        for metric in METRICS:
            row += [f"{means[m][metric]:.3f}" for m in modes]
        if "hybrid" in modes and singles:
            gaps = []
            for metric in ("nDCG@10", "MRR@10"):
                gap = means["hybrid"][metric] - max(means[m][metric] for m in singles)
                gaps.append(f"{gap:+.3f}")
                if gap < -TOLERANCE:
                    misses.append(f"{name} {split} {band}: hybrid {metric} {gap:+.3f} against the best single mode")
            row += gaps + [met(all(float(g) >= -TOLERANCE for g in gaps))]
        rows.append(row)
    headers = ["split", "queries", "n"] + [f"{m} {metric}" for metric in METRICS for m in modes]
    if "hybrid" in modes and singles:
        headers += ["hyb-best nDCG", "hyb-best MRR", "rule met"]
    print_table(headers, rows, f"{name}: {len(results)} queries")
    return misses


def reliability_table(name: str, results: list[dict], modes: list[str]) -> None:
    """For each mode and band: how many of the top-10 hits fell in it, and the share relevant."""
    rows = []
    for split in ("dev", "held-out"):
        for mode in modes:
            row: list[object] = [split, mode]
            for band in BANDS:
                judged = [
                    r["grades"].get(path, 0) > 0
                    for r in results
                    if r["split"] == split
                    for path, hit_band in zip(r["modes"][mode]["ranked"], r["modes"][mode]["bands"], strict=True)
                    if hit_band == band
                ]
                row += [len(judged), f"{mean([float(j) for j in judged]):.2f}" if judged else "-"]
            rows.append(row)
    headers = ["split", "mode"] + [f"{band} {what}" for band in BANDS for what in ("hits", "relevant")]
    print_table(headers, rows, f"{name}: how often a top-10 hit in each band is judged relevant (targets: relevant >= 0.80, not <= 0.10)")
    rule_rows = []
    for split in ("dev", "held-out"):
        for mode in modes:
            by_rule: dict[str, list[float]] = {}
            for r in results:
                if r["split"] != split:
                    continue
                shown = r["modes"][mode]
                for path, rule in zip(shown["ranked"], shown["rules"], strict=True):
                    if rule:
                        by_rule.setdefault(rule, []).append(float(r["grades"].get(path, 0) > 0))
            rule_rows += [[split, mode, rule, len(v), f"{mean(v):.2f}"] for rule, v in sorted(by_rule.items())]
    if rule_rows:
        print_table(
            ["split", "mode", "rule that set the score", "hits", "relevant"], rule_rows, f"{name}: top-10 hits whose score a rule set"
        )


def band_share(results: list[dict], split: str, mode: str, band: str) -> str:
    """'share (relevant of hits)' for the top-10 hits of one split and mode shown in ``band``."""
    judged = [
        r["grades"].get(path, 0) > 0
        for r in results
        if r["split"] == split
        for path, hit_band in zip(r["modes"][mode]["ranked"], r["modes"][mode]["bands"], strict=True)
        if hit_band == band
    ]
    return f"{sum(judged) / len(judged):.2f} ({sum(judged)} of {len(judged)})" if judged else "none"


def reliability_markdown(report: dict[str, list[dict]], modes: list[str]) -> None:
    """The reliability table as docs/search.md shows it: per set and mode, both halves."""
    print("\n| set | mode | relevant hits relevant, dev | held-out | not hits relevant, dev | held-out |")
    print("|---|---|---|---|---|---|")
    for name, results in report.items():
        for mode in modes:
            cells = [band_share(results, split, mode, band) for band in ("relevant", "not") for split in ("dev", "held-out")]
            print(f"| {name} | {mode} | " + " | ".join(cells) + " |")


def explain(results: list[dict], modes: list[str]) -> None:
    """Per query and mode: the rank of each relevant note (- when not in the top 10) and the top 3."""
    for r in results:
        print(f"\n[{r['id']}] ({r['split']}, {r['length']} words{', ' + r['style'] if r['style'] else ''}) {r['query'][:200]}")
        for path, grade in sorted(r["grades"].items(), key=lambda item: -item[1]):
            ranks = "  ".join(f"{m} {r['modes'][m]['ranked'].index(path) + 1 if path in r['modes'][m]['ranked'] else '-'}" for m in modes)
            print(f"  {grade} {path}: {ranks}")
        for m in modes:
            top = ", ".join(
                f"{p.removesuffix('.md')} [{b}]" for p, b in zip(r["modes"][m]["ranked"][:3], r["modes"][m]["bands"][:3], strict=True)
            )
            print(f"  {m:6} nDCG {r['modes'][m]['nDCG@10']:.2f}  top: {top}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", choices=NAMES, default=list(NAMES), help="query sets (default: all five)")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES), help="search modes (default: all three)")
    parser.add_argument("--split", choices=("dev", "held-out"), help="only this split's queries (default: both, reported apart)")
    parser.add_argument("--queries", type=int, default=0, help="only the first N queries of each set (after --split)")
    parser.add_argument("--json", type=Path, help="write the per-query results (ranked notes, bands, metrics) here")
    parser.add_argument("--explain", action="store_true", help="print where each relevant note ranked, per query and mode")
    parser.add_argument("--markdown", action="store_true", help="print the reliability table as docs/search.md shows it, at the end")
    args = parser.parse_args()

    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    report, misses = {}, []
    for name in args.sets:
        query_set = load(name, cache)
        if args.split:
            query_set.queries = [q for q in query_set.queries if split_of(name, q.id) == args.split]
        if args.queries:
            query_set.queries = query_set.queries[: args.queries]
        engine = open_index(query_set, vault_for(query_set, cache), cache)
        try:
            started = time.perf_counter()
            results = run(engine, query_set, args.modes)
            log(f"[{name}] {len(results):,} queries x {len(args.modes)} modes in {time.perf_counter() - started:,.1f} s")
        finally:
            engine.close()
        if args.explain:
            explain(results, args.modes)
        misses += quality_table(name, results, args.modes)
        reliability_table(name, results, args.modes)
        report[name] = results
    if args.markdown:
        reliability_markdown(report, args.modes)
    if args.json:
        args.json.write_text(json.dumps(report, ensure_ascii=False) + "\n", encoding="utf-8")
    print("\nhybrid >= best single mode - 0.005 (nDCG@10, MRR@10) in every set, split and length band:", met(not misses))
    for miss in misses:
        print(f"  {miss}")


if __name__ == "__main__":
    main()
