"""Shared fixtures: a real embedded Postgres (pytest-django's test database), the real
ONNX embedder, and named callers per role."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog.models import Catalog
from catalog.services import DocumentInput
from retrieval.models import Agent, hash_token, new_token
from tests.factories import import_documents

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """Before pytest-django makes the test database: the embedded Postgres started
    (unless DATABASE_URL names a server) and the settings pointed where it listens.
    Importing the settings started nothing, so tests without the database need no server."""
    from django.conf import settings

    from config.database import database_from_url, ensure_database

    try:
        uri = ensure_database()
    except SystemExit as exc:  # one line saying what to do
        pytest.exit(str(exc), returncode=1)
    if uri is not None:
        where = database_from_url(uri)
        settings.DATABASES["default"].update(HOST=where["HOST"], PORT=where["PORT"])


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
        token = new_token()
        agent = Agent.objects.create(name=name, token_hash=hash_token(token), token_hint=token[:8])
        agent.catalogs.set(catalogs)
        return token

    return make


@pytest.fixture(scope="module")
def demo(django_db_setup, django_db_blocker):
    """The shipped demo catalog (13 references) with the demo agent's token, loaded
    once per module inside a transaction rolled back when the module is done; each
    test runs in a savepoint inside it, so tests still cannot see each other."""
    from django.db import transaction

    from catalog.demo_loader import demo_load

    with django_db_blocker.unblock():
        outer = transaction.atomic()
        outer.__enter__()
        try:
            yield demo_load()
        finally:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)
