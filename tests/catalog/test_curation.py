"""What curators write through the dashboard's services: catalogs and sources created and
changed (each kind's rule checked before anything is written, who changed a source
recorded and audited), uploads read and refused, sources and catalogs deleted with the
rest of the catalog's BM25 statistics left exact."""

from __future__ import annotations

import psycopg
import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from catalog.catalogs import CatalogSettings, catalog_create, catalog_update
from catalog.indexing.removal import SourceBusy, catalog_delete, source_delete
from catalog.indexing.runs import LOCK_NAMESPACE, source_index_now
from catalog.models import AuditEntry, Catalog, Chunk, Document, IndexRun, ReferenceSource, Term, UploadedFile
from catalog.sources.documents import DocumentInput
from catalog.sources.lifecycle import SourceSettings, source_create, source_update
from catalog.sources.uploads import UploadRefused, upload_text
from tests.catalog.checks import block_postings, term_postings_mismatches
from tests.factories import agent_with_token, import_documents, person

pytestmark = pytest.mark.django_db

ALPHA = "Alpha rotates the keys weekly. Alpha pages the on-call engineer."
BETA = "Beta caches responses for an hour. Beta invalidates on every write."


def doc(path: str, text: str) -> DocumentInput:
    return DocumentInput(path, path, text, len(text.encode()))


@pytest.fixture
def cora():
    return person("cora", "curator")


@pytest.fixture
def root(tmp_path, settings):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("# A\n\nAlpha.\n", encoding="utf-8")
    settings.LECTERN_SOURCE_ROOTS = [tmp_path]
    return tmp_path


def settings_(name: str = "Notes", **fields) -> SourceSettings:
    return SourceSettings(name=name, **fields)


# --- creating and changing ------------------------------------------------------------------


def test_a_source_of_each_kind_is_created_with_its_tags_and_who_made_it(make_catalog, cora, root):
    catalog = make_catalog("kb")

    glob = source_create(catalog=catalog, slug="notes", kind="glob", location="notes/*.md", by=cora,
                         settings=settings_(tags=["Circuit Breaker", "circuit-breaker", "ops"]))
    inline = source_create(catalog=catalog, slug="intro", kind="inline", content="Welcome.", by=cora,
                           settings=settings_("Intro", mode="auto", requires_approval=True))
    upload = source_create(catalog=catalog, slug="faq", kind="upload", by=cora, settings=settings_("FAQ"),
                           files=[doc("q1.md", "Refunds take five days.")])

    assert sorted(glob.tags.values_list("key", flat=True)) == ["circuit-breaker", "ops"]  # one tag per key
    assert (inline.mode, inline.requires_approval, inline.content) == ("auto", True, "Welcome.")
    assert list(UploadedFile.objects.filter(source=upload).values_list("path", flat=True)) == ["q1.md"]
    assert upload.location == "faq"
    assert {s.changed_by for s in ReferenceSource.objects.all()} == {cora}
    entries = AuditEntry.objects.filter(action="source.changed").order_by("seq")
    assert [(e.actor_name, e.source_id, "created" in e.payload["fields"]) for e in entries] == [
        ("cora", glob.pk, True), ("cora", inline.pk, True), ("cora", upload.pk, True)]


@pytest.mark.parametrize(("kind", "fields", "field", "message"), [
    ("glob", {"location": "../etc/*.md"}, "location", "may not contain '..'"),
    ("glob", {"location": "notes/\x00*.md"}, "location", "may not contain NUL characters"),
    ("glob", {"location": "/etc/*.conf"}, "location", "outside the configured source roots"),
    ("glob", {"location": ""}, "location", "needs a glob pattern"),
    ("inline", {"content": "   "}, "content", "needs its text"),
    ("inline", {"content": "x" * 2048}, "content", "at most 1.0 KB"),
])
def test_a_source_that_breaks_its_kinds_rule_is_refused_and_nothing_is_written(
        make_catalog, cora, root, settings, kind, fields, field, message):
    settings.LECTERN_MAX_UPLOAD_BYTES = 1024
    catalog = make_catalog("kb")

    with pytest.raises(ValidationError) as refused:
        source_create(catalog=catalog, slug="bad", kind=kind, settings=settings_(), by=cora, **fields)

    assert message in " ".join(refused.value.message_dict[field])
    assert not ReferenceSource.objects.exists() and not AuditEntry.objects.exists()


