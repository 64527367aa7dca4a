"""Which fusion of keyword and vector results ranks best on every query shape: the evidence
behind tarsd/search/searcher.py's choice.

For every query of the chosen split (``dev`` by default: tune there, report ``held-out`` with
bench/search_quality.py) of each set in bench/search_sets.py, the keyword and vector candidate
lists (300 notes each, one best passage per note) are taken from the indexes that
search_quality.py builds, each candidate with its signals (keyword rank, BM25, the IDF-weighted
share of the query's words it holds and in its title, vector rank and cosine, links from the
other top hits). Each fusion below then ranks them. Printed per fusion: nDCG@10 and MRR@10
per set and query-length band, with the gap to the best single mode (the rule: never below it
by more than 0.005), and the mean over the sets.

Searcher settings can be varied for the candidate lists themselves, e.g. ``--set
KEYWORD_POSTINGS_BUDGET=1000000000`` (a setting of tarsd.search.searcher: no common-word cut).

    python bench/search_fusion_study.py [--sets ...] [--split dev|held-out] [--fusions tars rrf ...] [--set NAME=VALUE]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from common import mrr, ndcg, print_table
from search_quality import TOLERANCE, cache_dir, open_index, vault_for
from search_sets import LENGTH_BANDS, NAMES, length_band, load, split_of, words

from tarsd.search import searcher
from tarsd.search.searcher import LINK_TOP, Candidate, fuse_tars

DEPTH = 300
Fusion = Callable[[Candidate, "Question"], float]


@dataclass
class Question:
    query: str
    grades: dict[str, int]
    length: str
    words: int
    candidates: list[Candidate] = field(default_factory=list)
    z: dict[int, tuple[float, float]] = field(default_factory=dict)  # id(candidate) -> (keyword, cosine) z-scores


def collect(name: str, split: str, limit: int) -> list[Question]:
    cache = cache_dir()
    query_set = load(name, cache)
    queries = [q for q in query_set.queries if split_of(name, q.id) == split][: limit or None]
    engine = open_index(query_set, vault_for(query_set, cache), cache)
    questions = []
    try:
        for q in queries:
            found, error = engine.searcher.candidates(q.text, DEPTH)
            if error:
                sys.exit(f"no vector list: {error}")
            found = [c for c in found if c.path not in q.ignore]
            for c in found:
                c.fused = fuse_tars(c)
            top = sorted(found, key=lambda c: -c.fused)[:LINK_TOP]
            if engine.searcher.graph is not None:
                engine.searcher._count_links(top)  # the links among the top hits, as search does
            questions.append(Question(q.text, q.grades, length_band(q.text), words(q.text), found))
    finally:
        engine.close()
    return questions


# ---- fusions: each maps a candidate (and its question) to a ranking value, higher first ----


def keyword_order(c: Candidate, q: Question) -> float:
    return 1.0 / c.keyword_rank if c.keyword_rank else -1.0


def vector_order(c: Candidate, q: Question) -> float:
    return 1.0 / c.vector_rank if c.vector_rank else -1.0


def rrf(k: float = 60.0) -> Fusion:
    def score(c: Candidate, q: Question) -> float:
        return (1 / (k + c.keyword_rank) if c.keyword_rank else 0.0) + (1 / (k + c.vector_rank) if c.vector_rank else 0.0)

    return score


def tars(c: Candidate, q: Question) -> float:
    return fuse_tars(c)


def short_form(c: Candidate, q: Question) -> float:
    """The shipped fusion without its long-query form (what shipped before it): coverage and the
    squared BM25 share at every length."""
    return fuse_tars(dataclasses.replace(c, length_share=0.0))


def flat_ramp(c: Candidate, q: Question) -> float:
    """The fusion before the coverage ramp: keyword weight 0.4 + 0.2 * query_coverage (0.46 to
    0.6 where the ramp goes from 0.2 to 0.5), which let a paraphrase's common words win."""
    return fuse_tars(c, lambda coverage: min(0.95, 0.4 + 0.2 * coverage))


def capped(cap: float, base: float = 0.4, per_coverage: float = 0.2, power: float = 2.0, title: float = 0.05) -> Fusion:
    """The fusion before the coverage ramp (flat_ramp, short-query form) with the keyword
    weight capped at ``cap``."""

    def score(c: Candidate, q: Question) -> float:
        alpha = min(cap, base + per_coverage * c.query_coverage)
        relative = c.bm25 / c.top_bm25 if c.top_bm25 else 0.0
        keyword = relative**power * c.coverage
        return alpha * keyword + (1 - alpha) * c.cosine + title * c.title_coverage + 0.02 * min(c.linked_from, 2)

    return score


def by_length(
    short: float, long: float, short_words: int = 5, long_words: int = 20, per_coverage: float = 0.2, power: float = 2.0
) -> Fusion:
    """Keyword weight falling from ``short`` at <= short_words to ``long`` at >= long_words (and
    per_coverage more with the query's coverage): a long query holds many rare words, so its
    keyword match says less about each."""

    def score(c: Candidate, q: Question) -> float:
        t = min(1.0, max(0.0, (q.words - short_words) / (long_words - short_words)))
        alpha = min(0.95, short + (long - short) * t + per_coverage * c.query_coverage * (1 - t))
        relative = c.bm25 / c.top_bm25 if c.top_bm25 else 0.0
        keyword = relative**power * c.coverage
        return alpha * keyword + (1 - alpha) * c.cosine + 0.05 * c.title_coverage + 0.02 * min(c.linked_from, 2)

    return score


