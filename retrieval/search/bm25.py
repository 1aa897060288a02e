"""Okapi BM25 arithmetic, identical to rank_bm25.BM25Okapi; pure Python.

idf(t) = ln((N - df + 0.5) / (df + 0.5)); a negative idf is floored to
epsilon * (mean idf over the whole vocabulary), as rank_bm25 does.
score(d, q) = sum over query tokens (repeats count) of
              idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)).

The postings come from Postgres and are summed in numpy (retrieval.search.blockscore)
or in SQL (the reference walk); this module supplies the per-term weights.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

EPSILON = 0.25
# Okapi BM25's parameters, as rank_bm25.BM25Okapi has them: k1, how fast a term's repeats
# in a chunk saturate; b, how much a chunk longer than the average is discounted. Every
# BM25 score and the figures of docs/benchmarks.md were measured with these values.
K1 = 1.2
B = 0.75


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

