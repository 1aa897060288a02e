"""The playground's "why not this document?" (curators): after a search, a named document's
place in that search, stage by stage, as POST /api/v1/explain answers the same caller;
an unknown document is refused beside its field; the document field suggests the
catalog's documents; a withheld source is answered by its governance alone."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from catalog.models import ReferenceSource
from catalog.sources.documents import DocumentInput
from retrieval.models import Trace
from tests.factories import agent_with_token, import_documents

pytestmark = pytest.mark.django_db

WHY_NOT = "/playground/why-not"
SEARCH = {"kind": "search", "catalog": "ops", "text": "retry transient failures with backoff", "mode": "hybrid",
          "top_k": "1", "agent": ""}


@pytest.fixture
def curator(indexed_catalog, cora, client_for) -> Client:
    return client_for(cora)


def why_not(client: Client, document: str, **fields) -> tuple[int, str]:
    response = client.post(WHY_NOT, {**SEARCH, **fields, "document": document}, HTTP_HX_REQUEST="true")
    return response.status_code, response.content.decode()


def test_a_search_offers_the_why_not_form_carrying_the_search(curator):
    page = curator.post("/playground/", SEARCH, HTTP_HX_REQUEST="true").content.decode()

    assert "Why not this document?" in page
    assert 'hx-post="/playground/why-not"' in page
    assert '<input type="hidden" name="text" value="retry transient failures with backoff">' in page
    assert '<input type="hidden" name="top_k" value="1">' in page


def test_a_document_below_the_cut_off_is_explained_stage_by_stage_as_the_api_explains_it(curator, indexed_catalog):
    status, page = why_not(curator, "handbook/circuit-breaker.md")
    api = curator.post("/api/v1/explain", {"catalog": "ops", "query": SEARCH["text"], "mode": "hybrid", "top_k": 1,
                                           "source": "handbook", "document": "circuit-breaker.md"},
                       content_type="application/json").json()

    assert status == 200
    assert api["outcome"] in ("below_top_k", "not_retrieved")
    for sentence in api["sentences"]:
        assert sentence.replace("'", "&#x27;") in page
    assert 'class="why-not-table"' in page
    assert "cut-off: top_k 1" in page
    for term in api["bm25"]["terms"]:
        assert f"<code>{term['term']}</code>" in page
    assert (ApprovalRequest.objects.count(), Trace.objects.count()) == (0, 0)


def test_the_document_shown_first_says_so(curator):
    status, page = why_not(curator, "handbook/retries.md")

    assert status == 200
    assert "Verdict: shown at rank 1." in page and "why-outcome-shown" in page


@pytest.mark.parametrize(("document", "message"), [
    ("handbook/nowhere.md", "No document “nowhere.md” in source handbook of catalog ops: pick one from the list."),
    ("elsewhere/retries.md", "No source “elsewhere” in catalog ops: pick a document from the list."),
    ("retries.md", "Write the source and the path, source/path (as a hit names it): “retries.md” names no source."),
    ("", "This field is required."),
])
def test_an_unknown_document_is_refused_beside_its_field_and_kept(curator, document, message):
    status, page = why_not(curator, document)

    assert status == 400
    assert message in page
    assert 'aria-invalid="true"' in page
    assert f'value="{document}"' in page
    assert "why-not-answer" not in page


def test_as_the_agent_a_withheld_source_is_answered_by_its_governance_alone(curator, indexed_catalog):
    vault = import_documents(catalog=indexed_catalog, slug="vault", documents=[
        DocumentInput("vault.md", "Vault", "Rotate the vault credentials every ninety days.", 47)])
    ReferenceSource.objects.filter(pk=vault.pk).update(requires_approval=True)
    agent_with_token(name="ops-bot", catalogs=[indexed_catalog])

    status, page = why_not(curator, "vault/vault.md", agent="ops-bot", text="rotate the vault credentials")

    assert status == 200
    assert "why-outcome-withheld" in page and "It is withheld from you" in page
    assert "why-not-table" not in page and "ninety" not in page
    assert ApprovalRequest.objects.count() == 0


def test_the_document_field_suggests_the_catalogs_documents(curator):
    response = curator.get("/playground/why-not/documents", {"catalog": "ops", "document": "RETR"},
                           HTTP_HX_REQUEST="true")
    everything = curator.get("/playground/why-not/documents", {"catalog": "ops", "document": ""}).content.decode()
    nowhere = curator.get("/playground/why-not/documents", {"catalog": "nowhere", "document": "r"}).content.decode()

    assert response.content.decode().strip() == '<option value="handbook/retries.md">Retries</option>'
    assert everything.count("<option") == 4
    assert nowhere.strip() == ""


def test_without_htmx_the_answer_comes_in_the_whole_playground_page_under_the_hits(curator):
    response = curator.post(WHY_NOT, {**SEARCH, "document": "handbook/caching.md"})

    page = response.content.decode()
    assert response.status_code == 200
    assert "<h1>Playground</h1>" in page and 'class="play-hit"' in page
    assert "why-not-answer" in page and "handbook/caching.md" in page


def test_an_agent_token_is_not_a_curator(indexed_catalog):
    _, token = agent_with_token(name="ops-bot", catalogs=[indexed_catalog])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")

    response = client.post(WHY_NOT, {**SEARCH, "document": "handbook/retries.md"})

    assert response.status_code in (302, 403)


def test_without_a_model_a_vector_why_not_is_a_message_not_a_500(curator, monkeypatch):
    from retrieval.search import selectors
    from retrieval.search.vector import SearchUnavailable

    def unavailable(query):
        raise SearchUnavailable("no embedding model (LECTERN_EMBEDDING_MODEL=none)")

    monkeypatch.setattr(selectors, "embed_query", unavailable)
    response = curator.post(WHY_NOT, {**SEARCH, "mode": "vector", "document": "handbook/caching.md"})

    assert response.status_code == 400
    assert "Search by meaning is unavailable" in response.content.decode()
