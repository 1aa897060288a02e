"""Two modes compared query by query (seed 004's win rates), pure."""

from __future__ import annotations

import pytest

from retrieval.evaluation.comparison import compare


def test_wins_ties_and_losses_with_the_mean_lead_of_each_side():
    a = {"q1": 1.0, "q2": 0.5, "q3": 0.0, "q4": 0.25, "q5": 0.3}
    b = {"q1": 0.5, "q2": 0.5, "q3": 0.5, "q4": 0.0, "q5": 0.3 + 1e-12, "q6": 1.0}  # q6: a never ran it

    result = compare(a, b, a="hybrid", b="bm25", metric="ndcg_at_10")

    assert (result.wins, result.ties, result.losses, result.queries) == (2, 2, 1, 5)
    assert (result.win_rate, result.tie_rate, result.loss_rate) == (0.4, 0.4, 0.2)
    assert result.mean_gain_a == pytest.approx((0.5 + 0.25) / 2)
    assert result.mean_gain_b == pytest.approx(0.5)


def test_the_queries_that_differ_most_come_first_ties_left_out():
    a = {"q1": 1.0, "q2": 0.5, "q3": 0.0, "q4": 0.9}
    b = {"q1": 0.5, "q2": 0.5, "q3": 0.75, "q4": 0.8}

    result = compare(a, b, a="hybrid", b="bm25", metric="mrr_at_10", shown=2)

    assert [(d.query_id, d.delta) for d in result.differing] == [("q3", -0.75), ("q1", 0.5)]


def test_nothing_in_common_is_nothing_won():
    result = compare({"q1": 1.0}, {}, a="vector", b="bm25", metric="ndcg_at_10")

    assert (result.queries, result.win_rate, result.mean_gain_a, result.differing) == (0, 0.0, 0.0, [])
