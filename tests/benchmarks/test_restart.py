"""The restart benchmark's report: medians over rounds of the first searches after a restart."""

from __future__ import annotations

from benchmarks.restart import restart_report


def test_each_round_gives_its_first_search_and_its_mean_and_the_report_their_medians():
    rounds = [[700.0, 10.0, 10.0], [150.0, 30.0, 20.0], [180.0, 12.0, 9.0]]

    report = restart_report("nfcorpus", 8845, "vector", rounds)

    assert report.first_runs == [700.0, 150.0, 180.0]
    assert report.first_ms == 180.0  # one slow round does not move the median
    assert report.mean_ms == 67.0  # the rounds' means are 240, 200/3 and 67
    assert (report.catalog, report.chunks, report.mode) == ("nfcorpus", 8845, "vector")
