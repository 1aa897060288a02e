"""Migration 0017 moves a database across to a partition per catalog, and back: the same
chunks (ids, vectors, postings), the same answers to the same searches, a chunk written
by the previous schema found, and ids going on from where the previous schema left
them. Migrating takes the schema's owner (as_owner), as `manage.py migrate` does."""

from __future__ import annotations

import importlib

import numpy as np
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from catalog.models import Catalog, Chunk
from config.database_roles import app_role_grant
from retrieval.search.lexical import bm25_search
from retrieval.search.vector import vector_search
from tests.catalog.checks import forward_postings, term_postings_mismatches
from tests.catalog.test_partitions import catalog_indexes, lexical_source, partitions

BEFORE = [("catalog", "0016_agent_read_fence")]
AFTER = [("catalog", "0017_catalog_partitions")]


def migrate(targets):
    """Migrate catalog to `targets`; the models as they were there."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    others = [node for node in executor.loader.graph.leaf_nodes() if node[0] != "catalog"]
    return executor.loader.project_state([*targets, *others]).apps


def migrate_to_the_last():
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    app_role_grant(connection=connection)  # what `manage.py migrate` does after migrating


def answers(catalog: Catalog, vector: np.ndarray) -> dict[str, list]:
    catalog.refresh_from_db()
    literal = "[" + ",".join(f"{x:.8f}" for x in vector) + "]"
    return {"bm25": bm25_search(catalog=catalog, query="reconcile the kb ledger entry 3", limit=10)[0],
            "vector": vector_search(catalog=catalog, vector=literal, limit=10)}


# The term-major postings: catalog_termposting's rows where the schema has it (before
# 0019), else the forward rows' postings, which 0019 unpacks it from going back.
TERM_MAJOR = """
    SELECT term_id, chunk_id, tf, dl FROM catalog_termposting
    ORDER BY 1, 2
"""
UNPACKED = """
    SELECT x.term_id, p.chunk_id, x.tf, p.length FROM catalog_postings p
    CROSS JOIN LATERAL unnest(p.terms, p.tfs) AS x(term_id, tf) ORDER BY 1, 2
