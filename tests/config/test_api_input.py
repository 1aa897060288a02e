"""Input no view should ever read is refused with a JSON 4xx before any view reads it:
a NUL character anywhere in the URL or in a JSON body's strings and keys (Postgres
cannot store one), JSON nested deep enough to exhaust Python's recursion limit, and a
chunked body (no Content-Length: it would be read as empty). A number where a string
is expected is refused, not coerced. Each refusal changes nothing: no row written, no
run queued."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from catalog.models import IndexRun, ReferenceSource, UploadedFile
from catalog.sources.documents import DocumentInput
from config.parsers import MAX_DEPTH, json_refusal
from retrieval.models import Selection, Trace
from tests.factories import agent_with_token, import_documents


@pytest.fixture
def curator(make_catalog) -> APIClient:
    """A curator agent's client on catalog "kb": upload source "faq", inline source "memo"."""
    catalog = make_catalog("kb")
    import_documents(catalog=catalog, slug="faq", documents=[
        DocumentInput("refunds.md", "Refunds", "Refunds are paid within five days.", 34)])
    ReferenceSource.objects.create(catalog=catalog, slug="memo", name="Memo", kind="inline", content="Memo text.")
    _, token = agent_with_token(name="kb-curator", catalogs=[catalog], is_curator=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def state() -> tuple:
    return (list(UploadedFile.objects.order_by("pk").values_list("path", "text")),
            list(ReferenceSource.objects.order_by("pk").values_list("slug", "content", "fingerprint")),
            IndexRun.objects.count(), Trace.objects.count(), Selection.objects.count())


def assert_refused(response, code: str = "malformed_request") -> dict:
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == code and error["message"]
    return error


# --- NUL in the URL ------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "url"), [
    ("get", "/api/v1/references/kb/faq/file?path=refunds.md%00"),
    ("delete", "/api/v1/catalogs/kb/sources/faq/files?path=a%00b"),
    ("delete", "/api/v1/catalogs/kb/sources/faq/files?pa%00th=refunds.md"),
    ("get", "/api/v1/references?q=refunds%00"),
    ("post", "/api/v1/catalogs/kb/reindex?source=faq%00"),
    ("get", "/api/v1/references/kb/fa%00q/file?path=refunds.md"),
])
def test_a_nul_in_the_url_is_a_json_400_that_changes_nothing(curator, method, url):
    before = state()

    response = getattr(curator, method)(url)

    assert "NUL" in assert_refused(response)["message"]
    assert state() == before


# --- NUL in a JSON body --------------------------------------------------------------------


@pytest.mark.parametrize(("method", "url", "body"), [
    ("post", "/api/v1/search", {"catalog": "kb", "query": "refunds\u0000"}),
    ("post", "/api/v1/search", {"catalog": "kb", "query": "refunds", "weights": {"bm25\u0000": 1}}),
    ("post", "/api/v1/enrich", {"text": "refunds\u0000 policy", "surface": "prompt"}),
    ("post", "/api/v1/enrich", {"text": "cat a.md", "surface": "tool_result", "paths": ["a\u0000.md"]}),
    ("post", "/api/v1/references/select", {"tags": ["refunds\u0000"]}),
    ("put", "/api/v1/catalogs/kb/sources/faq/files", {"path": "new\u0000.md", "text": "New."}),
    ("put", "/api/v1/catalogs/kb/sources/faq/files", {"path": "new.md", "text": "New\u0000."}),
    ("put", "/api/v1/catalogs/kb/sources/faq/files", {"path": "new.md", "title": "\u0000", "text": "New."}),
    ("put", "/api/v1/catalogs/kb/sources/memo/content", {"content": "Memo\u0000 text."}),
])
def test_a_nul_in_any_string_of_a_json_body_is_a_json_400_that_changes_nothing(curator, method, url, body):
    before = state()

    response = getattr(curator, method)(url, body, format="json")

    assert "NUL" in assert_refused(response)["message"]
    assert state() == before


