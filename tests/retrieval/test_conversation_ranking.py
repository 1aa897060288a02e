"""Seed 002's dedup and MMR over the hits of every query chunk (retrieval.conversations.ranking)."""

from __future__ import annotations

import numpy as np

from retrieval.conversations.ranking import Candidate, best_per_document, mmr

# seed 002's example, with a chunk found again by a second query chunk
FOUND = [Candidate(chunk=1, document=123, similarity=0.90, query_chunk=0),
         Candidate(chunk=2, document=123, similarity=0.85, query_chunk=1),
         Candidate(chunk=3, document=456, similarity=0.88, query_chunk=2),
         Candidate(chunk=4, document=456, similarity=0.82, query_chunk=2),
         Candidate(chunk=1, document=123, similarity=0.70, query_chunk=2),
         Candidate(chunk=5, document=123, similarity=0.80, query_chunk=0)]


def test_n_1_keeps_each_documents_best_chunk():
    kept = best_per_document(FOUND, 1)

    assert [(c.document, c.similarity) for c in kept] == [(123, 0.90), (456, 0.88)]


def test_n_2_keeps_two_chunks_of_each_document_never_one_chunk_twice():
    kept = best_per_document(FOUND, 2)

    assert [(c.chunk, c.similarity, c.query_chunk) for c in kept] == [(1, 0.90, 0), (3, 0.88, 2), (2, 0.85, 1),
                                                                      (4, 0.82, 2)]


def unit(*values: float) -> np.ndarray:
    vector = np.array(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


# Two near-copies about one thing, and a third about another, a little less similar.
CANDIDATES = [Candidate(1, 10, 0.90, 0), Candidate(2, 20, 0.89, 0), Candidate(3, 30, 0.80, 1)]
VECTORS = {1: unit(1, 0, 0), 2: unit(0.99, 0.1, 0), 3: unit(0, 0, 1)}


def test_lambda_1_is_the_similarity_order():
    assert mmr(CANDIDATES, VECTORS, lam=1.0, k=3) == CANDIDATES


def test_a_lower_lambda_ranks_the_different_hit_above_the_near_copy():
    order = [c.chunk for c in mmr(CANDIDATES, VECTORS, lam=0.5, k=3)]

    assert order == [1, 3, 2]


def test_lambda_near_1_keeps_the_order_and_k_bounds_the_answer():
    assert [c.chunk for c in mmr(CANDIDATES, VECTORS, lam=0.99, k=3)] == [1, 2, 3]
    assert [c.chunk for c in mmr(CANDIDATES, VECTORS, lam=0.5, k=2)] == [1, 3]
    assert mmr([], {}, lam=0.5, k=3) == []
