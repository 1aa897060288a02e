"""Query counts of the dashboard's pages, pinned (NetBox's query_counts): each page takes
the same number of SQL statements with 2 of everything it lists as with 8 (catalogs,
sources with tags, documents, chunks, files, runs, approval requests with decisions,
mentioned references), so an N+1 coming back fails here."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from approvals.services.decisions import request_decide
from catalog.indexing.runs import source_import
from catalog.models import Catalog, IndexRun, ReferenceSource
from catalog.sources.documents import DocumentInput
from catalog.tags import tags_ensure
from tests.approvals.builders import raised
from tests.factories import agent_with_token, import_documents, person

pytestmark = pytest.mark.django_db

PAGES = {
    "catalog list": lambda: reverse("catalogs-list"),
    "catalog": lambda: reverse("catalogs-detail", args=["c0"]),
    "source": lambda: reverse("catalogs-source", args=["c0", "many"]),
    "runs": lambda: reverse("catalogs-runs", args=["c0"]),
    "activity": lambda: reverse("catalogs-activity", args=["c0"]),
    "source delete": lambda: reverse("catalogs-source-delete", args=["c0", "many"]),
    "catalog delete": lambda: reverse("catalogs-delete", args=["c0"]),
}


def _doc(path: str, text: str) -> DocumentInput:
    return DocumentInput(path, path, text, len(text.encode()))


def grow(n: int, reviewer) -> None:
    """n catalogs; c0 holds n tagged sources and `many`, an upload source of n documents
    that mentions n of them and that n agents asked to read (each request decided),
    with n runs queued."""
    for i in range(Catalog.objects.count(), n):
        Catalog.objects.create(slug=f"c{i}", name=f"Catalog {i}")
    c0 = Catalog.objects.get(slug="c0")
    for i in range(c0.sources.exclude(slug="many").count(), n):
        source = import_documents(catalog=c0, slug=f"s{i}", documents=[_doc(f"s{i}.md", f"Source {i} text.")])
        source.tags.add(*tags_ensure(names=[f"tag-{i}", "shared"]))
    mentions = " ".join(f"@s{i}" for i in range(n))
    source_import(catalog=c0, slug="many", trigger="command", documents=[
        _doc(f"d{i}.md", f"Document {i} mentions {mentions}. " + "Words to chunk. " * 80) for i in range(n)])
    many = ReferenceSource.objects.get(catalog=c0, slug="many")
    ReferenceSource.objects.filter(pk=many.pk).update(requires_approval=True)
    many.refresh_from_db()
    for i in range(many.approval_requests.count(), n):
        agent = agent_with_token(name=f"agent-{i}", catalogs=[c0])[0]
        request_decide(request_id=raised(agent, many), reviewer=reviewer, verdict="approve")
    for source in c0.sources.all()[:n]:
        IndexRun.objects.get_or_create(catalog=c0, source=source, status="queued", defaults={"trigger": "ui"})


def counted(client, url: str) -> int:
    client.get(url)  # what a first look does once (discovery's extraction per fingerprint)
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, response.content[:500]
    return len(queries)


def test_every_page_takes_as_many_queries_for_8_of_everything_as_for_2(client_for):
    rita = person("rita", "reviewer")
    client = client_for(person("cora", "curator", "reviewer"))
    grow(2, rita)
    small = {name: counted(client, url()) for name, url in PAGES.items()}

    grow(8, rita)
    large = {name: counted(client, url()) for name, url in PAGES.items()}

    assert ReferenceSource.objects.get(slug="many").documents.count() == 8
    assert large == small
