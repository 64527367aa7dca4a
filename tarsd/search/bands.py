"""What a band promises, and how a hit's band is read: the chance that the hit is relevant.

A band is a promise about the hits a person reads first (the top three): one banded relevant
is relevant at least 9 times in 10, kinda at least half the time, not at most once in 10; maybe
is the rest. So a hit's band comes from an estimate of that chance, made from what search knows
about any hit, in every vault the same way (no rule for one vault's shape): its mode's value
(the keyword value, the cosine, the fused value), its rank, how far it stands from the next hit (and in vec how far below the
best), whether both lists put it first (hybrid), and how many notes the vault holds (in a vault
of 80 notes the first hits answer more often than in one of 8,000: there are fewer near misses).
Every judged query has an answer, so the model cannot know a query the vault says nothing about:
a rule does (searcher.py: none of its words in the vault, maybe at most).
The estimate is a logistic model per mode, fitted on the dev halves of the judged sets' queries
of up to 20 words (a longer query has a rule of its own, searcher.py), each set weighing the
square root of its number of hits, so that neither one big set nor one small vault decides
(bench/search_bands.py --fit), and checked on their held-out halves (bench/search_bands.py).

The shown score maps the chance onto the bands' scale, so the bands' edges are the promise's:
not below 0.25 (chance 0.1), maybe from 0.25, kinda from 0.5 (chance 0.5), relevant from 0.75
(chance 0.9).
"""

from __future__ import annotations

import math

# Each mode's features, in the order of its coefficients (after the intercept).
FEATURES = {
    "fts": ("keyword value", "log rank", "lead over the next", "log notes"),
    "vec": ("cosine", "log rank", "lead over the next", "below the best", "log notes"),
    "hybrid": ("fused", "log rank", "lead over the next", "both lists first", "log notes"),
}
# Fitted by bench/search_bands.py --fit on the dev halves (see the module's doc).
COEFFICIENTS = {
    "fts": (0.118, 2.480, -2.178, 1.629, -0.235),
    "vec": (0.571, 2.430, -1.518, 4.777, -4.603, -0.283),
    "hybrid": (-0.518, 3.745, -1.485, 2.599, 1.592, -0.280),
}
# The chance where each band begins, and the score it shows as.
CHANCES = ((0.0, 0.0), (0.1, 0.25), (0.5, 0.5), (0.9, 0.75), (1.0, 1.0))


def features(c, ranked: list, rank: int, mode: str, notes: int) -> list[float]:
    """The hit's features for ``mode``: ``c`` is ranked[rank - 1] of the mode's ranked list, in an
    index of ``notes`` notes."""
    below = ranked[rank] if rank < len(ranked) else None
    size = math.log(max(1, notes))
    if mode == "fts":
        # No keyword hit after it: no other note holds its words, it stands out all the way.
        lead = (1 - below.bm25 / c.bm25 if below is not None else 1.0) if c.bm25 > 0 else 0.0
        return [c.fused, math.log(rank), lead, size]
    if mode == "vec":
        # Every note has a cosine: the last of a small vault's notes stands out from nothing.
        best = ranked[0].cosine if ranked else c.cosine
        lead = c.cosine - below.cosine if below is not None else 0.0
        return [c.cosine, math.log(rank), lead, best - c.cosine, size]
    lead = c.fused - below.fused if below is not None else 0.0
    return [c.fused, math.log(rank), lead, float(c.keyword_rank == 1 and c.vector_rank == 1), size]


def chance(values: list[float], mode: str) -> float:
    """The estimated chance that a hit with these features is relevant."""
    weights = COEFFICIENTS[mode]
    z = weights[0] + sum(w * x for w, x in zip(weights[1:], values, strict=True))
    return 1 / (1 + math.exp(-max(-40.0, min(40.0, z))))


def shown(probability: float) -> float:
    """The chance on the bands' scale (piecewise linear between CHANCES)."""
    for (x0, y0), (x1, y1) in zip(CHANCES, CHANCES[1:], strict=False):
        if probability <= x1:
            return y0 + (y1 - y0) * (probability - x0) / (x1 - x0)
    return 1.0