def z_scores(weight: float) -> Fusion:
    """Each list's value standardised over its own candidates, then mixed: no list dominates by scale."""

    def score(c: Candidate, q: Question) -> float:
        keyword, cosine = q.z[id(c)]
        return weight * keyword + (1 - weight) * cosine

    return score


FUSIONS: dict[str, Fusion] = {
    "tars": tars,
    "before-ramp": flat_ramp,
    "short-form": short_form,
    "rrf60": rrf(60),
    "cap0.5": capped(0.5),
    "cap0.45": capped(0.45),
    "len.5-.3": by_length(0.5, 0.3),
    "len.6-.3": by_length(0.6, 0.3),
    "len.5-.2": by_length(0.5, 0.2),
    "len.6-.25": by_length(0.6, 0.25),
    "z.5": z_scores(0.5),
    "z.4": z_scores(0.4),
}


def standardise(questions: list[Question]) -> None:
    """Each candidate's BM25 share and cosine as z-scores within its question."""

    def z(values: list[float]) -> list[float]:
        mean = sum(values) / len(values) if values else 0.0
        spread = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) if values else 0.0
        return [(v - mean) / spread if spread else 0.0 for v in values]

    for q in questions:
        keyword = z([(c.bm25 / c.top_bm25 if c.top_bm25 else 0.0) * c.coverage for c in q.candidates])
        cosine = z([c.cosine for c in q.candidates])
        q.z = {id(c): (k, v) for c, k, v in zip(q.candidates, keyword, cosine, strict=True)}


def top(q: Question, mode: str, fusion: Fusion = tars, limit: int = 10) -> list[Candidate]:
    """The hits the mode shows, as Searcher.rank orders them: the named note first, then (in
    hybrid) the note both lists put first, then by the mode's value."""
    if mode == "fts":
        pool = sorted((c for c in q.candidates if c.keyword_rank), key=lambda c: (not c.named, c.keyword_rank))
    elif mode == "vec":
        pool = sorted((c for c in q.candidates if c.vector_rank), key=lambda c: (not c.named, c.vector_rank))
    else:
        pool = sorted(q.candidates, key=lambda c: (not c.named, not (c.keyword_rank == 1 and c.vector_rank == 1), -fusion(c, q), c.path))
    return pool[:limit]


def ranked(q: Question, fusion: Fusion, both_first: bool = True) -> list[str]:
    if fusion is keyword_order:
        return [c.path for c in top(q, "fts", limit=len(q.candidates))]
    if fusion is vector_order:
        return [c.path for c in top(q, "vec", limit=len(q.candidates))]
    return [c.path for c in top(q, "hybrid", fusion, limit=len(q.candidates))]


def figures(questions: list[Question], fusion: Fusion, both_first: bool) -> tuple[float, float]:
    if not questions:
        return math.nan, math.nan
    lists = [ranked(q, fusion, both_first) for q in questions]
    n = len(questions)
    return (
        sum(ndcg(r, q.grades, 10) for r, q in zip(lists, questions, strict=True)) / n,
        sum(mrr(r, q.grades, 10) for r, q in zip(lists, questions, strict=True)) / n,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", choices=NAMES, default=list(NAMES))
    parser.add_argument("--split", choices=("dev", "held-out"), default="dev")
    parser.add_argument("--queries", type=int, default=0, help="only the first N queries of each set's split")
    parser.add_argument("--fusions", nargs="+", choices=FUSIONS, default=list(FUSIONS))
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a tarsd.search.searcher setting for the candidate lists"
    )
    args = parser.parse_args()
    for assignment in args.set:
        name, _, value = assignment.partition("=")
        if not hasattr(searcher, name):
            sys.exit(f"tarsd.search.searcher has no setting {name}")
        setattr(searcher, name, type(getattr(searcher, name))(value))

    data = {name: collect(name, args.split, args.queries) for name in args.sets}
    for questions in data.values():
        standardise(questions)
    groups = [(name, band) for name in args.sets for band in ("all", *LENGTH_BANDS)]
    rows, summary = [], []
    for fusion_name in args.fusions:
        worst, means = math.inf, []
        for name, band in groups:
            questions = [q for q in data[name] if band == "all" or q.length == band]
            if not questions or (band != "all" and len(questions) == len(data[name])):
                continue
            fts = figures(questions, keyword_order, False)
            vec = figures(questions, vector_order, False)
            hybrid = figures(questions, FUSIONS[fusion_name], True)
            gaps = [hybrid[i] - max(fts[i], vec[i]) for i in range(2)]
            worst = min(worst, *gaps)
            if band == "all":
                means.append(hybrid[0])
            rows.append(
                [
                    fusion_name,
                    name,
                    band,
                    len(questions),
                    f"{fts[0]:.3f}",
                    f"{vec[0]:.3f}",
                    f"{hybrid[0]:.3f}",
                    f"{hybrid[1]:.3f}",
                    f"{gaps[0]:+.3f}",
                    f"{gaps[1]:+.3f}",
                ]
            )
        summary.append([fusion_name, f"{sum(means) / len(means):.4f}", f"{worst:+.3f}", "yes" if worst >= -TOLERANCE else "NO"])
    print_table(
        ["fusion", "set", "words", "n", "fts nDCG", "vec nDCG", "hyb nDCG", "hyb MRR", "gap nDCG", "gap MRR"], rows, f"split: {args.split}"
    )
    print_table(["fusion", "mean hybrid nDCG over sets", "worst gap (nDCG or MRR)", "rule met"], summary, "summary")


if __name__ == "__main__":
    main()
