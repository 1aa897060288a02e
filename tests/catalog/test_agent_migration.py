"""Agents moved from retrieval to catalog (catalog 0010, retrieval 0005) with no change to
the database: a database migrated before the move keeps its agents, their scopes and
pinned references, the traces and selections that point at them, and the permissions
granted on them. Migrating takes the schema's owner (as_owner), as `manage.py migrate` does."""

from __future__ import annotations

from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from config.database_roles import app_role_grant

BEFORE = [("catalog", "0009_index_run_recovery_trigger"), ("retrieval", "0004_trace_retention")]
AFTER = [("catalog", "0010_agent"), ("retrieval", "0005_agent_to_catalog")]


def migrate(targets):
    """Migrate catalog and retrieval to `targets`; the models as they were there, every
    other app's as they are now, but approvals' (its first migration needs a later
    catalog, so it is unapplied here)."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    others = [node for node in executor.loader.graph.leaf_nodes()
              if node[0] not in ("catalog", "retrieval", "approvals")]
    return executor.loader.project_state([*targets, *others]).apps


def test_a_database_from_before_the_move_keeps_its_agents(as_owner):
    try:
        # given a database whose agents live in retrieval, with everything that refers to them
        old = migrate(BEFORE)
        catalog = old.get_model("catalog", "Catalog").objects.create(slug="kb", name="KB")
        source = old.get_model("catalog", "ReferenceSource").objects.create(
            catalog=catalog, slug="faq", name="FAQ", kind="inline", content="Refunds take five days.")
        agent = old.get_model("retrieval", "Agent").objects.create(
            name="legacy", token_hash="a" * 64, token_hint="lct_abcd", is_curator=True, max_hints=3)
        agent.catalogs.set([catalog])
        agent.preselected.set([source])
        trace = old.get_model("retrieval", "Trace").objects.create(agent=agent, caller="legacy", surface="prompt")
        old.get_model("retrieval", "Selection").objects.create(agent=agent, source=source, via="select", trace=trace)
        content_type = old.get_model("contenttypes", "ContentType").objects.get_for_model(agent)
        group = old.get_model("auth", "Group").objects.create(name="agent-keepers")
        group.permissions.set(old.get_model("auth", "Permission").objects.filter(content_type=content_type))

        # when it migrates past the move
        new = migrate(AFTER)

        # then the same rows are catalog's agents, reached from everything that pointed at them
        moved = new.get_model("catalog", "Agent").objects.get(name="legacy")
        assert (moved.pk, moved.token_hash, moved.is_curator, moved.max_hints) == (agent.pk, "a" * 64, True, 3)
        assert list(moved.catalogs.values_list("slug", flat=True)) == ["kb"]
        assert list(moved.preselected.values_list("slug", flat=True)) == ["faq"]
        assert new.get_model("retrieval", "Trace").objects.get(pk=trace.pk).agent_id == agent.pk
        assert new.get_model("retrieval", "Selection").objects.get(source_id=source.pk).agent_id == agent.pk
        ContentType = new.get_model("contenttypes", "ContentType")
        assert ContentType.objects.get(pk=content_type.pk).app_label == "catalog"
        assert not ContentType.objects.filter(app_label="retrieval", model="agent").exists()
        kept = new.get_model("auth", "Group").objects.get(name="agent-keepers").permissions
        assert sorted(kept.values_list("codename", flat=True)) == [
            "add_agent", "change_agent", "delete_agent", "view_agent"]
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        app_role_grant(connection=connection)  # what `manage.py migrate` does after migrating
