"""Web sources (catalog 0023) on a database made by the schema before: its sources keep
their kind and content and get the crawl limits' defaults, and a source inserted without
them (code of the previous release, during a rolling deploy) gets them too. Migrating
takes the schema's owner (as_owner), as `manage.py migrate` does."""

from __future__ import annotations

from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from catalog.models import ReferenceSource
from config.database_roles import app_role_grant

BEFORE = [("catalog", "0022_git_sources")]


def test_a_database_from_before_web_sources_keeps_its_sources_with_the_default_limits(as_owner):
    try:
        # given: a git source made by the previous schema
        executor = MigrationExecutor(connection)
        executor.migrate(BEFORE)
        old = executor.loader.project_state(BEFORE).apps
        catalog = old.get_model("catalog", "Catalog").objects.create(slug="kb", name="KB")
        old.get_model("catalog", "ReferenceSource").objects.create(
            catalog=catalog, slug="repo", name="Repo", kind="git", location="https://example.com/r.git", ref="main")

        # when
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        app_role_grant(connection=connection)

        # then: the source is as it was, with the limits a new one gets
        migrated = ReferenceSource.objects.get(slug="repo")
        assert (migrated.kind, migrated.ref, migrated.max_depth, migrated.max_pages) == ("git", "main", 3, 200)
        with connection.cursor() as cursor:  # what the previous release's ORM writes: no limit columns
            cursor.execute("INSERT INTO catalog_referencesource (catalog_id, slug, name, description, mode, kind, "
                           "location, content, ref, include, exclude, secret_sealed, secret_hint, sync, "
                           "requires_approval, fingerprint, content_edits, status, last_error, created_at, "
                           "updated_at) VALUES (%s, 'faq', 'FAQ', '', 'selectable', 'inline', '', 'x', '', '', '', "
                           "'', '', '{}', false, '', 0, 'new', '', now(), now()) RETURNING max_depth, max_pages",
                           [catalog.pk])
            assert cursor.fetchone() == (3, 200)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        app_role_grant(connection=connection)
