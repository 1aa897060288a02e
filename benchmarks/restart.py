"""The measurement behind `python -m benchmarks bench_restart`: the first searches after
the database server restarts.

For each catalog and mode, each round:
  1. stop and start the embedded Postgres (config.embedded_pg): its shared buffers are
     empty (the operating system's page cache is left as it is: this machine is shared,
     and dropping it would need root and slow everyone's work)
  2. time the first `queries` NFCorpus test queries through chunk_search, the query
     embedding included (the model is loaded before the first restart)
Each figure is the median over the rounds.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from django.db import connection

from benchmarks.common import BenchmarkError, Log, nfcorpus_test_queries
from catalog.models import Catalog
from retrieval.search.selectors import SearchOptions, chunk_search
from retrieval.search.vector import embed_query


@dataclass
class RestartReport:
    catalog: str
    chunks: int
    mode: str
    first_ms: float  # the first query after the restart
    mean_ms: float  # the mean of the first `queries`
    first_runs: list[float] = field(default_factory=list)  # each round's first query


def server_restart() -> None:
    """Stop and start the embedded server; the next query opens a new connection."""
    from config import embedded_pg

    if os.environ.get("DATABASE_URL"):
        raise BenchmarkError("bench_restart restarts the embedded Postgres; DATABASE_URL names another server")
    connection.close()
    embedded_pg.stop()
    embedded_pg.ensure_running()


def first_searches(catalog: Catalog, mode: str, queries: list[str]) -> list[float]:
    """Milliseconds of each search, in order, right after a restart."""
    server_restart()
    options = SearchOptions(mode=mode, top_k=10)
    latencies = []
    for query in queries:
        started = time.perf_counter()
        chunk_search(catalog=catalog, query=query, options=options)
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def restart_benchmark(*, dataset: Path, slugs: list[str], modes: list[str], queries: int, rounds: int,
                      log: Log) -> list[RestartReport]:
    texts = nfcorpus_test_queries(dataset)[:queries]
    catalogs = []
    for slug in slugs:
        catalog = Catalog.objects.filter(slug=slug).first()
        if catalog is None:
            raise BenchmarkError(f"no catalog {slug!r}")
        catalogs.append(catalog)
    embed_query(texts[0])  # the model loaded once, before any timing
    runs: dict[tuple[str, str], list[list[float]]] = {}
    for round_ in range(1, rounds + 1):
        for catalog in catalogs:
            for mode in modes:
                latencies = first_searches(catalog, mode, texts)
                runs.setdefault((catalog.slug, mode), []).append(latencies)
                log(f"  round {round_}: {catalog.slug} {mode}: first {latencies[0]:.1f} ms, "
                    f"mean of {len(latencies)} {statistics.fmean(latencies):.1f} ms")
    chunks = {c.slug: c.chunk_count for c in catalogs}
    return [restart_report(slug, chunks[slug], mode, rounds_) for (slug, mode), rounds_ in runs.items()]


def restart_report(catalog: str, chunks: int, mode: str, rounds: list[list[float]]) -> RestartReport:
    """One catalog and mode over its rounds (each the milliseconds of the searches after
    one restart, in order): the median of the first searches and of each round's mean."""
    firsts = [latencies[0] for latencies in rounds]
    return RestartReport(catalog, chunks, mode, first_ms=statistics.median(firsts),
                         mean_ms=statistics.median(statistics.fmean(latencies) for latencies in rounds),
                         first_runs=firsts)
