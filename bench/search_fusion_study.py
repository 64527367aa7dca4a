"""Which fusion of keyword and vector results ranks best: the evidence behind search.py's choice.

For every question of the Dendron golden set (bench/golden/dendron.jsonl) and of BEIR SciFact,
the keyword and vector candidate lists (300 passages each, one best passage per note) are
taken from real indexes with the real model, each candidate gets its signals (keyword rank,
BM25, the IDF-weighted share of the query's words it holds, the same for its title, vector
rank and cosine similarity, links from other hits), and each fusion function below ranks
them. Printed: nDCG@10, MRR@10 and Recall@5 per fusion, overall and per question style.

The indexes are the ones search_vault_quality.py and search_beir.py build (pass --dendron-db,
--scifact-db; a missing one is built, which takes minutes with the model).

    python bench/search_fusion_study.py [--only dendron|scifact] [--fusions rrf tars ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from common import DENDRON, log, mrr, ndcg, note_markdown, open_engine, print_table, recall, scifact_corpus, scifact_qrels, scifact_queries

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tarsd.search.searcher import Candidate, Searcher, fuse_tars  # noqa: E402

DEPTH = 300


@dataclass
class Question:
    query: str
    grades: dict[str, int]  # note key -> grade
    style: str
    candidates: list[Candidate] = field(default_factory=list)


def rrf(k: float = 60.0, keyword_weight: float = 0.5) -> Callable[[Candidate], float]:
    def score(c: Candidate) -> float:
        s = keyword_weight / (k + c.keyword_rank) if c.keyword_rank else 0.0
        return s + ((1 - keyword_weight) / (k + c.vector_rank) if c.vector_rank else 0.0)

    return score


def convex(alpha: float, keyword: str = "bm25max", title: float = 0.0, links: float = 0.0) -> Callable[[Candidate], float]:
    """alpha * keyword + (1 - alpha) * cosine (+ boosts); keyword normalised by the query's top
    BM25 ("bm25max"), by coverage ("coverage") or by both ("mix": their mean)."""

    def score(c: Candidate) -> float:
        relative = c.bm25 / c.top_bm25 if c.top_bm25 else 0.0
        k = {"bm25max": relative, "coverage": c.coverage, "mix": (relative + c.coverage) / 2}[keyword]
        return alpha * k + (1 - alpha) * c.cosine + title * c.title_coverage + links * min(c.linked_from, 3)

    return score


FUSIONS: dict[str, Callable[[Candidate], float]] = {
    "fts alone": lambda c: 1 / c.keyword_rank if c.keyword_rank else 0.0,
    "vec alone": lambda c: c.cosine,
    "rrf60": rrf(60),
    "rrf20 kw.7": rrf(20, 0.7),
    **{f"cc bm25 {a:.2f}": convex(a) for a in (0.2, 0.25, 0.3, 0.35, 0.4)},
    **{f"cc cov {a:.2f}": convex(a, "coverage") for a in (0.25, 0.3, 0.35)},
    **{f"cc mix {a:.2f}": convex(a, "mix") for a in (0.25, 0.3, 0.35, 0.4)},
    **{f"cc mix .3 title {t}": convex(0.3, "mix", title=t) for t in (0.05, 0.1)},
    "tars (search.py)": lambda c: fuse_tars(c) + (10.0 if c.keyword_rank == 1 and c.vector_rank == 1 else 0.0),
}


def evaluate(questions: list[Question], fusion: Callable[[Candidate], float], key: Callable[[str], str]) -> dict[str, list[float]]:
    per_style: dict[str, list[tuple[float, float, float]]] = {}
    for q in questions:
        ranked = [key(c.path) for c in sorted(q.candidates, key=lambda c: (-fusion(c), c.path))][:10]
        per_style.setdefault(q.style, []).append((ndcg(ranked, q.grades, 10), mrr(ranked, q.grades, 10), recall(ranked, q.grades, 5)))
    table = {style: [sum(v[i] for v in values) / len(values) for i in range(3)] for style, values in per_style.items()}
    everything = [v for values in per_style.values() for v in values]
    table["all"] = [sum(v[i] for v in everything) / len(everything) for i in range(3)]
    return table


def gather(engine, questions: list[Question]) -> None:
    searcher: Searcher = engine.searcher
    for number, q in enumerate(questions, 1):
        q.candidates, error = searcher.candidates(q.query, DEPTH)
        assert error is None, error
        searcher.rank(q.candidates, "hybrid")  # counts the links among the top hits, as search() does
        if number % 50 == 0:
            log(f"  {number}/{len(questions)} questions")


def dendron_questions(db: Path) -> tuple[list[Question], object]:
    golden = [json.loads(line) for line in (REPO / "bench" / "golden" / "dendron.jsonl").read_text().splitlines() if line.strip()]
    engine = open_engine(DENDRON, db)
    engine.indexer.sync(progress=None)
    return [Question(g["query"], g["relevant"], g["style"]) for g in golden], engine


def scifact_questions(db: Path, vault: Path) -> tuple[list[Question], object]:
    qrels, queries = scifact_qrels(), scifact_queries()
    if not vault.exists():
        vault.mkdir(parents=True)
        for doc in scifact_corpus():
            (vault / f"{doc['_id']}.md").write_text(note_markdown(doc["title"], doc["text"]), encoding="utf-8")
    engine = open_engine(vault, db)
    engine.indexer.sync(progress=None)
    return [Question(queries[qid], dict.fromkeys(docs, 1), "scifact") for qid, docs in qrels.items()], engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cache = Path(tempfile.gettempdir()) / "tars-study"
    parser.add_argument("--dendron-db", type=Path, default=cache / "dendron.sqlite3")
    parser.add_argument("--scifact-db", type=Path, default=cache / "scifact.sqlite3")
    parser.add_argument("--scifact-vault", type=Path, default=cache / "scifact-vault")
    parser.add_argument("--only", choices=("dendron", "scifact"))
    parser.add_argument("--fusions", nargs="*", default=list(FUSIONS))
    args = parser.parse_args()

    sets = []
    if args.only in (None, "dendron"):
        log("gathering Dendron candidates")
        questions, engine = dendron_questions(args.dendron_db)
        gather(engine, questions)
        engine.close()
        sets.append(("Dendron golden set (90 questions)", questions, lambda path: path))
    if args.only in (None, "scifact"):
        log("gathering SciFact candidates")
        questions, engine = scifact_questions(args.scifact_db, args.scifact_vault)
        gather(engine, questions)
        engine.close()
        sets.append(("SciFact test (300 queries)", questions, lambda path: Path(path).stem))

    for title, questions, key in sets:
        results = {name: evaluate(questions, FUSIONS[name], key) for name in args.fusions}
        styles = ["all", *sorted({q.style for q in questions} - {"all"})] if len({q.style for q in questions}) > 1 else ["all"]
        rows = []
        for name, table in results.items():
            rows.append([name, *(f"{table[style][0]:.3f}" for style in styles), f"{table['all'][1]:.3f}", f"{table['all'][2]:.3f}"])
        print_table(["fusion", *(f"nDCG {s}" for s in styles), "MRR all", "R@5 all"], rows, title)
        print(f"(best nDCG overall: {max(results, key=lambda n: results[n]['all'][0])})")


if __name__ == "__main__":
    main()
