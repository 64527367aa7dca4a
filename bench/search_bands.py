"""What a band promises, and the model behind it: how often a hit in each band is relevant, for the
top 3 hits of every query (the hits a person reads), per judged set, mode and split.

The promise (issue 44): a top-3 hit banded ``relevant`` is relevant at least 9 times in 10, one
banded ``kinda`` at least half the time, one banded ``not`` at most 1 time in 10. Bands are read
from each hit's chance of being relevant (tarsd/search/bands.py): a logistic model per mode of
the hit's signals (its value, its rank, how far it stands from the next hit, how much of the query
it and the best keyword match hold), fitted here on the dev halves of the judged sets of
bench/search_sets.py, each set weighing the same, and checked on the held-out halves.

    python bench/search_bands.py [--sets ...] [--fit] [--json out.json]

``--fit`` prints the coefficients to put in tarsd/search/bands.py (fitted on dev only); without
it, the bands of the code as it is are measured on both halves.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np
from common import met, print_table
from search_quality import cache_dir, open_index, vault_for
from search_sets import NAMES, load, split_of

from tarsd.search import bands
from tarsd.search.searcher import LONG_QUERY_BAND, LONG_QUERY_CAP, LONG_QUERY_TOP, UNKNOWN_WORDS_CAP, band, is_long

MODES = ("fts", "vec", "hybrid")
TOP = 3  # the hits a band's promise is about
FIT_DEPTH = 10  # the hits the model is fitted on
TARGETS = {"relevant": (">=", 0.90), "kinda": (">=", 0.50), "not": ("<=", 0.10)}


def collect(name: str) -> list[dict]:
    """Every query's top hits in every mode: the hit's signals, its band as shown now, and whether it is relevant."""
    cache = cache_dir()
    query_set = load(name, cache)
    engine = open_index(query_set, vault_for(query_set, cache), cache)
    notes = engine.store.coverage_counts()["notes"]
    rows = []
    try:
        for q in query_set.queries:
            for mode in MODES:
                lists = {"fts": ("fts",), "vec": ("vec",), "hybrid": ("fts", "vec")}[mode]
                found, error = engine.searcher.candidates(q.text, 300, lists=lists)
                if error:
                    sys.exit(f"no vector list: {error}")
                found = [c for c in found if c.path not in q.ignore]
                ranked = engine.searcher.rank(found, mode, is_long(q.text))[:FIT_DEPTH]
                for rank, c in enumerate(ranked, 1):
                    rows.append(
                        {
                            "set": name,
                            "split": split_of(name, q.id),
                            "query": q.id,
                            "mode": mode,
                            "rank": rank,
                            "relevant": q.grades.get(c.path, 0) > 0,
                            "band": band(c.score),
                            "rule": c.rule,
                            "named": c.named,
                            "long": is_long(q.text),
                            "unknown": c.found_share == 0,
                            "features": bands.features(c, ranked, rank, mode, notes),
                        }
                    )
    finally:
        engine.close()
    return rows


def fit(rows: list[dict], mode: str, l2: float = 1.0) -> np.ndarray:
    """Logistic regression (Newton's method) of relevance on the mode's features, each set weighing the
    square root of its number of hits (so SQuAD's 600 questions do not drown the demo vault's 24, nor
    the other way round)."""
    # The named note is relevant by rule, and a query of more than 20 words maybe at most (searcher.py): the
    # model is for the rest.
    chosen = [r for r in rows if r["mode"] == mode and r["split"] == "dev" and not r["named"] and not r["long"] and not r.get("unknown")]
    x = np.array([[1.0, *r["features"]] for r in chosen])
    y = np.array([float(r["relevant"]) for r in chosen])
    sets = [r["set"] for r in chosen]
    counts = {s: sets.count(s) for s in set(sets)}
    raw = np.array([1 / math.sqrt(counts[s]) for s in sets])
    weight = raw * len(chosen) / raw.sum()
    w = np.zeros(x.shape[1])
    penalty = l2 * np.eye(x.shape[1])
    penalty[0, 0] = 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-(x @ w)))
        gradient = x.T @ (weight * (p - y)) + penalty @ w
        hessian = (x * (weight * p * (1 - p))[:, None]).T @ x + penalty
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def rebanded(rows: list[dict]) -> list[dict]:
    """The rows with the bands tarsd/search/bands.py's model gives them now (as Searcher.rank does: the
    named note relevant, a long query maybe at most, scores never rising down the list)."""
    out = []
    lists: dict[tuple[str, str, str], list[dict]] = {}
    for r in rows:
        lists.setdefault((r["set"], r["query"], r["mode"]), []).append(r)
    for hits in lists.values():
        hits = sorted(hits, key=lambda r: r["rank"])
        scores = []
        for r in hits:
            score = bands.shown(bands.chance(r["features"], r["mode"]))
            if r.get("long"):
                score = min(score, LONG_QUERY_CAP) if r["rank"] > LONG_QUERY_TOP else LONG_QUERY_BAND
            if r.get("unknown"):
                score = min(score, UNKNOWN_WORDS_CAP)
            if r.get("named"):
                score = max(score, 0.75)
            scores.append(score)
        for i in range(len(scores) - 2, -1, -1):
            scores[i] = max(scores[i], scores[i + 1])
        out += [{**r, "band": band(score)} for r, score in zip(hits, scores, strict=True)]
    return out


def reliability(rows: list[dict]) -> list[str]:
    """Prints, per set, mode and split, each band's top-3 hits and the share relevant; returns the misses."""
    misses = []
    table = []
    for name in dict.fromkeys(r["set"] for r in rows):
        for mode in MODES:
            for split in ("dev", "held-out"):
                group = [r for r in rows if r["set"] == name and r["mode"] == mode and r["split"] == split and r["rank"] <= TOP]
                cells: list[object] = [name, mode, split]
                for shown in ("relevant", "kinda", "maybe", "not"):
                    hits = [r["relevant"] for r in group if r["band"] == shown]
                    share = sum(hits) / len(hits) if hits else math.nan
                    cells.append(f"{share:.2f} ({sum(hits)}/{len(hits)})" if hits else "-")
                    if hits and shown in TARGETS and split == "held-out":
                        sign, target = TARGETS[shown]
                        if (share < target) if sign == ">=" else (share > target):
                            got = f"{share:.2f} ({sum(hits)} of {len(hits)})"
                            misses.append(f"{name} {mode} {split}: {shown} hits relevant {got}, target {sign} {target}")
                table.append(cells)
    print_table(["set", "mode", "split", "relevant", "kinda", "maybe", "not"], table, f"top-{TOP} hits in each band: share judged relevant")
    return misses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", choices=NAMES, default=list(NAMES))
    parser.add_argument("--fit", action="store_true", help="fit each mode's model on the dev halves and print its coefficients")
    parser.add_argument("--json", type=str, help="write every hit's row here")
    parser.add_argument("--rows", type=str, help="read the rows from a --json file instead of searching")
    parser.add_argument("--model", action="store_true", help="with --rows: band the rows with the model in tarsd/search/bands.py")
    args = parser.parse_args()
    if args.rows:
        rows = json.load(open(args.rows, encoding="utf-8"))  # noqa: SIM115
    else:
        rows = [row for name in args.sets for row in collect(name)]
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(rows, handle)
    if args.fit:
        for mode in MODES:
            w = fit(rows, mode)
            names = ["intercept", *bands.FEATURES[mode]]
            print(f"{mode}: " + ", ".join(f"{n} {v:+.3f}" for n, v in zip(names, w, strict=True)))
        return
    if args.model:
        rows = rebanded(rows)
    misses = reliability(rows)
    print(f"\nevery held-out band keeps its promise (relevant >= 0.90, kinda >= 0.50, not <= 0.10, top {TOP}):", met(not misses))
    for miss in misses:
        print(f"  {miss}")


if __name__ == "__main__":
    main()