def test_every_problem_is_named_at_once_and_a_taken_id_is_one(make_catalog, cora, root):
    catalog = make_catalog("kb")
    source_create(catalog=catalog, slug="notes", kind="inline", content="x", settings=settings_(), by=cora)

    with pytest.raises(ValidationError) as refused:
        source_create(catalog=catalog, slug="notes", kind="glob", location="../x", by=cora,
                      settings=settings_(name="", tags=["--", "ok"]))

    errors = refused.value.message_dict
    assert set(errors) == {"slug", "location", "name", "tags"}
    assert errors["slug"] == ["The catalog already has a source 'notes'."]
    assert errors["tags"] == ["'--': a tag needs at least one letter or digit"]
    assert ReferenceSource.objects.count() == 1


def test_an_update_records_what_changed_and_who_and_nothing_when_nothing_did(make_catalog, cora, root):
    rita = person("rita", "curator")
    catalog = make_catalog("kb")
    source = source_create(catalog=catalog, slug="notes", kind="glob", location="notes/*.md", by=rita,
                           settings=settings_(tags=["ops"]))
    before = AuditEntry.objects.count()

    same = source_update(source=source, settings=settings_(tags=["OPS"]), location="notes/*.md", by=cora)
    changed = source_update(source=source, settings=settings_("Notes 2", requires_approval=True, tags=["db"]),
                            location="notes/**/*.md", by=cora)

    source.refresh_from_db()
    assert same == [] and AuditEntry.objects.count() == before + 1
    assert changed == ["name", "requires_approval", "location", "tags"]
    assert (source.changed_by, source.location, source.requires_approval) == (cora, "notes/**/*.md", True)
    assert list(source.tags.values_list("key", flat=True)) == ["db"]
    entry = AuditEntry.objects.latest("seq")
    assert (entry.actor_name, entry.payload["fields"], entry.payload["requires_approval"]) == (
        "cora", sorted(changed), True)


def test_an_update_that_breaks_a_rule_changes_nothing(make_catalog, cora, root):
    catalog = make_catalog("kb")
    source = source_create(catalog=catalog, slug="notes", kind="glob", location="notes/*.md", by=cora,
                           settings=settings_())

    with pytest.raises(ValidationError):
        source_update(source=source, settings=settings_("Renamed"), location="/etc/*", by=person("rita", "curator"))

    source.refresh_from_db()
    assert (source.name, source.location, source.changed_by) == ("Notes", "notes/*.md", cora)


def test_catalogs_are_created_and_their_slug_is_theirs(db):
    catalog = catalog_create(slug="kb", settings=CatalogSettings(name="KB", chunk_size=500, chunk_overlap=50))

    with pytest.raises(ValidationError) as taken:
        catalog_create(slug="kb", settings=CatalogSettings(name="Again"))
    with pytest.raises(ValidationError) as overlap:
        catalog_update(catalog=catalog, settings=CatalogSettings(name="KB", chunk_size=200, chunk_overlap=200))
    changed = catalog_update(catalog=catalog, settings=CatalogSettings(name="Knowledge", chunk_size=500,
                                                                       chunk_overlap=50))

    assert "slug" in taken.value.message_dict and "chunk_overlap" in overlap.value.message_dict
    assert changed == ["name"] and Catalog.objects.get().name == "Knowledge"


# --- uploads --------------------------------------------------------------------------------


def test_an_uploaded_text_file_becomes_a_document_titled_by_its_heading():
    document = upload_text(name="guide.md", data=b"# Deploy guide\n\nOnly on weekdays.\n")

    assert (document.path, document.title, document.size) == ("guide.md", "Deploy guide", 34)


@pytest.mark.parametrize(("name", "data", "why"), [
    ("logo.png", b"\x89PNG", "is not a file type Lectern indexes"),
    ("README", b"text", "is not a file type Lectern indexes"),
    ("latin.md", "café".encode("latin-1"), "is not UTF-8 text (byte 3)"),
    ("nul.txt", b"a\x00b", "holds NUL characters"),
    ("big.md", b"x" * 2048, "is 2.0 KB; at most 1.0 KB may be put into a source at once"),
    (" spaced.md", b"x", "may not start or end with a space"),
])
def test_an_upload_that_is_not_a_text_file_lectern_reads_is_refused_saying_why(settings, name, data, why):
    settings.LECTERN_MAX_UPLOAD_BYTES = 1024

    with pytest.raises(UploadRefused) as refused:
        upload_text(name=name, data=data)

    assert str(refused.value).startswith(f"{name}: ") and why in str(refused.value)


