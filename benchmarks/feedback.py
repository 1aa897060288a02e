"""What each kind of pseudo-relevance feedback costs a search: the same queries searched
with each setting in turn, query by query (so a noisy moment hits every setting alike),
after a warm-up; latency per setting, and each one's median against none's."""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

from catalog.models import Catalog
from retrieval.evaluation.metrics import percentile
from retrieval.search.selectors import SearchOptions, chunk_search

# name -> (bm25_feedback, vector_feedback) it searches with (the other settings the catalog's)
SETTINGS: dict[str, tuple[int, int]] = {"none": (0, 0), "bm25": (10, 0), "vector": (0, 3), "both": (10, 3)}
MODES = ("bm25", "hybrid")


@dataclass
class FeedbackLatency:
    mode: str
    feedback: str
    queries: int
    p50_ms: float
    p95_ms: float
    p50_ratio: float  # its median over the median without feedback, same mode


def feedback_latency(*, catalog: Catalog, queries: list[str], rounds: int = 2, warmup: int = 20,
                     top_k: int = 10) -> list[FeedbackLatency]:
    runs = {(mode, name): SearchOptions(mode=mode, top_k=top_k, bm25_feedback=lexical, vector_feedback=vector)
            for mode in MODES for name, (lexical, vector) in SETTINGS.items()
            if mode == "hybrid" or not vector}  # vector feedback moves no BM25 list
    for query in queries[:warmup]:
        for options in runs.values():
            chunk_search(catalog=catalog, query=query, options=options)
    times: dict[tuple[str, str], list[float]] = {key: [] for key in runs}
    for _ in range(rounds):
        for query in queries:
            for key, options in runs.items():
                started = time.perf_counter()
                chunk_search(catalog=catalog, query=query, options=options)
                times[key].append((time.perf_counter() - started) * 1000)
    return [FeedbackLatency(mode, name, len(values), percentile(values, 50), percentile(values, 95),
                            statistics.median(values) / statistics.median(times[(mode, "none")]))
            for (mode, name), values in times.items()]


def as_dicts(results: list[FeedbackLatency]) -> list[dict[str, Any]]:
    return [asdict(result) for result in results]
