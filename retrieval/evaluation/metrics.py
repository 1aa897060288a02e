"""Ranking quality metrics as BEIR/pytrec_eval compute them; pure Python.

`qrels` maps document id -> graded relevance (> 0 is relevant); `ranked` is the list of
retrieved document ids, best first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def dcg(gains: Sequence[float]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def ndcg_at(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    """nDCG@k with linear gains (trec_eval's ndcg_cut, as BEIR reports it)."""
    ideal = dcg(sorted((g for g in qrels.values() if g > 0), reverse=True)[:k])
    if ideal == 0:
        return 0.0
    return dcg([max(qrels.get(doc, 0), 0) for doc in ranked[:k]]) / ideal


def recall_at(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    relevant = {doc for doc, g in qrels.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def mrr_at(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    for i, doc in enumerate(ranked[:k]):
        if qrels.get(doc, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (p50 is the median of an odd-length list)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]