def test_the_api_refuses_a_file_or_a_text_over_the_limit_as_the_dashboard_does(make_catalog, settings):
    from rest_framework.test import APIClient

    settings.LECTERN_MAX_UPLOAD_BYTES = 1024
    catalog = make_catalog("kb")
    import_documents(catalog=catalog, slug="faq", documents=[doc("q1.md", "Refunds.")])
    ReferenceSource.objects.create(catalog=catalog, slug="intro", name="Intro", kind="inline", content="Hi.")
    _, token = agent_with_token(name="curator-bot", catalogs=[catalog], is_curator=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")

    file = client.put("/api/v1/catalogs/kb/sources/faq/files", {"path": "big.md", "text": "é" * 600}, format="json")
    text = client.put("/api/v1/catalogs/kb/sources/intro/content", {"content": "x" * 1025}, format="json")

    for response, field in ((file, "text"), (text, "content")):
        assert response.status_code == 400, response.content
        assert "at most 1.0 KB" in str(response.json()["error"]["details"]["fields"][field])
    assert not UploadedFile.objects.filter(path="big.md").exists()
    assert ReferenceSource.objects.get(slug="intro").content == "Hi."


# --- deleting -------------------------------------------------------------------------------


def _statistics(catalog: Catalog) -> tuple:
    catalog.refresh_from_db()
    terms = sorted(Term.objects.filter(catalog=catalog).values_list("text", "df"))
    return catalog.chunk_count, catalog.token_total, catalog.term_count, round(catalog.idf_sum, 6), terms


def test_deleting_a_source_leaves_the_catalog_scored_as_if_it_had_never_held_it(make_catalog, cora):
    both = make_catalog("both")
    import_documents(catalog=both, slug="alpha", documents=[doc("alpha.md", ALPHA)])
    beta = import_documents(catalog=both, slug="beta", documents=[doc("beta.md", BETA)])
    alone = make_catalog("alone")
    import_documents(catalog=alone, slug="alpha", documents=[doc("alpha.md", ALPHA)])

    beta_id = beta.pk

    source_delete(source=beta, by=cora)

    assert _statistics(both) == _statistics(alone)
    assert term_postings_mismatches(both) == []
    assert not Document.objects.filter(source_id=beta_id).exists()
    assert not IndexRun.objects.filter(source_id=beta_id).exists()
    entry = AuditEntry.objects.latest("seq")
    assert (entry.action, entry.source_id, entry.actor_name, entry.payload["fields"]) == (
        "source.changed", beta_id, "cora", ["deleted"])


def test_a_source_being_indexed_is_not_deleted(make_catalog, cora):
    catalog = make_catalog("kb")
    source = import_documents(catalog=catalog, slug="alpha", documents=[doc("alpha.md", ALPHA)])
    s = connection.settings_dict
    with psycopg.connect(  # another session holds the lock, as a worker mid-run does
dbname=s["NAME"], user=s["USER"], password=s["PASSWORD"], host=s["HOST"],
                         port=s["PORT"] or None) as worker:
        worker.execute("SELECT pg_advisory_lock(%s, %s)", [LOCK_NAMESPACE, source.pk])
        with pytest.raises(SourceBusy):
            source_delete(source=source, by=cora)

    assert ReferenceSource.objects.filter(pk=source.pk).exists() and Chunk.objects.filter(source=source).exists()


def test_deleting_a_catalog_removes_every_row_of_it_and_nothing_of_another(make_catalog, cora):
    gone = make_catalog("gone")
    import_documents(catalog=gone, slug="alpha", documents=[doc("alpha.md", ALPHA)])
    source_index_now(source=ReferenceSource.objects.create(catalog=gone, slug="intro", name="Intro", kind="inline",
                                                           content=BETA), trigger="command")
    kept = make_catalog("kept")
    import_documents(catalog=kept, slug="alpha", documents=[doc("alpha.md", ALPHA)])
    kept_before = _statistics(kept)
    postings_kept = block_postings(kept)

    catalog_delete(catalog=gone, by=cora)

    assert not Catalog.objects.filter(slug="gone").exists()
    assert not Term.objects.filter(catalog_id=gone.pk).exists()
    assert not Chunk.objects.filter(catalog_id=gone.pk).exists()
    assert block_postings() == postings_kept and _statistics(kept) == kept_before
    assert term_postings_mismatches(kept) == []
    assert sorted(AuditEntry.objects.filter(action="source.changed").values_list("payload__source", flat=True)) == [
        "gone/alpha", "gone/intro"]
