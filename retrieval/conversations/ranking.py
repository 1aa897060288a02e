"""What conversation retrieval does with the hits of all its query chunks, pure: one
entry per catalog chunk, the best `n` per document, and maximal
marginal relevance to trade similarity for variety."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Candidate:
    chunk: int  # catalog chunk pk
    document: int  # its document's pk
    similarity: float  # cosine, to the query chunk that found it
    query_chunk: int  # index of that query chunk


def _order(candidate: Candidate) -> tuple[float, int, int]:
    return -candidate.similarity, candidate.chunk, candidate.query_chunk


def best_per_document(candidates: Sequence[Candidate], n: int) -> list[Candidate]:
    """Most similar first: each catalog chunk once (found by several query chunks, the
    most similar finding counts), at most `n` chunks of each document."""
    seen: set[int] = set()
    kept: dict[int, int] = {}
    ranked = []
    for candidate in sorted(candidates, key=_order):
        if candidate.chunk in seen or kept.get(candidate.document, 0) >= n:
            continue
        seen.add(candidate.chunk)
        kept[candidate.document] = kept.get(candidate.document, 0) + 1
        ranked.append(candidate)
    return ranked


def mmr(candidates: Sequence[Candidate], vectors: dict[int, np.ndarray], *, lam: float, k: int) -> list[Candidate]:
    """Up to `k` candidates picked one at a time by maximal marginal relevance: the one
    with the highest lam * similarity - (1 - lam) * (its greatest cosine to one already
    picked). `vectors` holds each candidate chunk's unit embedding; lam = 1 is the
    similarity order, lam = 0 picks the most similar, then whatever differs most.
    Ties go to the earlier candidate (the input order)."""
    if not candidates:
        return []
    matrix = np.vstack([vectors[c.chunk] for c in candidates]).astype(np.float64)
    relevance = np.array([c.similarity for c in candidates])
    redundancy = np.full(len(candidates), -np.inf)  # greatest cosine to a picked one
    available = np.ones(len(candidates), dtype=bool)
    picked: list[int] = []
    while len(picked) < min(k, len(candidates)):
        penalty = np.where(np.isinf(redundancy), 0.0, redundancy)
        scores = np.where(available, lam * relevance - (1 - lam) * penalty, -np.inf)
        best = int(np.argmax(scores))
        picked.append(best)
        available[best] = False
        redundancy = np.maximum(redundancy, matrix @ matrix[best])
    return [candidates[i] for i in picked]
