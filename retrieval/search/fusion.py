"""Rank fusion and re-ordering of component result lists; pure Python.

A ranking is a list of (key, score) pairs, best first.
"""

from __future__ import annotations

import statistics
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

import numpy as np

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


def rrf_tops(rankings: Mapping[str, Ranking[K]], settings: Sequence[tuple[int, Mapping[str, float]]],
             n: int) -> list[list[K]]:
    """For each (k, weights) of `settings`, the first `n` keys of rrf(rankings, k=k,
    weights=weights), in its order, for a tuning grid that fuses the same lists many
    ways: each key's ranks read once, each fusion a few numpy operations. The same
    floats in the same order of addition, and ties in rrf's order (the keys as the
    rankings first hold them, a stable sort), so the same keys; rankings holding a key
    twice are fused by rrf itself."""
    if any(len({key for key, _ in ranking}) < len(ranking) for ranking in rankings.values()):
        return [[key for key, _ in rrf(rankings, k=k, weights=weights)[:n]] for k, weights in settings]
    places: dict[K, int] = {}
    for ranking in rankings.values():
        for key, _ in ranking:
            places.setdefault(key, len(places))
    keys = list(places)
    ranks = {}
    for name, ranking in rankings.items():
        ranked = np.full(len(keys), np.inf)  # a key absent from a list adds w / inf = 0.0 to its sum
        ranked[[places[key] for key, _ in ranking]] = np.arange(1, len(ranking) + 1)
        ranks[name] = ranked
    tops = []
    for k, weights in settings:
        fused = np.zeros(len(keys))
        for name, ranked in ranks.items():
            fused = fused + weights.get(name, 1.0) / (k + ranked)
        tops.append([keys[i] for i in np.argsort(-fused, kind="stable")[:n]])
    return tops


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


def convex_tops(rankings: Mapping[str, Ranking[K]], settings: Sequence[Mapping[str, float]], normalise: str,
                n: int) -> list[list[K]]:
    """For each weights of `settings`, the first `n` keys of convex(rankings,
    weights=weights, normalise=normalise), in its order, for a tuning grid: each list
    normalised once (by convex's own normalisers), each fusion a few numpy operations
    on the same floats added in the same order, over the keys in convex's own order
    (the same set, built the same way), sorted stably as convex sorts them."""
    norm = NORMALISERS[normalise]
    columns: dict[str, tuple[dict[K, float], float]] = {}
    for name, ranking in rankings.items():
        if ranking:
            values = norm([s for _, s in ranking])
            columns[name] = (dict(zip((key for key, _ in ranking), values, strict=True)),
                             0.0 if normalise == "minmax" else min(values) - 1.0)
    keys = list({key for scores, _ in columns.values() for key in scores})
    scored = {name: np.array([scores.get(key, floor) for key in keys]) for name, (scores, floor) in columns.items()}
    tops = []
    for weights in settings:
        fused = np.zeros(len(keys))
        for name, column in scored.items():
            fused = fused + weights.get(name, 0.0) * column
        tops.append([keys[i] for i in np.argsort(-fused, kind="stable")[:n]])
    return tops


def tiebreak(primary: Ranking[K], secondary: Mapping[K, float], *, places: int = 9) -> list[tuple[K, float]]:
    """Order by primary score, ties (to `places` decimals) by secondary score."""
    return sorted(primary, key=lambda item: (-round(item[1], places), -secondary.get(item[0], float("-inf"))))
