"""The files-crossed count runs end to end: a search, an enrich and a reviewer's decision
each counted through the whole stack, on data it rolls back."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest
from benchmarks.files import files_crossed
from catalog.models import Catalog

pytestmark = pytest.mark.django_db


def test_each_request_is_counted_through_its_own_modules_and_leaves_nothing_behind():
    results = files_crossed()

    assert set(results) == {"search", "enrich", "decision"}
    assert "retrieval/search/selectors.py" in results["search"]
    assert "retrieval/enrichment/pipeline.py" in results["enrich"]
    assert "approvals/services/decisions.py" in results["decision"]
    assert not any(name.startswith(("tests/", "benchmarks/", ".venv/")) for files in results.values()
                   for name in files)
    assert not Catalog.objects.filter(slug="bench-files").exists()
    assert not ApprovalRequest.objects.exists()
