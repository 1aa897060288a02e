"""Exact BM25 over packed postings blocks (catalog_termblock rows); pure numpy.

Each posting's part of a score is computed exactly as the SQL walk computes it
(retrieval.search.lexical: round(w * tf / (tf + c1 + c2 * dl)) in float8, w the term's
weight times (k1 + 1) times 2**32), so every part is a whole number and a chunk's sum
is exact in float64 whatever order its parts are added in: the same scores, bit for
bit, and equal scores tie exactly and rank by chunk id.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

# A block as read: term id, first chunk id, then its postings' chunk ids less the first,
# tfs and dls, each a big-endian int4 array.
BlockRow = tuple[int, int, bytes, bytes, bytes]
# Dense sums (one slot per chunk id between the least and the greatest) while the ids
# span at most this many times the postings; sorting beyond, where slots would be wasted.
DENSE_SPAN = 8


@dataclass(frozen=True)
class Postings:
    """A query's postings as parallel arrays: chunk id, tf, dl, and the scaled weight
    of the term each belongs to."""

    chunk_ids: np.ndarray
    tfs: np.ndarray
    dls: np.ndarray
    weights: np.ndarray


def _int4s(parts: Iterable[bytes]) -> np.ndarray:
    return np.frombuffer(b"".join(parts), dtype=">i4")


def postings_decode(rows: Sequence[BlockRow], weights: dict[int, float]) -> Postings:
    """The postings of `rows`, each weighted by `weights[term id]`."""
    offsets = _int4s(row[2] for row in rows).astype(np.int64)
    counts = np.fromiter((len(row[2]) // 4 for row in rows), dtype=np.int64, count=len(rows))
    firsts = np.fromiter((row[1] for row in rows), dtype=np.int64, count=len(rows))
    per_block = np.fromiter((weights[row[0]] for row in rows), dtype=np.float64, count=len(rows))
    return Postings(
        chunk_ids=np.repeat(firsts, counts) + offsets,
        tfs=_int4s(row[3] for row in rows).astype(np.float64),
        dls=_int4s(row[4] for row in rows).astype(np.float64),
        weights=np.repeat(per_block, counts),
    )


def parts(postings: Postings, c1: float, c2: float) -> np.ndarray:
    """Each posting's part, rounded to a whole number: round(w * tf / (tf + c1 + c2 *
    dl)), operation for operation as the SQL computes it (rint: Postgres rounds float8
    halves to even)."""
    p = postings
    rounded: np.ndarray = np.rint(p.weights * p.tfs / ((p.tfs + c1) + c2 * p.dls))
    return rounded


def chunk_sums(chunk_ids: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each distinct chunk id (ascending) and the sum of its `values`."""
    if not len(chunk_ids):
        return chunk_ids, values
    low, high = int(chunk_ids.min()), int(chunk_ids.max())
    if high - low < DENSE_SPAN * len(chunk_ids):
        sums = np.bincount(chunk_ids - low, weights=values, minlength=high - low + 1)
        seen = np.zeros(high - low + 1, dtype=bool)
        seen[chunk_ids - low] = True
        present = np.flatnonzero(seen)
        return present + low, sums[present]
    order = np.argsort(chunk_ids, kind="stable")  # the terms' runs are each sorted already
    ordered = chunk_ids[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    return ordered[starts], np.add.reduceat(values[order], starts)


def ranked(chunk_ids: np.ndarray, scores: np.ndarray, n: int) -> list[tuple[int, float]]:
    """The best `n` (chunk id, score) by score, highest first, then by chunk id."""
    if n <= 0 or not len(chunk_ids):
        return []
    if len(chunk_ids) > n:
        kth = np.partition(scores, len(scores) - n)[len(scores) - n]  # the n-th highest
        keep = np.flatnonzero(scores >= kth)  # ties at the n-th place stay, to rank by id
        chunk_ids, scores = chunk_ids[keep], scores[keep]
    order = np.lexsort((chunk_ids, -scores))[:n]
    return list(zip(chunk_ids[order].tolist(), scores[order].tolist(), strict=True))


def top_allowed(chunk_ids: np.ndarray, scores: np.ndarray, k: int,
                withheld_among: Callable[[list[int]], set[int]]) -> list[tuple[int, float]]:
    """The best `k` chunks that `withheld_among` (which of these chunk ids are withheld?)
    does not name, in ranked order: the best k, then twice as many each time withheld
    ones took places, until k are left or every chunk was looked at."""
    n = k
    while True:
        best = ranked(chunk_ids, scores, n)
        withheld = withheld_among([chunk for chunk, _ in best]) if best else set()
        allowed = [row for row in best if row[0] not in withheld]
        if len(allowed) >= k or len(best) < n:
            return allowed[:k]
        n *= 2
