"""Reindexing benchmark: a synthetic catalog of markdown files, one edit, timed.

Measures, on one glob source of N files:
  - the cold full build (every chunk embedded),
  - a scan of the unchanged source (fingerprint from stat calls only),
  - one file edited: change detected and reindexed end to end (scan + run),
  - a forced full rebuild (every document re-chunked; vectors from the cache).
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from catalog.indexing.runs import source_index_now
from catalog.models import Catalog, IndexRun, ReferenceSource
from catalog.sources.documents import source_fingerprint

WORDS = ("retry backoff jitter circuit breaker cache invalidation token secret rotation logging json metric "
         "trace span queue worker lock lease shard replica index vector search ranking fusion chunk budget "
         "deadline timeout failure transient outage alert page review test deploy rollback schema migration "
         "column default backfill latency throughput capacity quota tenant region failover").split()


@dataclass
class ReindexFigures:
    files: int
    cold_build_s: float
    scan_unchanged_s: list[float]
    edit_to_indexed_s: list[float]
    full_rebuild_s: float

    def as_dict(self) -> dict[str, object]:
        return {"files": self.files, "cold_build_s": round(self.cold_build_s, 2),
                "scan_unchanged_median_s": round(statistics.median(self.scan_unchanged_s), 4),
                "edit_to_indexed_median_s": round(statistics.median(self.edit_to_indexed_s), 3),
                "edit_to_indexed_max_s": round(max(self.edit_to_indexed_s), 3),
                "full_rebuild_s": round(self.full_rebuild_s, 2),
                "ratio_full_over_edit": round(self.full_rebuild_s / statistics.median(self.edit_to_indexed_s), 1)}


def _page(rng: random.Random, number: int) -> str:
    title = f"Runbook {number}: " + " ".join(rng.sample(WORDS, 3))
    sentences = [" ".join(rng.choices(WORDS, k=rng.randint(6, 14))).capitalize() + "." for _ in range(6)]
    return f"# {title}\n\n" + " ".join(sentences) + "\n"


def write_corpus(directory: Path, count: int, *, seed: int = 10_000) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    for number in range(count):
        path = directory / f"page-{number:05d}.md"
        if not path.exists():
            path.write_text(_page(rng, number), encoding="utf-8")


def bench_source(count: int) -> ReferenceSource:
    root = Path(settings.LECTERN_SOURCE_ROOTS[-1])
    folder = f"bench-{count}"
    write_corpus(root / folder, count)
    catalog, _ = Catalog.objects.get_or_create(slug=f"bench-reindex-{count}", defaults={"name": f"{count} pages"})
    source, _ = ReferenceSource.objects.get_or_create(
        catalog=catalog, slug="pages", defaults={"name": "Pages", "kind": "glob",
                                                  "location": str(root / folder / "*.md")})
    return source


def _run(source: ReferenceSource, *, full: bool = False) -> IndexRun:
    return source_index_now(source=source, trigger=IndexRun.Trigger.COMMAND, full=full)


def _timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def run_reindex_bench(*, count: int = 10_000, edits: int = 5,
                      log: Callable[[str], object] = print) -> ReindexFigures:
    source = bench_source(count)
    cold = _timed(lambda: _run(source))  # cold only on the first run: the embedding cache persists
    log(f"build: {cold:.1f}s")
    source.refresh_from_db()
    scans = [_timed(lambda: source_fingerprint(source=source)) for _ in range(5)]
    log(f"scan of the unchanged source: median {statistics.median(scans):.3f}s")
    rng = random.Random()
    edit_times = []
    for i in range(edits):
        path = Path(source.location).parent / f"page-{rng.randrange(count):05d}.md"
        path.write_text(path.read_text(encoding="utf-8") + f"\nEdited {time.time_ns()} {i}: a new runbook note.\n",
                        encoding="utf-8")

        def detect_and_index() -> None:
            runs = sources_scan_one(source)
            assert runs == 1, f"the edit was not detected ({runs} runs)"

        edit_times.append(_timed(detect_and_index))
        log(f"edit {i + 1}: detected and reindexed in {edit_times[-1]:.2f}s")
    full = _timed(lambda: _run(source, full=True))
    log(f"full rebuild (vectors from the cache): {full:.1f}s")
    return ReindexFigures(count, cold, scans, edit_times, full)


def sources_scan_one(source: ReferenceSource) -> int:
    """What the scheduled scan does for one source, then the worker's run, in-process."""
    source.refresh_from_db()
    if source_fingerprint(source=source) == source.fingerprint:
        return 0
    _run(source)
    return 1

