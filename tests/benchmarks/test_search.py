"""The search benchmark's reports: medians over runs, and which figures the targets hold."""

from __future__ import annotations

from benchmarks.search import LatencyReport, SearchBenchmark, median_report


def report(p95: float, mode: str = "bm25", chunks: int = 100_000) -> LatencyReport:
    return LatencyReport("bench", chunks, mode, 323, p50_ms=p95 / 4, p95_ms=p95, mean_ms=p95 / 2)


def test_repeated_runs_report_their_medians_and_every_p95():
    merged = median_report([report(30.0), report(90.0), report(40.0)])

    assert merged.p95_ms == 40.0
    assert merged.p50_ms == 10.0
    assert merged.p95_runs == [30.0, 90.0, 40.0]


def test_only_the_synthetic_catalog_is_held_to_the_targets():
    bench = SearchBenchmark(chunks=100_000, build_s=None, reports=[
        report(25.0), report(14.0, "vector"), report(99.0, chunks=8891), report(39.0, "hybrid")])

    assert [(r.mode, r.p95_ms) for r in bench.missed()] == [("bm25", 25.0)]
