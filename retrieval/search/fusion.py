"""Rank fusion and re-ordering of component result lists; pure Python.

A ranking is a list of (key, score) pairs, best first.
"""

from __future__ import annotations

import statistics
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
Ranking = Sequence[tuple[K, float]]

# Reciprocal rank fusion's k: a hit ranked r in a list adds weight / (k + r). The larger
# k, the less the top ranks of each list outweigh the ranks below them.
RRF_K = 60


def rrf(
    rankings: Mapping[str, Ranking[K]], *, k: int = RRF_K, weights: Mapping[str, float] | None = None
) -> list[tuple[K, float]]:
    """Reciprocal rank fusion: score = sum of weight / (k + rank), ranks from 1."""
    fused: dict[K, float] = {}
    for name, ranking in rankings.items():
        weight = 1.0 if weights is None else weights.get(name, 1.0)
        for rank, (key, _score) in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + weight / (k + rank)
    return sorted(fused.items(), key=lambda item: -item[1])


def minmax(scores: Sequence[float]) -> list[float]:
    lo, hi = min(scores), max(scores)
    if hi == lo:
        return [1.0 for _ in scores]
    return [(s - lo) / (hi - lo) for s in scores]


def zscore(scores: Sequence[float]) -> list[float]:
    if len(scores) < 2:
        return [0.0 for _ in scores]
    mean, stdev = statistics.fmean(scores), statistics.pstdev(scores)
    if stdev == 0:
        return [0.0 for _ in scores]
    return [(s - mean) / stdev for s in scores]


NORMALISERS = {"minmax": minmax, "zscore": zscore}


def convex(
    rankings: Mapping[str, Ranking[K]], *, weights: Mapping[str, float], normalise: str = "minmax"
) -> list[tuple[K, float]]:
    """Weighted sum of per-list normalised scores.

    A key missing from a list ranks below everything that list retrieved: it gets 0
    under min-max (where the worst retrieved hit also gets 0, unless the list holds one
    score only) and one standard deviation below the worst hit under z-score.
    """
    norm = NORMALISERS[normalise]
    normalised: dict[str, dict[K, float]] = {}
    floors: dict[str, float] = {}
    for name, ranking in rankings.items():
        if ranking:
            values = norm([s for _, s in ranking])
            normalised[name] = dict(zip((key for key, _ in ranking), values, strict=True))
            floors[name] = 0.0 if normalise == "minmax" else min(values) - 1.0
    keys = {key for ranking in normalised.values() for key in ranking}
    fused: dict[K, float] = {}
    for key in keys:
        fused[key] = sum(weights.get(name, 0.0) * scores.get(key, floors[name]) for name, scores in normalised.items())
    return sorted(fused.items(), key=lambda item: -item[1])


def tiebreak(primary: Ranking[K], secondary: Mapping[K, float], *, places: int = 9) -> list[tuple[K, float]]:
    """Order by primary score, ties (to `places` decimals) by secondary score."""
    return sorted(primary, key=lambda item: (-round(item[1], places), -secondary.get(item[0], float("-inf"))))
