"""The measurement behind `python -m benchmarks bench --search`: search latency.

  1. wait until the real base catalog (NFCorpus) is indexed
  2. grow the synthetic catalog `bench-<N>` of exactly N chunks from it
     (benchmarks.synthetic), or reuse it
  3. time chunk_search (query embedding included) per mode over the NFCorpus test
     queries, on both catalogs, each figure the median of repeated runs; each run in a
     new Python process connected as the app's role, as a web process started after an
     import answers (on 2026-11-26 the process that had just built the catalog answered
     20 to 50% slower than new ones on every mode and catalog, small ones too; the cause
     was not found)
  4. check, untimed, that BM25's top k (at top_k and at the fusion depth) is the full
     SQL walk's for every query: the same chunks, order and scores, bit for bit
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from benchmarks import fresh
from benchmarks.common import BenchmarkError, Log, nfcorpus_test_queries
from benchmarks.synthetic import base_wait, bench_catalog_ensure
from catalog.embedder import get_embedder
from catalog.models import Catalog
from catalog.progress import Progress
from retrieval.evaluation.metrics import percentile
from retrieval.search.lexical import bm25_terms, bm25_top, bm25_walk
from retrieval.search.selectors import FUSION_DEPTH, SearchOptions, chunk_search
from retrieval.search.vector import embed_query

SEARCH_MODES = ("bm25", "vector", "hybrid")


@dataclass
class LatencyReport:
    catalog: str
    chunks: int
    mode: str
    queries: int
    p50_ms: float
    p95_ms: float
    mean_ms: float
    bm25_passes: float | None = None  # mean BM25 SQL passes per query (2: a probe pass fell back to a walk)
    p95_runs: list[float] = field(default_factory=list)  # each run's p95, when repeated


def _latency_report(catalog: Catalog, mode: str, latencies: list[float], passes: list[int]) -> LatencyReport:
    return LatencyReport(
        catalog=catalog.slug, chunks=catalog.chunk_count, mode=mode, queries=len(latencies),
        p50_ms=percentile(latencies, 50), p95_ms=percentile(latencies, 95), mean_ms=statistics.fmean(latencies),
        bm25_passes=statistics.fmean(passes) if mode in ("bm25", "hybrid") else None,
    )


def search_latency(*, catalog: Catalog, mode: str, queries: list[str], warmup: int = 20,
                   top_k: int = 10) -> LatencyReport:
    """Wall time of chunk_search per query (query embedding included), after `warmup` queries."""
    options = SearchOptions(mode=mode, top_k=top_k)
    for query in queries[:warmup]:
        chunk_search(catalog=catalog, query=query, options=options)
    latencies, passes = [], []
    for query in queries:
        started = time.perf_counter()
        result = chunk_search(catalog=catalog, query=query, options=options)
        latencies.append((time.perf_counter() - started) * 1000)
        passes.append(result.bm25_passes)
    return _latency_report(catalog, mode, latencies, passes)


def embed_latency(*, catalog: Catalog, queries: list[str], warmup: int = 20) -> LatencyReport:
    """The query-embedding share of vector and hybrid latency, timed alone."""
    for query in queries[:warmup]:
        embed_query(query)
    latencies = []
    for query in queries:
        started = time.perf_counter()
        embed_query(query)
        latencies.append((time.perf_counter() - started) * 1000)
    return _latency_report(catalog, "embed-only", latencies, [])


def catalog_latencies(*, catalog: Catalog, queries: list[str]) -> list[LatencyReport]:
    """One run: query embedding alone, then each search mode."""
    reports = [embed_latency(catalog=catalog, queries=queries)]
    return reports + [search_latency(catalog=catalog, mode=mode, queries=queries) for mode in SEARCH_MODES]


def latencies_in_new_process(*, slugs: list[str], dataset: Path) -> list[LatencyReport]:
    """catalog_latencies of each catalog in turn, in a new Python process (spawned: it
    shares nothing with this one but the environment)."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fresh.latencies, slugs, dataset).result()


def median_report(runs: list[LatencyReport]) -> LatencyReport:
    """Repeated runs of one catalog and mode as one report: the median of each figure."""
    def middle(name: str) -> float:
        return statistics.median(float(getattr(run, name)) for run in runs)

    return replace(runs[0], p50_ms=middle("p50_ms"), p95_ms=middle("p95_ms"), mean_ms=middle("mean_ms"),
                   p95_runs=[run.p95_ms for run in runs])


