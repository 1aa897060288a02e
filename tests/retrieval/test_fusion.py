"""Rank fusion, normalisation and tie-breaking, against hand-computed values (pure); the
per-document dedup is search's (tests/retrieval/test_search_api.py)."""

from __future__ import annotations

import math

import pytest

from retrieval.search.fusion import convex, minmax, rrf, tiebreak, zscore

BM25 = [("a", 10.0), ("b", 6.0), ("c", 2.0)]
VECTOR = [("b", 0.9), ("d", 0.5), ("a", 0.3)]


def keys(ranking) -> list:
    return [key for key, _ in ranking]


# --- RRF ------------------------------------------------------------------------------------


def test_rrf_sums_one_over_k_plus_rank_with_ranks_from_one():
    fused = dict(rrf({"bm25": BM25, "vector": VECTOR}, k=60))

    assert fused == pytest.approx({
        "a": 1 / 61 + 1 / 63,
        "b": 1 / 62 + 1 / 61,
        "c": 1 / 63,
        "d": 1 / 62,
    })


def test_rrf_orders_by_fused_score_ignoring_the_raw_scores():
    # given: raw scores on wildly different scales; only ranks matter
    fused = rrf({"bm25": [("x", 1000.0), ("y", 999.0)], "vector": [("y", 0.2), ("z", 0.1)]}, k=60)

    assert keys(fused) == ["y", "x", "z"]  # y: 1/62 + 1/61 beats x: 1/61 beats z: 1/62


def test_rrf_weights_scale_each_list_and_default_to_one():
    fused = dict(rrf({"bm25": BM25, "vector": VECTOR}, k=60, weights={"bm25": 2.0}))

    assert fused["a"] == pytest.approx(2 / 61 + 1 / 63)
    assert fused["b"] == pytest.approx(2 / 62 + 1 / 61)
    assert fused["d"] == pytest.approx(1 / 62)


def test_rrf_weights_can_change_the_winner():
    rankings = {"bm25": [("a", 1.0), ("b", 0.5)], "vector": [("b", 1.0), ("a", 0.5)]}

    assert keys(rrf(rankings, weights={"bm25": 1.0, "vector": 3.0}))[0] == "b"
    assert keys(rrf(rankings, weights={"bm25": 3.0, "vector": 1.0}))[0] == "a"


def test_rrf_k_sets_how_fast_ranks_decay():
    fused = dict(rrf({"bm25": BM25}, k=1))

    assert fused == pytest.approx({"a": 1 / 2, "b": 1 / 3, "c": 1 / 4})


def test_rrf_of_empty_lists_is_empty_and_one_list_keeps_its_order():
    assert rrf({"bm25": [], "vector": []}) == []
    assert keys(rrf({"bm25": BM25, "vector": []})) == ["a", "b", "c"]


def test_rrf_ties_keep_the_order_keys_were_first_met():
    fused = rrf({"bm25": [("p", 5.0)], "vector": [("q", 0.9)]}, k=60)

    assert keys(fused) == ["p", "q"]
    assert [score for _, score in fused] == pytest.approx([1 / 61, 1 / 61])


# --- normalisation and convex fusion ----------------------------------------------------------


def test_minmax_maps_the_range_onto_zero_one_and_a_flat_list_to_ones():
    assert minmax([3.0, 1.0, 2.0]) == [1.0, 0.0, 0.5]
    assert minmax([4.0, 4.0]) == [1.0, 1.0]


def test_zscore_uses_the_population_standard_deviation():
    root = math.sqrt(2 / 3)  # pstdev of 1, 2, 3

    assert zscore([1.0, 2.0, 3.0]) == pytest.approx([-1 / root, 0.0, 1 / root])
    assert zscore([7.0]) == [0.0]
    assert zscore([2.0, 2.0, 2.0]) == [0.0, 0.0, 0.0]


def test_convex_minmax_weighs_normalised_scores():
    # bm25 normalised: a 1, b 0.5, c 0; vector: b 1, d 1/3, a 0
    fused = convex({"bm25": BM25, "vector": VECTOR}, weights={"bm25": 0.7, "vector": 0.3})

    assert keys(fused) == ["a", "b", "d", "c"]
    assert dict(fused) == pytest.approx({
        "a": 0.7 * 1 + 0.3 * 0,
        "b": 0.7 * 0.5 + 0.3 * 1,
        "c": 0.7 * 0 + 0.3 * 0,  # missing from vector: vector's minimum, 0
        "d": 0.7 * 0 + 0.3 * (1 / 3),  # missing from bm25: bm25's minimum, 0
    })