# --- deep nesting --------------------------------------------------------------------------


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(("url", "fields"), [
    ("/api/v1/search", '"catalog": "kb", "query": "refunds", "weights"'),
    ("/api/v1/enrich", '"text": "refunds", "surface": "prompt", "selected"'),
])
@pytest.mark.parametrize("depth", [MAX_DEPTH, 1000, 100_000])
def test_json_nested_deeper_than_the_limit_is_a_json_400_that_changes_nothing(curator, url, fields, depth):
    before = state()

    response = curator.post(url, f"{{{fields}: {nested(depth)}}}", content_type="application/json")

    assert "nested deeper than 32 levels" in assert_refused(response)["message"]
    assert state() == before


def test_nesting_within_the_limit_reaches_the_serializer(curator):
    body = f'{{"catalog": "kb", "query": "refunds", "weights": {nested(MAX_DEPTH - 1)}}}'

    response = curator.post("/api/v1/search", body, content_type="application/json")

    assert_refused(response, "invalid_input")
    assert list(response.json()["error"]["details"]["fields"]) == ["weights"]


@pytest.mark.parametrize(("document", "refusal"), [
    ({"a": [1, "x", {"b": None}]}, None),
    ("plain", None),
    (json.loads(nested(MAX_DEPTH)), None),
    (json.loads(nested(MAX_DEPTH + 1)), f"nested deeper than {MAX_DEPTH} levels"),
    ({"a": {"b": "c\x00"}}, "strings may not contain NUL (\\u0000) characters"),
    ([{"k\x00": 1}], "keys may not contain NUL (\\u0000) characters"),
])
def test_json_refusal(document, refusal):
    assert json_refusal(document) == refusal


# --- strings only where strings are expected ----------------------------------------------


@pytest.mark.parametrize(("method", "url", "body", "field"), [
    ("post", "/api/v1/search", {"catalog": 7, "query": "refunds"}, "catalog"),
    ("post", "/api/v1/search", {"catalog": "kb", "query": 42}, "query"),
    ("post", "/api/v1/enrich", {"text": "cat a.md", "surface": "tool_result", "paths": [0]}, "paths"),
    ("post", "/api/v1/enrich", {"text": 1.5, "surface": "prompt"}, "text"),
    ("post", "/api/v1/enrich", {"text": "x", "surface": "prompt", "selected": [12]}, "selected"),
    ("post", "/api/v1/enrich", {"text": "x", "surface": "prompt", "catalogs": [1]}, "catalogs"),
    ("post", "/api/v1/references/select", {"ids": [123]}, "ids"),
    ("post", "/api/v1/references/select", {"tags": [1]}, "tags"),
    ("put", "/api/v1/catalogs/kb/sources/faq/files", {"path": 5, "text": "New."}, "path"),
    ("put", "/api/v1/catalogs/kb/sources/faq/files", {"path": "n.md", "title": 5, "text": "New."}, "title"),
    ("put", "/api/v1/catalogs/kb/sources/faq/files", {"path": "n.md", "text": 5}, "text"),
    ("put", "/api/v1/catalogs/kb/sources/memo/content", {"content": 5}, "content"),
])
def test_a_number_where_a_string_is_expected_is_refused_not_coerced(curator, method, url, body, field):
    before = state()

    response = getattr(curator, method)(url, body, format="json")

    error = assert_refused(response, "invalid_input")
    assert list(error["details"]["fields"]) == [field]
    assert state() == before


# --- chunked bodies ------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "url", "body"), [
    ("POST", "/api/v1/search", {"catalog": "kb", "query": "refunds"}),
    ("PUT", "/api/v1/catalogs/kb/sources/faq/files", {"path": "new.md", "text": "New."}),
])
def test_a_chunked_body_is_a_json_411_not_an_empty_body(curator, method, url, body):
    before = state()

    response = curator.generic(method, url, json.dumps(body), content_type="application/json",
                               HTTP_TRANSFER_ENCODING="chunked", CONTENT_LENGTH="")

    assert response.status_code == 411, response.content
    assert response.json()["error"]["code"] == "length_required"
    assert state() == before