T = TypeVar("T")


@dataclass
class ExactCheck:
    catalog: str
    depth: int
    queries: int
    identical: int  # queries whose top `depth` equals the full SQL walk's (chunks, order, scores)
    # Each side's p50 and p95 in ms, timed query by query in turn (the same caches and
    # load for both): what the packed blocks buy over the walk, side by side.
    top_ms: tuple[float, float] = field(default=(0.0, 0.0), compare=False)
    walk_ms: tuple[float, float] = field(default=(0.0, 0.0), compare=False)


def _timed(call: Callable[..., T], times: list[float], *args: object) -> T:
    started = time.perf_counter()
    result = call(*args)
    times.append((time.perf_counter() - started) * 1000)
    return result


def exact_check(*, catalog: Catalog, queries: list[str], depth: int) -> ExactCheck:
    """How many queries get from bm25_top exactly the rows of bm25_walk, which sums
    every posting of the catalog's forward rows in SQL (the exact evaluation, not the
    blocks bm25_top reads); each timed, after the query's terms are looked up."""
    identical = 0
    top_times: list[float] = []
    walk_times: list[float] = []
    for query in queries:
        terms = bm25_terms(catalog, query)
        top = _timed(bm25_top, top_times, catalog, terms, depth)[0]
        identical += top == _timed(bm25_walk, walk_times, catalog, terms, depth)
    return ExactCheck(catalog.slug, depth, len(queries), identical,
                      (percentile(top_times, 50), percentile(top_times, 95)),
                      (percentile(walk_times, 50), percentile(walk_times, 95)))


def p95_targets(chunks: int) -> dict[str, float]:
    """The p95 goals in ms: issue 11's at 100k chunks, issue 21's at 1M."""
    if chunks >= 1_000_000:
        return {"bm25": 50.0, "vector": 15.0, "hybrid": 80.0}
    return {"bm25": 20.0, "vector": 15.0, "hybrid": 40.0}


@dataclass
class SearchBenchmark:
    chunks: int
    build_s: float | None
    reports: list[LatencyReport]
    exact: list[ExactCheck] = field(default_factory=list)
    targets_p95_ms: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.targets_p95_ms = self.targets_p95_ms or p95_targets(self.chunks)

    def missed(self) -> list[LatencyReport]:
        """The reports on the synthetic catalog whose p95 is over its target."""
        return [r for r in self.reports if r.chunks == self.chunks and r.mode in self.targets_p95_ms
                and r.p95_ms > self.targets_p95_ms[r.mode]]


def search_benchmark(*, chunks: int, base_slug: str, dataset: Path, rebuild: bool, repeat: int, seed: int = 42,
                     sigma: float = 0.02, wait_timeout_s: float = 7200, progress: Progress | None = None,
                     base_only: bool = False, log: Log) -> SearchBenchmark:
    """Latency on the base catalog and on a synthetic `bench-<chunks>` one (`base_only`:
    the base catalog alone, as it answers in a database without the synthetic one), each
    figure the median of `repeat` runs; see the module docstring."""
    queries = nfcorpus_test_queries(dataset)
    base = base_wait(slug=base_slug, poll_s=30, timeout_s=wait_timeout_s, log=log)
    bench, build_s = None, None
    if not base_only:
        bench, build_s = bench_catalog_ensure(base=base, chunks=chunks, rebuild=rebuild, seed=seed, sigma=sigma,
                                              log=log, progress=progress)
    if get_embedder() is None:
        raise BenchmarkError("no embedding model loaded: vector and hybrid latency cannot be measured")
    runs: dict[tuple[str, str], list[LatencyReport]] = {}
    catalogs = [base] if bench is None else [base, bench]
    for round_ in range(1, repeat + 1):
        for report in latencies_in_new_process(slugs=[catalog.slug for catalog in catalogs], dataset=dataset):
            runs.setdefault((report.catalog, report.mode), []).append(report)
            log(f"  run {round_}: {report.catalog} {report.mode} p50 {report.p50_ms:.1f} ms, "
                f"p95 {report.p95_ms:.1f} ms")
    depths = sorted({10, FUSION_DEPTH})
    exact = [exact_check(catalog=catalog, queries=queries, depth=depth)
             for catalog in catalogs for depth in depths]
    return SearchBenchmark(chunks, build_s, [median_report(r) for r in runs.values()], exact)


