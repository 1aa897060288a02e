"""Requests name every author of their content (approvals 0009) and sources keep their
content editors (catalog 0015): a database migrated before keeps the one person each
request named, and each source's last changer becomes answerable for its content, served
and pending. Migrating takes the schema's owner (as_owner), as `manage.py migrate` does."""

from __future__ import annotations

from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from config.database_roles import app_role_grant

BEFORE = [("catalog", "0014_document_chunking"), ("approvals", "0008_policy_disclose_matches")]
AFTER = [("catalog", "0015_content_editors"), ("approvals", "0009_caused_by_every_author")]


def migrate(targets):
    """Migrate catalog and approvals to `targets`; the models as they were there, every
    other app's as they are now."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    others = [node for node in executor.loader.graph.leaf_nodes() if node[0] not in ("catalog", "approvals")]
    return executor.loader.project_state([*targets, *others]).apps


def test_a_database_from_before_keeps_who_caused_each_request_and_who_changed_each_source(as_owner):
    try:
        # given: a source last changed by `both`, a request naming them, one naming nobody
        old = migrate(BEFORE)
        both = old.get_model("auth", "User").objects.create(username="both")
        catalog = old.get_model("catalog", "Catalog").objects.create(slug="kb", name="KB")
        Source = old.get_model("catalog", "ReferenceSource")
        edited = Source.objects.create(catalog=catalog, slug="vault", name="Vault", kind="inline",
                                       content="Rotate keys.", fingerprint="f1", changed_by=both)
        untouched = Source.objects.create(catalog=catalog, slug="notes", name="Notes", kind="inline",
                                          content="Notes.", fingerprint="f2")
        agent = old.get_model("catalog", "Agent").objects.create(name="bot", token_hash="a" * 64,
                                                                 token_hint="lct_abcd")
        Request = old.get_model("approvals", "ApprovalRequest")
        theirs = Request.objects.create(source=edited, agent=agent, fingerprint="f1", raised_via="reindex",
                                        caused_by=both)
        nobodys = Request.objects.create(source=untouched, agent=agent, fingerprint="f2", raised_via="select")

        # when
        new = migrate(AFTER)

        # then
        Request = new.get_model("approvals", "ApprovalRequest")
        assert list(Request.objects.get(pk=theirs.pk).caused_by.values_list("username", flat=True)) == ["both"]
        assert not Request.objects.get(pk=nobodys.pk).caused_by.exists()
        editors = new.get_model("catalog", "ContentEditor").objects.order_by("pending")
        assert list(editors.values_list("source_id", "user_id", "pending", "edit")) == [
            (edited.pk, both.pk, False, 0), (edited.pk, both.pk, True, 0)]
        assert new.get_model("catalog", "ReferenceSource").objects.get(pk=edited.pk).content_edits == 0
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        app_role_grant(connection=connection)  # what `manage.py migrate` does after migrating
