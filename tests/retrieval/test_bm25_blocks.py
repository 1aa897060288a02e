"""retrieval.search.bm25's block scoring, pure: packed postings blocks scored in numpy give the
brute-force top k (scores, order, ties by chunk id, withheld chunks left out) for any
corpus, query and block size."""

from __future__ import annotations

import struct

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.search import bm25

C1, C2 = 1.2 * 0.25, 1.2 * 0.75 / 37.5  # k1 (1 - b) and k1 b / avgdl, as lexical passes them


def _pack(values: list[int]) -> bytes:
    return struct.pack(f">{len(values)}i", *values)


def blocks_of(postings: dict[int, list[tuple[int, int, int]]], size: int) -> list[bm25.BlockRow]:
    """Each term's (chunk id, tf, dl) postings, in chunk order, as rows of `size` (the
    write path's packing: ids less the block's first)."""
    rows = []
    for term, entries in postings.items():
        ordered = sorted(entries)
        for start in range(0, len(ordered), size):
            block = ordered[start:start + size]
            first = block[0][0]
            rows.append(bm25.BlockRow(term, first, _pack([c - first for c, _, _ in block]),
                                      _pack([tf for _, tf, _ in block]), _pack([dl for _, _, dl in block])))
    return rows


def brute_force(postings: dict[int, list[tuple[int, int, int]]], weights: dict[int, float],
                withheld: set[int], k: int) -> list[tuple[int, float]]:
    """One posting at a time in plain Python: each part rounded half to even, summed per
    chunk, ranked by score then chunk id."""
    scores: dict[int, float] = {}
    for term, entries in postings.items():
        for chunk, tf, dl in entries:
            part = float(round(weights[term] * tf / ((tf + C1) + C2 * dl)))
            scores[chunk] = scores.get(chunk, 0.0) + part
    ranked = sorted(((c, s) for c, s in scores.items() if c not in withheld), key=lambda row: (-row[1], row[0]))
    return ranked[:k]


@st.composite
def corpora(draw: st.DrawFn) -> tuple[dict[int, list[tuple[int, int, int]]], dict[int, float]]:
    """Chunks with lengths, some dense in id and some far apart (both ways of summing),
    terms holding random subsets of them with random tfs, and term weights; few
    distinct tfs and lengths, so that equal scores (ties) are common."""
    n = draw(st.integers(1, 60))
    gap = draw(st.sampled_from([1, 3, 10_000]))
    ids = sorted(draw(st.sets(st.integers(1, n * gap), min_size=n, max_size=n)))
    lengths = {c: draw(st.integers(1, 6)) * 10 for c in ids}
    postings: dict[int, list[tuple[int, int, int]]] = {}
    weights: dict[int, float] = {}
    for term in range(draw(st.integers(1, 6))):
        holders = draw(st.lists(st.sampled_from(ids), min_size=1, unique=True))
        postings[term] = [(c, draw(st.integers(1, 3)), lengths[c]) for c in holders]
        weights[term] = draw(st.sampled_from([0.0, 0.5, 1.25, 3.0, 7.75])) * 2.2 * 2.0**32
    return postings, weights


def search(postings, weights, withheld: set[int], k: int, size: int) -> list[tuple[int, float]]:
    decoded = bm25.postings_decode(blocks_of(postings, size), weights)
    chunk_ids, sums = bm25.chunk_sums(decoded.chunk_ids, bm25.parts(decoded, C1, C2))
    return bm25.top_allowed(chunk_ids, sums, k, lambda chunks: {c for c in chunks if c in withheld})


@settings(max_examples=300, deadline=None)
@given(corpus=corpora(), k=st.integers(1, 12), size=st.integers(1, 7), data=st.data())
def test_the_top_k_of_packed_blocks_is_the_brute_force_top_k(corpus, k, size, data):
    postings, weights = corpus
    chunks = sorted({c for entries in postings.values() for c, _, _ in entries})
    withheld = set(data.draw(st.lists(st.sampled_from(chunks), unique=True)))

    assert search(postings, weights, withheld, k, size) == brute_force(postings, weights, withheld, k)


def test_equal_scores_tie_exactly_and_rank_by_chunk_id():
    # given: five chunks with the same postings, far apart in id (summed by sorting)
    postings = {0: [(c, 2, 30) for c in (90_000, 7, 40_000, 12, 500_000)], 1: [(12, 1, 30), (7, 1, 30)]}
    weights = {0: 1.7 * 2.0**32, 1: 0.3 * 2.0**32}

    top = search(postings, weights, set(), 4, 2)

    assert [c for c, _ in top] == [7, 12, 40_000, 90_000]
    assert top[0][1] == top[1][1] and top[2][1] == top[3][1] and top[1][1] > top[2][1]


def test_withheld_chunks_give_up_their_places_however_many_of_the_best_they_are():
    # given: the 20 best chunks are withheld: asking for the best 3 must look past them
    postings = {0: [(c, 1 + (c <= 20), 30) for c in range(1, 41)]}
    weights = {0: 2.0 * 2.0**32}
    asked: list[int] = []

    def withheld_among(chunks: list[int]) -> set[int]:
        asked.append(len(chunks))
        return {c for c in chunks if c <= 20}

    decoded = bm25.postings_decode(blocks_of(postings, 8), weights)
    chunk_ids, sums = bm25.chunk_sums(decoded.chunk_ids, bm25.parts(decoded, C1, C2))
    top = bm25.top_allowed(chunk_ids, sums, 3, withheld_among)

    assert [c for c, _ in top] == [21, 22, 23]
    assert asked == [3, 6, 12, 24]  # doubled until three allowed chunks were among them


def test_no_postings_rank_nothing():
    decoded = bm25.postings_decode([], {})
    chunk_ids, sums = bm25.chunk_sums(decoded.chunk_ids, bm25.parts(decoded, C1, C2))

    assert bm25.top_allowed(chunk_ids, sums, 10, lambda chunks: set()) == []
    assert len(chunk_ids) == 0 and sums.dtype == np.float64
