"""Okapi BM25 arithmetic, identical to rank_bm25.BM25Okapi; pure Python.

idf(t) = ln((N - df + 0.5) / (df + 0.5)); a negative idf is floored to
epsilon * (mean idf over the whole vocabulary), as rank_bm25 does.
score(d, q) = sum over query tokens (repeats count) of
              idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)).

The search itself runs in Postgres; this module supplies the per-term weights, their
upper bounds, and the choice of terms too common to walk (MaxScore: such a term is
probed only for the chunks that could still reach the top).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

EPSILON = 0.25


def raw_idf(n_docs: int, df: int) -> float:
    return math.log(n_docs - df + 0.5) - math.log(df + 0.5)


def idf(n_docs: int, df: int, average_idf: float, epsilon: float = EPSILON) -> float:
    value = raw_idf(n_docs, df)
    return epsilon * average_idf if value < 0 else value


def term_score(tf: float, dl: float, avgdl: float, k1: float, b: float) -> float:
    return tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))


@dataclass(frozen=True)
class QueryTerm:
    term_id: int
    weight: float  # idf times the number of times the term occurs in the query
    upper_bound: float  # the most this term can add to any document's score
    df: int = 0  # documents (chunks) holding the term: the length of its postings


def query_terms(
    tokens: Iterable[str], stats: dict[str, tuple[int, int]], *, n_docs: int, average_idf: float, k1: float
) -> list[QueryTerm]:
    """Weighted terms for the tokens that occur in the corpus, highest bound first.

    `stats` maps a term to (term id, document frequency).
    """
    counts = Counter(t for t in tokens if t in stats)
    terms = []
    for text, repeats in counts.items():
        term_id, df = stats[text]
        weight = idf(n_docs, df, average_idf) * repeats
        terms.append(QueryTerm(term_id, weight, max(weight, 0.0) * (k1 + 1), df))
    return sorted(terms, key=lambda t: (-t.upper_bound, t.term_id))


def terms_to_probe(terms: Sequence[QueryTerm], *, ratio: float) -> list[QueryTerm]:
    """The lowest-bound terms (a suffix of `terms`, which are sorted by bound, highest
    first) worth probing instead of walking: each holds more than `ratio` times as many
    postings as the walked terms together, so probing it for their candidates costs
    less than walking it; and together they weigh less than the strongest term, so
    they can likely be skipped (see can_skip). As many as qualify; at least one term
    is always walked.
    """
    # Linear in the terms (a pasted passage brings hundreds): the probed side's least df
    # and summed bound for every cut, from the end.
    least_df, bound = [0] * len(terms), [0.0] * len(terms)
    for i in range(len(terms) - 1, 0, -1):
        least_df[i] = min(terms[i].df, least_df[i + 1]) if i + 1 < len(terms) else terms[i].df
        bound[i] = terms[i].upper_bound + (bound[i + 1] if i + 1 < len(terms) else 0.0)
    walked_df = 0
    for cut in range(1, len(terms)):
        walked_df += terms[cut - 1].df
        if least_df[cut] > ratio * walked_df and bound[cut] < terms[0].upper_bound:
            return list(terms[cut:])
    return []


def can_skip(probed: Sequence[QueryTerm], threshold: float, *, slack: float = 1e-6) -> bool:
    """MaxScore: whether a document holding none of the walked terms (so at most the
    probed terms' bounds) scores below `threshold`, a score k documents reach, and so
    cannot enter the top k. `slack` absorbs floating-point rounding."""
    return sum(t.upper_bound for t in probed) + slack < threshold
