"""Locators and git sources (catalog 0021, 0022) on a database made by the schema before:
its rows keep their content with empty locators, a row written without a locator (code
of the previous release, during a rolling deploy) gets one, its sources are not git
sources and hold no secret, and the next run re-cuts its documents so that their chunks
are located. Migrating takes the schema's owner (as_owner), as `manage.py migrate` does."""

from __future__ import annotations

from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from catalog.indexing.source_index import source_index
from catalog.models import Chunk, Document, ReferenceSource
from config.database_roles import app_role_grant

BEFORE = [("catalog", "0020_auditentry_from_approvals")]


def test_a_database_from_before_locators_keeps_its_index_and_gains_them_on_the_next_run(as_owner):
    try:
        # given: an inline source indexed by the previous schema
        executor = MigrationExecutor(connection)
        executor.migrate(BEFORE)
        old = executor.loader.project_state(BEFORE).apps
        catalog = old.get_model("catalog", "Catalog").objects.create(slug="kb", name="KB")
        text = "# Refunds\n\nRefunds take five days.\n"
        source = old.get_model("catalog", "ReferenceSource").objects.create(
            catalog=catalog, slug="faq", name="FAQ", kind="inline", content=text, fingerprint="old",
            status="ready")
        document = old.get_model("catalog", "Document").objects.create(
            catalog=catalog, source=source, path="faq.md", title="Refunds", text=text, content_sha256="x" * 64,
            size=len(text), chunking="chunker2 1000/100 lexical")
        old.get_model("catalog", "Chunk").objects.create(
            key="kb:faq:faq.md:0", catalog=catalog, source=source, document=document, ordinal=0, byte_offset=0,
            content=text.strip(), token_count=8)

        # when
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        app_role_grant(connection=connection)

        # then: the rows are there, unlocated; a source is no git source and holds no secret
        assert list(Chunk.objects.values_list("content", "locator")) == [(text.strip(), {})]
        assert Document.objects.get().locator == {}
        migrated = ReferenceSource.objects.get()
        assert (migrated.kind, migrated.ref, migrated.secret_sealed, migrated.sync) == ("inline", "", "", {})
        with connection.cursor() as cursor:  # what the previous release's COPY writes: no locator column
            cursor.execute("INSERT INTO catalog_document (catalog_id, source_id, path, title, text, content_sha256, "
                           "size, chunking, created_at) VALUES (%s, %s, 'b.md', '', 'b', %s, 1, '', now()) "
                           "RETURNING locator", [catalog.pk, source.pk, "y" * 64])
            assert cursor.fetchone()[0] in ("{}", {})
            cursor.execute("DELETE FROM catalog_document WHERE path = 'b.md'")
        # and the next run re-cuts the document (its stamp is an older chunker's), locating its chunks
        report = source_index(source=migrated)
        assert report.changed == 1
        assert list(Chunk.objects.values_list("locator", flat=True)) == [
            {"format": "markdown", "lines": [1, 3], "heading": "Refunds"}]
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        app_role_grant(connection=connection)