"""


def rows() -> dict[str, list]:
    with connection.cursor() as cursor:
        found = {}
        for table, columns in (("catalog_chunk", "id, catalog_id, key, content, embedding::text"),
                               ("catalog_postings", "chunk_id, catalog_id, length, terms, tfs")):
            cursor.execute(f"SELECT {columns} FROM {table} ORDER BY 1, 2")
            found[table] = cursor.fetchall()
        cursor.execute("SELECT to_regclass('catalog_termposting') IS NOT NULL")
        cursor.execute(TERM_MAJOR if cursor.fetchone()[0] else UNPACKED)
        found["term major"] = cursor.fetchall()
        return found


def test_a_database_moves_across_to_partitions_and_back_with_the_same_answers(as_owner):
    try:
        # given two catalogs written through the write path, and their answers
        kb, notes = Catalog.objects.create(slug="kb", name="KB"), Catalog.objects.create(slug="notes", name="Notes")
        lexical_source(kb, "kb", 30, seed=1)
        lexical_source(notes, "ledger", 20, seed=2)
        probe = np.asarray(Chunk.objects.filter(catalog=kb).order_by("id")[3].embedding)
        before = {c.slug: answers(c, probe) for c in (kb, notes)}
        written = rows()
        assert all(before[slug]["bm25"] and len(before[slug]["vector"]) == 10 for slug in before)

        # when the database goes back to the previous schema
        old = migrate(BEFORE)
        with connection.cursor() as cursor:
            cursor.execute("SELECT relkind FROM pg_class WHERE relname = 'catalog_chunk'")
            assert cursor.fetchone() == ("r",)  # a plain table, its one HNSW index shared
            cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname IN ('chunk_embedding_hnsw', "
                           "'catalog_termposting_pkey') ORDER BY indexname")
            assert [d.split(" USING ")[1] for d in (r[0] for r in cursor.fetchall())] == [
                "btree (term_id, chunk_id) INCLUDE (tf, dl)",
                "hnsw (embedding vector_cosine_ops) WITH (m='16', ef_construction='64')"]
        assert rows() == written
        # and the previous schema writes a chunk of its own, as its write path did
        added = old_schema_chunk(old, notes.pk, probe)

        # and it comes back across
        migrate(AFTER)
        migrate_to_the_last()

        # then every catalog has its partitions and indexes, holding its rows
        for catalog in (kb, notes):
            assert len(catalog_indexes(catalog.pk)) == 1
            assert term_postings_mismatches(catalog) == []
        assert partitions(kb.pk)[f"catalog_chunk_c{kb.pk}"] == 30
        assert partitions(notes.pk)[f"catalog_chunk_c{notes.pk}"] == 21
        # and the first catalog's answers are the same, the other's find the chunk the old schema wrote
        assert answers(kb, probe) == before["kb"]
        vector_hits = answers(notes, probe)["vector"]
        assert vector_hits[0][0] == added and vector_hits[1:] == before["notes"]["vector"][:9]
        assert bm25_search(catalog=notes, query="quokka", limit=5)[0][0][0] == added
        # and new chunks are numbered after it
        lexical_source(kb, "more", 2, seed=3)
        assert min(Chunk.objects.filter(catalog=kb, source__slug="more").values_list("pk", flat=True)) > added
    finally:
        migrate_to_the_last()


def old_schema_chunk(old, catalog_id: int, vector: np.ndarray) -> int:
    """A chunk the previous schema's write path would have written (chunk, forward and
    term-major postings, term counts, statistics), holding the word "quokka"; its id."""
    Catalog0015, Chunk0015 = old.get_model("catalog", "Catalog"), old.get_model("catalog", "Chunk")
    source = old.get_model("catalog", "ReferenceSource").objects.create(
        catalog_id=catalog_id, slug="old", name="Old", kind="upload", location="old")
    document = old.get_model("catalog", "Document").objects.create(
        catalog_id=catalog_id, source=source, path="old.md", text="quokka", content_sha256="0" * 64, size=6)
    chunk = Chunk0015.objects.create(catalog_id=catalog_id, source=source, document=document, ordinal=0,
                                     byte_offset=0, content="quokka", token_count=3, key="notes:old:old.md:0",
                                     embedding=vector.tolist())
    term = old.get_model("catalog", "Term").objects.create(catalog_id=catalog_id, text="quokka", df=1)
    old.get_model("catalog", "Postings").objects.create(chunk=chunk, catalog_id=catalog_id, length=1,
                                                        terms=[term.pk], tfs=[1])
    old.get_model("catalog", "TermPosting").objects.create(term=term, chunk=chunk, tf=1, dl=1)
    with connection.cursor() as cursor:
        cursor.execute("""
            UPDATE catalog_catalog c SET chunk_count = s.n, token_total = s.total, term_count = t.n, idf_sum = t.idf
            FROM (SELECT count(*) AS n, sum(length) AS total FROM catalog_postings WHERE catalog_id = %(c)s) s,
                 (SELECT count(*) AS n, sum(ln(x.n - df + 0.5) - ln(df + 0.5)) AS idf
                  FROM catalog_term, (SELECT count(*)::float8 AS n FROM catalog_postings WHERE catalog_id = %(c)s) x
                  WHERE catalog_id = %(c)s) t
            WHERE c.id = %(c)s
        """, {"c": catalog_id})
    assert Catalog0015.objects.get(pk=catalog_id).chunk_count == 21
    return chunk.pk


def test_migration_0007_backfills_term_postings_from_the_per_chunk_arrays(as_owner):
    """0007's backfill, run on the schema it was written for (0007 to 0015): the rows the
    write path writes, once the database is back there."""
    try:
        catalog = Catalog.objects.create(slug="kb", name="KB")
        lexical_source(catalog, "kb", 12, seed=1)
        written = sorted(forward_postings(catalog))
        migrate(BEFORE)
        backfill = importlib.import_module("catalog.migrations.0007_term_postings").BACKFILL

        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM catalog_termposting")
            cursor.execute(backfill)
            cursor.execute("SELECT term_id, chunk_id, tf, dl FROM catalog_termposting ORDER BY 1, 2")
            backfilled = cursor.fetchall()

        assert written and backfilled == written
    finally:
        migrate_to_the_last()
