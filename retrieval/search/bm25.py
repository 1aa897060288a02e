"""Okapi BM25 arithmetic, identical to rank_bm25.BM25Okapi, and exact scoring of packed
postings blocks; pure Python and numpy (the statements that read them: lexical.py).

idf(t) = ln((N - df + 0.5) / (df + 0.5)); a negative idf is floored to
epsilon * (mean idf over the whole vocabulary), as rank_bm25 does.
score(d, q) = sum over query tokens (repeats count) of
              idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)).

The per-term weights come first; then the blocks (catalog_termblock rows) summed in
numpy. Each posting's part of a score is computed exactly as the SQL walk computes it
(retrieval.search.lexical: round(w * tf / (tf + c1 + c2 * dl)) in float8, w the term's
weight times (k1 + 1) times 2**32), so every part is a whole number and a chunk's sum
is exact in float64 whatever order its parts are added in: the same scores, bit for
bit, and equal scores tie exactly and rank by chunk id.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from catalog.ranking import RankingSettings

EPSILON = 0.25
# Okapi BM25's parameters by default, as rank_bm25.BM25Okapi has them: k1, how fast a
# term's repeats in a chunk saturate; b, how much a chunk longer than the average is
# discounted. A catalog may set its own (catalog.ranking); every figure of
# docs/benchmarks.md was measured with these.
K1 = RankingSettings.k1
B = RankingSettings.b


def raw_idf(n_docs: int, df: int) -> float:
    return math.log(n_docs - df + 0.5) - math.log(df + 0.5)


def idf(n_docs: int, df: int, average_idf: float, epsilon: float = EPSILON) -> float:
    value = raw_idf(n_docs, df)
    return epsilon * average_idf if value < 0 else value


@dataclass(frozen=True)
class QueryTerm:
    term_id: int
    weight: float  # idf times the number of times the term occurs in the query
    upper_bound: float  # the most this term can add to any document's score
    df: int = 0  # documents (chunks) holding the term: the length of its postings
    # The BM25 parameters it is scored with: every term of a query has the same.
    k1: float = K1
    b: float = B
    repeats: int = 1  # times in the query; 0 for a term feedback added (its weight is its share)


def query_terms(
    tokens: Iterable[str], stats: dict[str, tuple[int, int]], *, n_docs: int, average_idf: float,
    k1: float = K1, b: float = B,
) -> list[QueryTerm]:
    """Weighted terms for the tokens that occur in the corpus, highest bound first.

    `stats` maps a term to (term id, document frequency).
    """
    counts = Counter(t for t in tokens if t in stats)
    terms = []
    for text, repeats in counts.items():
        term_id, df = stats[text]
        weight = idf(n_docs, df, average_idf) * repeats
        terms.append(QueryTerm(term_id, weight, max(weight, 0.0) * (k1 + 1), df, k1, b, repeats))
    return sorted(terms, key=lambda t: (-t.upper_bound, t.term_id))


# --- pseudo-relevance feedback (RM3) ------------------------------------------------------

# Feedback leaves out the terms of more than this share of the chunks (as Anserini's RM3
# does): they say little about what the first hits are about.
FEEDBACK_DF_SHARE = 0.1


class FeedbackChunk(NamedTuple):
    """A first-pass hit as feedback reads it: its score and its forward row."""

    score: float
    terms: Sequence[int]
    tfs: Sequence[int]
    length: int


def relevance_model(chunks: Sequence[FeedbackChunk], kept: int, allowed: Callable[[int], bool]) -> dict[int, float]:
    """RM1 over the first hits: each chunk's term distribution (tf / length) cut to its
    best `kept` terms and summed to 1, weighted by the chunk's score; the sum cut to
    its best `kept` terms that `allowed` keeps, summed to 1 ({} when nothing is left).
    Ties go to the lower term id, so the model does not depend on the rows' order."""
    model: dict[int, float] = {}
    for chunk in chunks:
        if chunk.score <= 0 or chunk.length <= 0:
            continue
        own = sorted(((tf / chunk.length, term) for term, tf in zip(chunk.terms, chunk.tfs, strict=True)
                      if allowed(term)), key=lambda pair: (-pair[0], pair[1]))[:kept]
        total = sum(p for p, _ in own)
        for p, term in own:
            model[term] = model.get(term, 0.0) + chunk.score * p / total
    best = sorted(model.items(), key=lambda item: (-item[1], item[0]))[:kept]
    total = sum(weight for _, weight in best)
    return {term: weight / total for term, weight in best} if total > 0 else {}


def expanded_terms(original: Sequence[QueryTerm], model: dict[int, float], stats: dict[int, int], *,
                   weight: float, n_docs: int, average_idf: float) -> list[QueryTerm]:
    """RM3: the query's own terms (each its share of the query's tokens) and the
    relevance `model`'s, interpolated: (1 - weight) * query + weight * model, times the
    query's token count, so that weight 0 gives the query's own weights back. `stats`:
    each model term's document frequency. Highest bound first, as query_terms."""
    if not original:
        return []
    k1, b = original[0].k1, original[0].b
    idfs = {t.term_id: t.weight / t.repeats for t in original if t.repeats}
    tokens = sum(t.repeats for t in original)
    share = {t.term_id: (1 - weight) * t.repeats / tokens for t in original}
    for term, p in model.items():
        share[term] = share.get(term, 0.0) + weight * p
    dfs = {t.term_id: t.df for t in original} | stats
    repeats = {t.term_id: t.repeats for t in original}
    terms = []
    for term, p in share.items():
        if p <= 0:  # a term weighted 0 (weight 0 or 1) would only add chunks scoring 0
            continue
        term_idf = idfs[term] if term in idfs else idf(n_docs, dfs[term], average_idf)
        w = term_idf * p * tokens
        terms.append(QueryTerm(term, w, max(w, 0.0) * (k1 + 1), dfs[term], k1, b, repeats.get(term, 0)))
    return sorted(terms, key=lambda t: (-t.upper_bound, t.term_id))


# --- packed postings blocks, scored exactly ------------------------------------------------

class BlockRow(NamedTuple):
    """A block as read: its term, its first chunk id, then its postings' chunk ids less
    the first, tfs and dls, each a big-endian int4 array."""

    term_id: int
    first_chunk_id: int
    chunk_ids: bytes
    tfs: bytes
    dls: bytes
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
    offsets = _int4s(row.chunk_ids for row in rows).astype(np.int64)
    counts = np.fromiter((len(row.chunk_ids) // 4 for row in rows), dtype=np.int64, count=len(rows))
    firsts = np.fromiter((row.first_chunk_id for row in rows), dtype=np.int64, count=len(rows))
    per_block = np.fromiter((weights[row.term_id] for row in rows), dtype=np.float64, count=len(rows))
    return Postings(
        chunk_ids=np.repeat(firsts, counts) + offsets,
        tfs=_int4s(row.tfs for row in rows).astype(np.float64),
        dls=_int4s(row.dls for row in rows).astype(np.float64),
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
        allowed = [(chunk, score) for chunk, score in best if chunk not in withheld]
        if len(allowed) >= k or len(best) < n:
            return allowed[:k]
        n *= 2
