"""Retrieval quality on BEIR SciFact: nDCG@10 and Recall@100 per search mode.

Every abstract becomes a note ``{doc id}.md`` (``# title`` then the abstract), indexed by the
real pipeline with the real local model; the judged test queries run in each mode with one
result per file. Indexing all 5,183 abstracts takes several minutes; --keep-db keeps the index
for the next run (use the same --docs).

    python bench/search_beir.py [--queries N] [--docs N] [--keep-db PATH]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from common import (
    index_with_vectors,
    log,
    met,
    ndcg,
    note_markdown,
    open_engine,
    print_table,
    recall,
    scifact_corpus,
    scifact_qrels,
    scifact_queries,
)

MODES = ("fts", "vec", "hybrid")
# The last round's figures for the single modes (no change may cost quality), 0.73 for hybrid.
TARGETS = {"fts": 0.679, "vec": 0.670, "hybrid": 0.73}


def select_docs(corpus: list[dict], needed: set[str], limit: int) -> list[dict]:
    """All of corpus (limit 0), or the judged-relevant docs plus others in file order up to limit."""
    if not limit:
        return corpus
    chosen = [d for d in corpus if d["_id"] in needed]
    others = [d for d in corpus if d["_id"] not in needed]
    return chosen + others[: max(0, limit - len(chosen))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=0, help="use only the first N judged test queries (default: all 300)")
    parser.add_argument(
        "--docs", type=int, default=0, help="index only N abstracts, always including those judged for the queries (default: all)"
    )
    parser.add_argument("--keep-db", type=Path, help="index database to create or reuse (default: a temporary one)")
    args = parser.parse_args()

    qrels, queries = scifact_qrels(), scifact_queries()
    qids = list(qrels)[: args.queries or None]
    docs = select_docs(scifact_corpus(), set().union(*(qrels[q] for q in qids)), args.docs)

    with tempfile.TemporaryDirectory(prefix="tars-bench-") as tmp:
        vault = Path(tmp) / "vault"
        vault.mkdir()
        for doc in docs:
            (vault / f"{doc['_id']}.md").write_text(note_markdown(doc["title"], doc["text"]), encoding="utf-8")
        engine = open_engine(vault, args.keep_db or Path(tmp) / "index.sqlite3")
        try:
            _, counts = index_with_vectors(engine)

            scores: dict[str, tuple[float, float]] = {}
            for mode in MODES:
                started, ndcg_sum, recall_sum = time.perf_counter(), 0.0, 0.0
                for qid in qids:
                    response = engine.searcher.search(queries[qid], mode=mode, limit=100, per_file=True)
                    ranked = [Path(r.path).stem for r in response.results]
                    grades = dict.fromkeys(qrels[qid], 1)  # SciFact judgements are binary
                    ndcg_sum += ndcg(ranked, grades, 10)
                    recall_sum += recall(ranked, grades, 100)
                scores[mode] = (ndcg_sum / len(qids), recall_sum / len(qids))
                log(f"{mode}: {len(qids)} queries in {time.perf_counter() - started:,.1f} s")
        finally:
            engine.close()

    rows = []
    for mode in MODES:
        mode_ndcg, mode_recall = scores[mode]
        target, ok = f">= {TARGETS[mode]:.3f}", mode_ndcg >= TARGETS[mode]
        if mode == "hybrid":
            target += " and > fts, vec"
            ok = ok and mode_ndcg > max(scores["fts"][0], scores["vec"][0])
        rows.append([mode, f"{mode_ndcg:.4f}", f"{mode_recall:.4f}", target, met(ok)])
    print_table(
        ["mode", "nDCG@10", "Recall@100", "target (nDCG@10)", "met"],
        rows,
        f"SciFact test: {len(qids)} queries over {len(docs):,} abstracts ({counts['chunks']:,} chunks)",
    )


if __name__ == "__main__":
    main()