def test_convex_zscore_puts_a_missing_key_one_deviation_below_the_lists_worst():
    # bm25 z-scores: a +r, b 0, c -r with r = 1/sqrt(2/3); vector (4, 2): c +1, a -1, b missing -> -2
    r = 1 / math.sqrt(2 / 3)
    bm25 = [("a", 3.0), ("b", 2.0), ("c", 1.0)]
    vector = [("c", 4.0), ("a", 2.0)]

    fused = convex({"bm25": bm25, "vector": vector}, weights={"bm25": 1.0, "vector": 1.0}, normalise="zscore")

    assert keys(fused) == ["a", "c", "b"]
    assert dict(fused) == pytest.approx({"a": r - 1, "c": -r + 1, "b": 0 + -2})


def test_convex_minmax_ranks_a_single_hit_list_above_its_missing_keys():
    fused = convex({"bm25": [("a", 3.0)], "vector": [("b", 0.9), ("a", 0.1)]},
                   weights={"bm25": 1.0, "vector": 0.0})

    assert dict(fused) == {"a": 1.0, "b": 0.0}


def test_convex_ignores_an_empty_list_and_a_component_without_weight():
    only_bm25 = convex({"bm25": BM25, "vector": []}, weights={"bm25": 0.5, "vector": 0.5})
    unweighted = convex({"bm25": BM25, "vector": VECTOR}, weights={"bm25": 1.0})

    assert only_bm25 == [("a", 0.5), ("b", 0.25), ("c", 0.0)]
    assert dict(unweighted) == pytest.approx({"a": 1.0, "b": 0.5, "c": 0.0, "d": 0.0})


def test_convex_rejects_an_unknown_normalisation():
    with pytest.raises(KeyError):
        convex({"bm25": BM25}, weights={"bm25": 1.0}, normalise="softmax")


# --- tie-break -------------------------------------------------------------------------


def test_tiebreak_orders_by_primary_then_secondary_within_the_rounding():
    primary = [("a", 2.0), ("b", 1.0), ("c", 2.0), ("d", 1.0 + 1e-12), ("e", 1.5)]
    secondary = {"a": 0.1, "b": 0.9, "c": 0.5}

    ordered = tiebreak(primary, secondary)

    # c before a (same primary, higher secondary); d ties b at 9 places and,
    # having no secondary score, goes last among them
    assert keys(ordered) == ["c", "a", "e", "b", "d"]
    assert dict(ordered) == dict(primary), "tie-breaking must not change the scores"


def test_tiebreak_keeps_primary_order_when_scores_differ_beyond_the_places():
    primary = [("a", 1.0 + 1e-6), ("b", 1.0)]

    assert keys(tiebreak(primary, {"a": 0.0, "b": 1.0})) == ["a", "b"]
    assert keys(tiebreak(primary, {"a": 0.0, "b": 1.0}, places=3)) == ["b", "a"]


def test_rrf_tops_are_rrfs_own_first_keys_ties_included():
    import random

    from retrieval.search.fusion import rrf_tops

    rng = random.Random(7)
    for _ in range(300):
        keys = rng.sample(range(60), rng.randint(0, 60))
        # often the same key at the same rank in one list as another key in the other: equal scores
        bm25 = [(key, 0.0) for key in rng.sample(keys, rng.randint(0, len(keys)))]
        vector = [(key, 0.0) for key in rng.sample(keys, rng.randint(0, len(keys)))]
        rankings = {"bm25": bm25, "vector": vector}
        settings = [(rng.choice([1, 5, 10, 60]), {"bm25": rng.choice([0.0, 0.5, 1.0]),
                                                  "vector": rng.choice([0.5, 1.0, 1.5])}) for _ in range(8)]
        n = rng.choice([1, 10, 100])
        assert rrf_tops(rankings, settings, n) == [
            [key for key, _ in rrf(rankings, k=k, weights=weights)[:n]] for k, weights in settings]
    # a ranking holding a key twice is fused by rrf itself, its repeats counted
    twice = {"bm25": [(1, 0.0), (2, 0.0), (1, 0.0)], "vector": [(2, 0.0)]}
    assert rrf_tops(twice, [(60, {"bm25": 1.0, "vector": 1.0})], 2) == [[key for key, _ in rrf(twice, k=60)]]


@pytest.mark.parametrize("normalise", ["minmax", "zscore"])
def test_convex_tops_are_convexs_own_first_keys_ties_included(normalise):
    import random

    from retrieval.search.fusion import convex_tops

    rng = random.Random(11)
    for _ in range(300):
        keys = rng.sample(range(60), rng.randint(0, 60))
        # scores from a few values: equal normalised scores, and so ties, are common
        rankings = {}
        for name in ("bm25", "vector"):
            held = rng.sample(keys, rng.randint(0, len(keys)))
            rankings[name] = sorted(((key, float(rng.randint(0, 4))) for key in held), key=lambda pair: -pair[1])
        shares = rng.sample([0.0, 0.3, 0.5, 0.7, 1.0], 3)
        settings = [{"bm25": share, "vector": round(1 - share, 2)} for share in shares]
        n = rng.choice([1, 10, 100])
        assert convex_tops(rankings, settings, normalise, n) == [
            [key for key, _ in convex(rankings, weights=weights, normalise=normalise)[:n]] for weights in settings]
