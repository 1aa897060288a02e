"""The bar chart's geometry (pure): bars scaled to a round maximum, a mode keeps its
colour in every group, ticks along the axis."""

from __future__ import annotations

import pytest

from retrieval.evaluation.chart import bar_chart, nice_ceiling


@pytest.mark.parametrize(("value", "ceiling"), [(0.0, 1.0), (0.73, 1.0), (1.0, 1.0), (13.2, 20.0), (2.2, 2.5),
                                                 (0.004, 0.005), (480, 500)])
def test_nice_ceiling(value, ceiling):
    assert nice_ceiling(value) == pytest.approx(ceiling)


def test_bars_are_scaled_grouped_and_coloured_by_mode():
    chart = bar_chart([("nDCG@10", [("bm25", 0.5), ("hybrid", 1.0)]), ("MRR@10", [("hybrid", 0.25)])],
                      scale=1.0, colours=["bm25", "vector", "hybrid"])

    first, second = chart.groups
    assert [bar.width for bar in first.bars] == [chart.plot_w / 2, chart.plot_w]
    assert [bar.colour for bar in first.bars + second.bars] == [0, 2, 2]
    assert [bar.text for bar in first.bars] == ["0.500", "1.000"]
    assert first.bars[1].y > first.bars[0].y and second.bars[0].y > first.bars[1].y
    assert chart.height > chart.plot_bottom > second.bars[0].y
    assert [tick.text for tick in chart.ticks] == ["0", "0.25", "0.5", "0.75", "1"]


def test_a_scale_from_the_data_and_a_unit():
    chart = bar_chart([("p50", [("bm25", 3.2), ("vector", 7.9)])], digits=1, unit=" ms")

    assert chart.ticks[-1].text == "10 ms"
    assert chart.groups[0].bars[1].text == "7.9 ms"
