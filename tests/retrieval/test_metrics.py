"""Ranking metrics as BEIR/pytrec_eval compute them, against hand-computed values (pure)."""

from __future__ import annotations

import math

import pytest

from retrieval.evaluation.metrics import dcg, mrr_at, ndcg_at, percentile, recall_at

QRELS = {"d1": 3, "d2": 2, "d3": 1, "d4": 0}


def test_dcg_discounts_gain_by_log2_of_rank_plus_one():
    assert dcg([3, 2, 1]) == pytest.approx(3 / 1 + 2 / math.log2(3) + 1 / 2)
    assert dcg([]) == 0


def test_ndcg_uses_graded_gains_and_the_ideal_ordering_of_all_qrels():
    # given: d3 (1) first, a miss, d1 (3), d2 (2); d4 is judged but not relevant
    ranked = ["d3", "x", "d1", "d2", "d4"]

    actual = 1 / 1 + 0 + 3 / 2 + 2 / math.log2(5) + 0
    ideal = 3 / 1 + 2 / math.log2(3) + 1 / 2
    assert ndcg_at(ranked, QRELS, 10) == pytest.approx(actual / ideal)
    assert ndcg_at(["d1", "d2", "d3"], QRELS, 10) == pytest.approx(1.0)


def test_ndcg_ideal_counts_relevant_documents_that_were_not_retrieved():
    # only d1 retrieved, first: the ideal still holds d2 and d3
    assert ndcg_at(["d1"], QRELS, 10) == pytest.approx(3 / (3 + 2 / math.log2(3) + 1 / 2))


def test_ndcg_cuts_both_ranking_and_ideal_at_k():
    qrels = {f"r{i}": 1 for i in range(12)}
    ranked = ["miss"] + [f"r{i}" for i in range(12)]

    ideal_at_10 = sum(1 / math.log2(i + 2) for i in range(10))
    actual_at_10 = sum(1 / math.log2(i + 2) for i in range(1, 10))
    assert ndcg_at(ranked, qrels, 10) == pytest.approx(actual_at_10 / ideal_at_10)
    assert ndcg_at(ranked, qrels, 1) == 0.0


def test_ndcg_is_zero_without_relevant_judgements_and_ignores_negative_grades():
    assert ndcg_at(["a", "b"], {"a": 0}, 10) == 0.0
    assert ndcg_at(["bad", "d1"], {"bad": -1, "d1": 1}, 10) == pytest.approx((1 / math.log2(3)) / 1)


def test_recall_counts_relevant_documents_in_the_top_k():
    ranked = ["x"] * 4 + ["d1"] + [f"y{i}" for i in range(95)] + ["d2"]  # d1 at 5, d2 at 101

    assert recall_at(ranked, QRELS, 100) == pytest.approx(1 / 3)
    assert recall_at(ranked, QRELS, 101) == pytest.approx(2 / 3)
    assert recall_at(["d4"], QRELS, 100) == 0.0  # grade 0 is not relevant
    assert recall_at(["a"], {}, 100) == 0.0


def test_mrr_is_the_reciprocal_rank_of_the_first_relevant_hit_within_k():
    assert mrr_at(["x", "d4", "d2", "d1"], QRELS, 10) == pytest.approx(1 / 3)
    assert mrr_at(["d1"], QRELS, 10) == 1.0
    assert mrr_at([f"x{i}" for i in range(10)] + ["d1"], QRELS, 10) == 0.0
    assert mrr_at([], QRELS, 10) == 0.0


@pytest.mark.parametrize(("values", "pct", "expected"), [
    ([5, 1, 3, 2, 4], 50, 3),      # the median of an odd-length list
    ([5, 1, 3, 2, 4], 95, 5),      # rank ceil(4.75) = 5
    ([5, 1, 3, 2, 4], 0, 1),       # rank at least 1
    ([5, 1, 3, 2, 4], 100, 5),
    ([10, 20, 30, 40], 50, 20),    # nearest rank: ceil(2) = 2, no interpolation
    (list(range(1, 101)), 99, 99),
    ([], 50, 0.0),
])
def test_percentile_is_nearest_rank(values, pct, expected):
    assert percentile(values, pct) == expected
