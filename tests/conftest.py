"""Shared fixtures: a real embedded Postgres (pytest-django's test database), the real
ONNX embedder, and named callers per role."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog.models import Catalog
from catalog.sources.documents import DocumentInput
from tests.factories import agent_with_token, import_documents

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"


@pytest.fixture
def make_catalog(db):
    def make(slug: str = "docs", **fields) -> Catalog:
        return Catalog.objects.create(slug=slug, name=fields.pop("name", slug.title()), **fields)

    return make


@pytest.fixture
def indexed_catalog(make_catalog):
    """A small catalog indexed through the real write path (chunker, ONNX, Postgres)."""
    catalog = make_catalog("ops")
    documents = [
        DocumentInput("circuit-breaker.md", "Circuit breaker",
                      "A circuit breaker stops calls to a failing dependency. After repeated failures it opens; "
                      "after a cool-down it lets one trial request through.", 140),
        DocumentInput("retries.md", "Retries", "Retry transient failures with exponential backoff and jitter. "
                      "Cap the number of attempts.", 90),
        DocumentInput("caching.md", "Caching", "Cache responses with a time to live. Invalidate the cache on "
                      "every write to the underlying record.", 100),
        DocumentInput("logging.md", "Logging", "Log in JSON. Never log secrets or tokens in clear text.", 60),
    ]
    import_documents(catalog=catalog, slug="handbook", documents=documents)
    catalog.refresh_from_db()
    return catalog


@pytest.fixture
def agent_token(db):
    """make(name, catalogs) -> bearer token of a new agent scoped to those catalogs."""

    def make(name: str, catalogs: list[Catalog]) -> str:
        _, token = agent_with_token(name=name, catalogs=catalogs)
        return token

    return make


@pytest.fixture(scope="module")
def demo(django_db_setup, django_db_blocker):
    """The shipped demo catalog (13 references) with the demo agent's token, loaded
    once per module inside a transaction rolled back when the module is done, its
    detection profiles embedded as `manage.py load_demo` does; each test runs in a
    savepoint inside it, so tests still cannot see each other."""
    from django.db import transaction

    from catalog.demo_loader import demo_load
    from retrieval.enrichment.detection import catalog_index

    with django_db_blocker.unblock():
        outer = transaction.atomic()
        outer.__enter__()
        try:
            report = demo_load()
            catalog_index(report.catalog)
            yield report
        finally:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)
