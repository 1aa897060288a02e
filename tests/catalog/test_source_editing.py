"""Editing inline and upload sources through the API moves their fingerprint and
reindexes just the change."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from catalog.indexing.runs import sources_scan
from catalog.models import Agent, Catalog, Chunk, IndexRun, ReferenceSource, UploadedFile
from catalog.sources.documents import DocumentInput, source_fingerprint
from tests.factories import agent_with_token, import_documents


@pytest.fixture
def curator(db):
    def make(catalog: Catalog, *, is_curator: bool = True) -> APIClient:
        _, token = agent_with_token(name=f"agent-{Agent.objects.count()}", catalogs=[catalog], is_curator=is_curator)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        return client

    return make


@pytest.fixture
def uploads(make_catalog):
    catalog = make_catalog("kb")
    return import_documents(catalog=catalog, slug="faq", documents=[
        DocumentInput("q1", "Refunds", "Refunds are paid within five days.", 34),
        DocumentInput("q2", "Shipping", "Parcels ship on weekdays.", 25),
    ])


def test_putting_an_upload_file_reindexes_only_that_file(uploads, curator, django_capture_on_commit_callbacks):
    client = curator(uploads.catalog)
    before_q2 = list(Chunk.objects.filter(document__path="q2").values_list("pk", flat=True))

    with django_capture_on_commit_callbacks(execute=True):
        response = client.put("/api/v1/catalogs/kb/sources/faq/files",
                              {"path": "q1", "title": "Refunds", "text": "Refunds are paid within ten days."},
                              format="json")

    run = IndexRun.objects.get(pk=response.json()["run"]["id"])
    assert response.status_code == 202
    assert run.status == IndexRun.Status.SUCCEEDED
    assert (run.counts["documents_changed"], run.counts["documents_unchanged"]) == (1, 1)
    assert "ten days" in Chunk.objects.get(document__path="q1").content
    assert list(Chunk.objects.filter(document__path="q2").values_list("pk", flat=True)) == before_q2


def test_deleting_an_upload_file_removes_its_document(uploads, curator, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = curator(uploads.catalog).delete("/api/v1/catalogs/kb/sources/faq/files?path=q2")

    assert response.status_code == 202
    assert not Chunk.objects.filter(document__path="q2").exists()
    assert curator(uploads.catalog, is_curator=True).delete(
        "/api/v1/catalogs/kb/sources/faq/files?path=q2").status_code == 404


def test_an_upload_edit_moves_the_fingerprint_the_scan_watches(uploads):
    from catalog.sources.editing import upload_put

    upload_put(source=uploads, path="q3", title="Returns", text="Returns are free.")

    uploads.refresh_from_db()
    assert source_fingerprint(source=uploads) != uploads.fingerprint
    assert [run.source_id for run in sources_scan()] == [uploads.pk]


def test_setting_inline_content_reindexes_it(make_catalog, curator, django_capture_on_commit_callbacks):
    catalog = make_catalog("policies")
    source = ReferenceSource.objects.create(catalog=catalog, slug="oncall", name="On-call", kind="inline",
                                            content="Page the secondary after 15 minutes.")
    with django_capture_on_commit_callbacks(execute=True):
        response = curator(catalog).put("/api/v1/catalogs/policies/sources/oncall/content",
                                        {"content": "Page the secondary after 10 minutes."}, format="json")

    source.refresh_from_db()
    assert response.status_code == 202
    assert source.fingerprint == source_fingerprint(source=source)
    assert "10 minutes" in Chunk.objects.get(source=source).content


def test_editing_refusals_change_nothing(uploads, curator):
    reader = curator(uploads.catalog, is_curator=False)
    editor = curator(uploads.catalog)
    runs_before = list(IndexRun.objects.filter(source=uploads).values_list("pk", "status"))

    denied = reader.put("/api/v1/catalogs/kb/sources/faq/files", {"path": "q1", "text": "x"}, format="json")
    wrong_kind = editor.put("/api/v1/catalogs/kb/sources/faq/content", {"content": "x"}, format="json")
    invalid = editor.put("/api/v1/catalogs/kb/sources/faq/files", {"path": "q1"}, format="json")
    missing = editor.put("/api/v1/catalogs/kb/sources/nope/files", {"path": "q1", "text": "x"}, format="json")

    assert (denied.status_code, wrong_kind.status_code, invalid.status_code, missing.status_code) == (403, 409, 400,
                                                                                                      404)
    assert wrong_kind.json()["error"]["code"] == "wrong_source_kind"
    assert UploadedFile.objects.get(source=uploads, path="q1").text == "Refunds are paid within five days."
    assert list(IndexRun.objects.filter(source=uploads).values_list("pk", "status")) == runs_before


def uploads_state(source: ReferenceSource) -> tuple:
    source.refresh_from_db()
    return (list(UploadedFile.objects.filter(source=source).order_by("path").values_list("path", "text")),
            source.content, source.fingerprint, IndexRun.objects.count())


@pytest.mark.parametrize("path", ["../../../../etc/passwd", "/etc/shadow", "a\u0001\n<script>.md", "a//b.md",
                                  "guides/./x.md", "x" * 1025])
def test_an_upload_path_that_is_not_relative_normalised_and_printable_is_a_400(uploads, curator, path):
    before = uploads_state(uploads)

    response = curator(uploads.catalog).put("/api/v1/catalogs/kb/sources/faq/files", {"path": path, "text": "x"},
                                            format="json")

    assert response.status_code == 400, response.content
    assert list(response.json()["error"]["details"]["fields"]) == ["path"]
    assert uploads_state(uploads) == before


def test_the_service_refuses_such_a_path_too(uploads):
    from catalog.sources.editing import upload_put

    with pytest.raises(ValueError, match="relative"):
        upload_put(source=uploads, path="/etc/shadow", title="", text="x")
    assert not UploadedFile.objects.filter(source=uploads, path="/etc/shadow").exists()


@pytest.mark.parametrize("text", ["   ", "\n\t \n", ""])
def test_whitespace_only_file_text_or_inline_content_is_a_400(uploads, curator, make_catalog, text):
    inline = ReferenceSource.objects.create(catalog=uploads.catalog, slug="memo", name="Memo", kind="inline",
                                            content="Memo text.")
    before = uploads_state(uploads), uploads_state(inline)
    client = curator(uploads.catalog)

    upload = client.put("/api/v1/catalogs/kb/sources/faq/files", {"path": "q3", "text": text}, format="json")
    content = client.put("/api/v1/catalogs/kb/sources/memo/content", {"content": text}, format="json")

    assert (upload.status_code, content.status_code) == (400, 400)
    assert list(upload.json()["error"]["details"]["fields"]) == ["text"]
    assert list(content.json()["error"]["details"]["fields"]) == ["content"]
    assert (uploads_state(uploads), uploads_state(inline)) == before


def test_file_text_keeps_its_surrounding_whitespace(uploads, curator):
    curator(uploads.catalog).put("/api/v1/catalogs/kb/sources/faq/files", {"path": "q3", "text": "  Indented.\n"},
                                 format="json")

    assert UploadedFile.objects.get(source=uploads, path="q3").text == "  Indented.\n"



@pytest.mark.parametrize("kind", ["glob", "inline"])
def test_deleting_a_file_of_a_source_that_is_not_an_upload_is_a_409(make_catalog, curator, kind):
    # given: a glob source (files read from disk) and an inline one: neither has upload files
    catalog = make_catalog("handbook")
    source = ReferenceSource.objects.create(catalog=catalog, slug="guides", name="Guides", kind=kind,
                                            location="guides/*.md" if kind == "glob" else "",
                                            content="Inline text." if kind == "inline" else "")
    before = uploads_state(source)

    response = curator(catalog).delete("/api/v1/catalogs/handbook/sources/guides/files?path=retries.md")

    # then: as documented, 409 wrong_source_kind (not 404, as if the file were merely missing)
    assert response.status_code == 409, response.content
    assert response.json()["error"]["code"] == "wrong_source_kind"
    assert uploads_state(source) == before
