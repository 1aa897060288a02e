"""Where reads go and what makes an agent's later reads wait (catalog.reads): the router
follows the alias a read path chose, writes and migrations stay on the primary, the
statements that change rows are noticed and nothing else is, and an agent's read fence
only moves forward, past its writes. Reads from a real replica: tests/config/test_replica_reads.py."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from catalog.agents import agent_read_fence_advance
from catalog.models import Agent, Catalog
from catalog.reads import REPLICA, ReplicaRouter, WriteNoticer, read_alias, reading_from, writes_noticed
from config.database_roles import app_role_grant
from tests.factories import agent_with_token

WRITES = [
    'INSERT INTO "catalog_catalog" ("slug") VALUES (%s)',
    'UPDATE "retrieval_agent" SET "last_used_at" = %s WHERE "retrieval_agent"."id" = %s',
    'DELETE FROM "retrieval_memoryentry" WHERE "id" IN (%s)',
    "WITH durability AS (SELECT set_config('synchronous_commit', %s, true)) INSERT INTO retrieval_trace VALUES (%s)",
    "INSERT INTO approvals_approvalrequest (source_id) VALUES (%s) ON CONFLICT DO NOTHING",
    "truncate catalog_chunk",
]
READS = [
    'SELECT "retrieval_agent"."id", "retrieval_agent"."last_updated" FROM "retrieval_agent"',
    'SELECT "catalog_catalog"."id" FROM "catalog_catalog" WHERE "id" = %s FOR NO KEY UPDATE',
    "SELECT pg_advisory_lock(%s, %s)",
    "SELECT '[0]'::vector, set_config('hnsw.ef_search', %s, true)",
    'SAVEPOINT "s1"',
]


@pytest.mark.parametrize("sql", WRITES)
def test_a_statement_that_changes_rows_is_noticed(sql):
    noticer = WriteNoticer()
    noticer(lambda *args: None, sql, (), False, {})
    assert noticer.wrote


@pytest.mark.parametrize("sql", READS)
def test_a_read_or_a_lock_is_not_a_write(sql):
    noticer = WriteNoticer()
    noticer(lambda *args: None, sql, (), False, {})
    assert not noticer.wrote


def test_the_router_sends_reads_where_a_read_path_chose_and_writes_to_the_primary():
    router = ReplicaRouter()
    assert (read_alias(), router.db_for_read(Catalog)) == ("default", "default")
    with reading_from(REPLICA):
        assert (read_alias(), router.db_for_read(Catalog), router.db_for_write(Catalog)) == (REPLICA, REPLICA,
                                                                                                "default")
    assert read_alias() == "default"
    assert router.allow_migrate("default", "catalog") and not router.allow_migrate(REPLICA, "catalog")


def test_writes_through_the_orm_and_raw_sql_are_noticed_reads_are_not(db):
    with writes_noticed() as reads:
        list(Catalog.objects.all())
        Catalog.objects.filter(slug="none").select_for_update().exists()
    with writes_noticed() as orm:
        Catalog.objects.create(slug="noticed", name="Noticed")
    with writes_noticed() as raw, connection.cursor() as cursor:
        cursor.execute("UPDATE catalog_catalog SET name = 'Raw' WHERE slug = 'noticed'")
    assert (reads.wrote, orm.wrote, raw.wrote) == (False, True, True)


def test_an_agents_fence_moves_past_its_writes_and_never_back(db):
    agent, _ = agent_with_token(name="fenced")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn")
        before = int(cursor.fetchone()[0])

    agent_read_fence_advance(agent=agent)
    moved = Agent.objects.get(pk=agent.pk).read_fence
    assert moved >= before > 0

    Agent.objects.filter(pk=agent.pk).update(read_fence=2**62)  # a later request's, recorded first
    agent_read_fence_advance(agent=agent)
    assert Agent.objects.get(pk=agent.pk).read_fence == 2**62


def test_the_migration_gives_every_agent_a_fence_its_reads_need_not_wait_for(as_owner):
    executor = MigrationExecutor(connection)
    try:
        executor.migrate([("catalog", "0015_content_editors")])
        old = executor.loader.project_state([("catalog", "0015_content_editors")]).apps
        legacy = old.get_model("catalog", "Agent").objects.create(name="legacy", token_hash="b" * 64,
                                                                  token_hint="lct_bbbb", max_hints=4)

        executor = MigrationExecutor(connection)
        executor.migrate([("catalog", "0016_agent_read_fence")])
        new = executor.loader.project_state([("catalog", "0016_agent_read_fence")]).apps

        kept = new.get_model("catalog", "Agent").objects.get(pk=legacy.pk)
        assert (kept.name, kept.max_hints, kept.read_fence) == ("legacy", 4, 0)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        app_role_grant(connection=connection)
