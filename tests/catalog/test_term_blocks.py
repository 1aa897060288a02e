"""BM25's packed postings (catalog_termblock) stay exactly the forward rows' postings through
every write: imports, edits in the middle of a term's blocks, removals, deletions of a
source or a catalog; and migration 0018 builds them for a database that had none."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from catalog.indexing import blocks, pack, writes
from catalog.indexing.removal import catalog_delete, source_delete
from catalog.models import TermBlock
from catalog.sources.documents import DocumentInput
from config.database_roles import app_role_grant
from retrieval.search.lexical import bm25_search, bm25_terms, bm25_walk
from tests.catalog import checks
from tests.factories import import_documents

WORDS = "otter heron salmon willow reed marsh delta silt current".split()
QUERIES = ["otter heron", "salmon willow reed marsh", "delta", "silt current otter"]


def documents(start: int, count: int, *, variant: str = "") -> list[DocumentInput]:
    """Short documents whose words recur across them (terms with many postings)."""
    docs = []
    for n in range(start, start + count):
        text = " ".join(WORDS[(n * k) % len(WORDS)] for k in range(1, 2 + n % 5)) + f" {variant}".rstrip()
        docs.append(DocumentInput(f"d{n:03d}.md", "", text, len(text.encode())))
    return docs


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 3 postings: the same code paths as 128 on a few dozen chunks."""
    monkeypatch.setattr(blocks, "TERM_BLOCK_POSTINGS", 3)
    monkeypatch.setattr(checks, "TERM_BLOCK_POSTINGS", 3)


def assert_searches_exact(catalog) -> None:
    catalog.refresh_from_db()
    assert checks.term_postings_mismatches(catalog) == []
    for query in QUERIES:
        assert bm25_search(catalog=catalog, query=query, limit=7)[0] == bm25_walk(
            catalog, bm25_terms(catalog, query), 7), query


def test_blocks_follow_edits_removals_and_additions_in_the_middle_of_terms(make_catalog, small_blocks):
    # given: two sources of one catalog, the second imported after the first
    catalog = make_catalog("river")
    import_documents(catalog=catalog, slug="a", documents=documents(0, 20))
    import_documents(catalog=catalog, slug="b", documents=documents(20, 15))
    assert_searches_exact(catalog)
    assert TermBlock.objects.filter(catalog=catalog, postings=3).count() > 10, "terms must span several blocks"

    # when: source a is edited twice (documents changed, removed, added: their old chunks
    # sit in the middle of each term's blocks, the new ones at the end)
    import_documents(catalog=catalog, slug="a", documents=documents(0, 12) + documents(12, 5, variant="delta"))
    assert_searches_exact(catalog)
    import_documents(catalog=catalog, slug="a", documents=documents(3, 6, variant="silt") + documents(40, 4))

    # then: the blocks hold exactly the postings, and search ranks as the full walk does
    assert_searches_exact(catalog)


def test_appending_keeps_each_terms_blocks_full_but_its_last(make_catalog, small_blocks):
    catalog = make_catalog("river")
    for n in range(4):  # four imports, each adding a few postings to every term
        import_documents(catalog=catalog, slug=f"s{n}", documents=documents(n * 4, 4))

    last: dict[int, list[int]] = {}
    for block in TermBlock.objects.filter(catalog=catalog).order_by("term_id", "first_chunk_id"):
        last.setdefault(block.term_id, []).append(block.postings)
    assert all(all(size == 3 for size in sizes[:-1]) for sizes in last.values()), last
    assert_searches_exact(catalog)


def test_deleting_a_source_or_a_catalog_takes_its_blocks(make_catalog, small_blocks):
    catalog, other = make_catalog("river"), make_catalog("lake")
    gone = import_documents(catalog=catalog, slug="a", documents=documents(0, 10))
    import_documents(catalog=catalog, slug="b", documents=documents(10, 10))
    import_documents(catalog=other, slug="c", documents=documents(0, 5))

    source_delete(source=gone, by=None)
    assert_searches_exact(catalog)
    catalog_delete(catalog=catalog, by=None)

    assert not TermBlock.objects.filter(catalog_id=catalog.pk).exists()
    assert_searches_exact(other)


