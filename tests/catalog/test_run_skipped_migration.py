"""An index run's skipped files (catalog 0024) on a database made by the schema before:
its runs keep their record with an empty list, and a run the previous release inserts
(no such column in its INSERT) gets one. Migrating takes the schema's owner (as_owner)."""

from __future__ import annotations

from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from catalog.models import IndexRun
from config.database_roles import app_role_grant

BEFORE = [("catalog", "0023_web_sources")]


def test_runs_from_before_keep_their_record_and_an_old_insert_gets_an_empty_list(as_owner):
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(BEFORE)
        old = executor.loader.project_state(BEFORE).apps
        catalog = old.get_model("catalog", "Catalog").objects.create(slug="kb", name="KB")
        source = old.get_model("catalog", "ReferenceSource").objects.create(catalog=catalog, slug="faq", name="FAQ",
                                                                           kind="inline", content="Refunds.")
        old.get_model("catalog", "IndexRun").objects.create(catalog=catalog, source=source, trigger="command",
                                                            status="succeeded", counts={"documents_added": 1})

        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        app_role_grant(connection=connection)

        assert list(IndexRun.objects.values_list("status", "counts", "skipped")) == [
            ("succeeded", {"documents_added": 1}, [])]
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO catalog_indexrun (catalog_id, source_id, trigger, \"full\", status, stage, "
                           "progress, counts, timings, error, created_at) VALUES (%s, %s, 'command', false, 'queued', "
                           "'', 0, '{}', '{}', '', now()) RETURNING skipped", [catalog.pk, source.pk])
            assert cursor.fetchone()[0] in ("[]", [])
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        app_role_grant(connection=connection)
