"""What a benchmark runs in a spawned process (benchmarks.search.latencies_in_new_process).
The process imports this module to find the function it was sent, before Django is set
up: so nothing here imports Django, the product or another benchmark module until the
function has called django.setup()."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchmarks.search import LatencyReport


def latencies(slugs: list[str], dataset: Path) -> list[LatencyReport]:
    """benchmarks.search.catalog_latencies of each catalog in turn, over the dataset's test queries."""
    import django

    django.setup()
    from benchmarks.common import nfcorpus_test_queries
    from benchmarks.search import catalog_latencies
    from catalog.models import Catalog

    queries = nfcorpus_test_queries(dataset)
    return [report for slug in slugs
            for report in catalog_latencies(catalog=Catalog.objects.get(slug=slug), queries=queries)]