def test_a_block_never_straddles_a_multiple_of_2_to_the_31_in_chunk_ids(db):
    # given: one term's postings on both sides of 2**31 (ids less a block's first are int4)
    near = [2**31 - 2, 2**31 - 1, 2**31, 2**31 + 5]
    postings = " UNION ALL ".join(
        f"SELECT 1 AS catalog_id, 7 AS term_id, 0 AS piece, {c}::bigint AS chunk_id, 1 AS tf, 9 AS dl" for c in near)

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT r.first, r.max FROM ({blocks.blocks_sql(postings)}) r(catalog_id, term_id, first, "
                       "max, count, max_tf, min_dl, ids, tfs, dls) ORDER BY 1")
        found = cursor.fetchall()

    assert found == [(2**31 - 2, 2**31 - 1), (2**31, 2**31 + 5)]


def sql_blocks(catalog) -> list[tuple]:
    """The catalog's blocks as blocks_sql packs them from its forward rows."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT catalog_id, term_id, first, max, count, max_tf, min_dl, ids, tfs, dls FROM "
                       f"({blocks.blocks_sql(blocks.forward_sql('p.catalog_id = %s'))}) "
                       f"r(catalog_id, term_id, first, max, count, max_tf, min_dl, ids, tfs, dls) ORDER BY 2, 3",
                       [catalog.pk])
        return [(*row[:7], *map(bytes, row[7:])) for row in cursor.fetchall()]


def stored_blocks(catalog) -> list[tuple]:
    return [(*row[:7], *map(bytes, row[7:])) for row in TermBlock.objects.filter(catalog=catalog).order_by(
        "term_id", "first_chunk_id").values_list("catalog_id", "term_id", "first_chunk_id", "last_chunk_id",
                                                 "postings", "max_tf", "min_dl", "chunk_ids", "tfs", "dls")]


@pytest.mark.parametrize("batch_rows", [1, 4, 7, 1000])
def test_the_numpy_pack_makes_the_blocks_sql_makes_whatever_its_batches(make_catalog, small_blocks, batch_rows):
    # given: a catalog whose terms span many blocks, edited so that ids have gaps
    catalog = make_catalog("river")
    import_documents(catalog=catalog, slug="a", documents=documents(0, 30))
    import_documents(catalog=catalog, slug="b", documents=documents(30, 25))
    import_documents(catalog=catalog, slug="a", documents=documents(0, 10) + documents(60, 9, variant="delta"))
    expected = sql_blocks(catalog)

    # when: the blocks are packed anew in numpy, a few forward rows at a time
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM catalog_termblock WHERE catalog_id = %s", [catalog.pk])
        written = pack.term_blocks_pack(cursor.cursor, catalog.pk, size=3, batch_rows=batch_rows)

    # then: byte for byte the blocks SQL packs (a term's unfilled last block waits for the next batch)
    assert stored_blocks(catalog) == expected and written == len(expected) > 30
    assert_searches_exact(catalog)


def test_the_numpy_pack_never_straddles_a_multiple_of_2_to_the_31_either():
    near = np.array([2**31 - 2, 2**31 - 1, 2**31, 2**31 + 5])
    postings = pack.Postings(terms=np.full(4, 7, np.int32), chunks=near, tfs=np.ones(4, np.int32),
                             dls=np.full(4, 9, np.int32))

    cut = pack.blocks_cut(postings, 3)

    assert postings.chunks[cut.starts].tolist() == [2**31 - 2, 2**31] and cut.ends.tolist() == [2, 4]


def test_the_numpy_pack_of_a_catalog_without_chunks_writes_nothing(make_catalog):
    catalog = make_catalog("empty")
    with connection.cursor() as cursor:
        assert pack.term_blocks_pack(cursor.cursor, catalog.pk) == 0
    assert stored_blocks(catalog) == []


BEFORE = [("catalog", "0017_catalog_partitions")]
AFTER = [("catalog", "0018_term_blocks")]


def test_the_migration_builds_the_blocks_of_a_database_that_had_none(as_owner, make_catalog, monkeypatch):
    try:
        # given: a catalog indexed by the schema before blocks: the same write path, with
        # its block steps doing nothing (there is no table to write), and the term-major
        # rows that schema's write path added, unnested from the forward rows
        MigrationExecutor(connection).migrate(BEFORE)
        checks.later_columns_add()
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass('catalog_termblock')")
            assert cursor.fetchone() == (None,)
        with monkeypatch.context() as patched:
            patched.setattr(writes, "term_blocks_extend", lambda *args: None)
            patched.setattr(writes, "term_blocks_shrink", lambda *args: None)
            catalog = make_catalog("river")
            import_documents(catalog=catalog, slug="a", documents=documents(0, 300))
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO catalog_termposting (catalog_id, term_id, chunk_id, tf, dl) "
                           "SELECT p.catalog_id, x.term_id, p.chunk_id, x.tf, p.length FROM catalog_postings p "
                           "CROSS JOIN LATERAL unnest(p.terms, p.tfs) AS x(term_id, tf)")

        # when
        MigrationExecutor(connection).migrate(AFTER)

        # then: blocks holding every posting (a term's 120 in one), and search ranking as the walk does
        assert max(TermBlock.objects.filter(catalog=catalog).values_list("postings", flat=True)) == 120
        assert_searches_exact(catalog)
    finally:
        checks.later_columns_drop()
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        app_role_grant(connection=connection)


BLOCKS_ONLY = [("catalog", "0019_drop_term_postings")]


def term_major_relations() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname FROM pg_class WHERE relname LIKE 'catalog\\_termposting%%' ORDER BY 1")
        return [row[0] for row in cursor.fetchall()]


def test_migration_0019_drops_the_term_postings_and_keeps_the_blocks_and_answers(as_owner, make_catalog):
    try:
        # given: a database at the schema before (0018: term postings and blocks), with
        # two catalogs, their term postings unpacked from the forward rows going back
        catalog, other = make_catalog("river"), make_catalog("delta")
        import_documents(catalog=catalog, slug="a", documents=documents(0, 200))
        import_documents(catalog=other, slug="b", documents=documents(50, 30))
        catalog.refresh_from_db()
        MigrationExecutor(connection).migrate(AFTER)
        checks.later_columns_add()
        assert term_major_relations() == sorted(
            ["catalog_termposting", *(f"catalog_termposting_c{c.pk}{key}" for c in (catalog, other)
                                      for key in ("", "_key"))])
        with connection.cursor() as cursor:
            cursor.execute("SELECT term_id, chunk_id, tf, dl FROM catalog_termposting WHERE catalog_id = %s",
                           [catalog.pk])
            assert set(cursor.fetchall()) == checks.forward_postings(catalog)
        blocks_before = sorted(TermBlock.objects.values_list("catalog_id", "term_id", "first_chunk_id", "postings"))
        answers = {q: bm25_search(catalog=catalog, query=q, limit=7)[0] for q in QUERIES}
        assert all(answers.values())

        # when
        MigrationExecutor(connection).migrate(BLOCKS_ONLY)

        # then: no term-major table or partition left, the same blocks, the same answers
        assert term_major_relations() == []
        assert sorted(TermBlock.objects.values_list("catalog_id", "term_id", "first_chunk_id", "postings")) == (
            blocks_before)
        assert {q: bm25_search(catalog=catalog, query=q, limit=7)[0] for q in QUERIES} == answers
        assert_searches_exact(catalog)
        # and a new catalog gets partitions without one, and writes keep the blocks exact
        third = make_catalog("silt")
        assert term_major_relations() == []
        import_documents(catalog=third, slug="c", documents=documents(0, 10))
        import_documents(catalog=catalog, slug="a", documents=documents(0, 150) + documents(300, 5))
        assert_searches_exact(catalog)
        assert_searches_exact(third)
    finally:
        checks.later_columns_drop()
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        app_role_grant(connection=connection)
