"""A partition per catalog (catalog migration 0017): made and emptied with the catalog,
read alone by that catalog's searches, and loaded in bulk with its indexes built once
after its rows, never leaving a catalog that serves searches without them."""

from __future__ import annotations

import time

import numpy as np
import psycopg
import pytest
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext

from catalog.indexing import bulk, runs
from catalog.indexing.bulk import BULK_LOCK_NAMESPACE, bulk_loads_recover, catalog_bulk_load
from catalog.indexing.chunks import prepare_chunks
from catalog.indexing.removal import catalog_delete, partitions_prune
from catalog.indexing.writes import source_replace_rows
from catalog.models import Catalog, Chunk, ReferenceSource
from catalog.sources.documents import Collected, DocumentInput
from config.database_roles import connected_as_owner
from retrieval.search.selectors import SearchOptions, chunk_search
from tests.catalog.checks import term_postings_mismatches
from tests.factories import import_documents
from tests.owner import owner_connection

PARENTS = ("catalog_chunk", "catalog_postings")


def partitions(catalog_id: int) -> dict[str, int]:
    """The catalog's partitions that exist, with their rows."""
    found = {}
    with connection.cursor() as cursor:
        for parent in PARENTS:
            name = f"{parent}_c{catalog_id}"
            cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
            if cursor.fetchone()[0]:
                cursor.execute(f"SELECT count(*) FROM {parent} WHERE catalog_id = %s", [catalog_id])
                found[name] = cursor.fetchone()[0]
    return found


def catalog_indexes(catalog_id: int) -> dict[str, int]:
    """The catalog's HNSW index, by name, with the transaction that made it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname, xmin::text::bigint FROM pg_class WHERE relname = %s",
                       [f"catalog_chunk_c{catalog_id}_hnsw"])
        return dict(cursor.fetchall())


def documents(count: int, word: str = "ledger") -> list[DocumentInput]:
    text = f"Reconcile the {word} every night and keep the audit trail."
    return [DocumentInput(f"{word}-{i:03d}.md", "", f"{text} Entry {i}.", len(text) + 10) for i in range(count)]


def lexical_source(catalog: Catalog, slug: str, count: int, seed: int) -> ReferenceSource:
    """An upload source of `count` one-chunk documents with random vectors (no model)."""
    source = ReferenceSource.objects.create(catalog=catalog, slug=slug, name=slug, kind="upload", location=slug)
    docs = documents(count, slug)
    prepared = prepare_chunks(catalog, docs, embedder=None)
    vectors = np.random.default_rng(seed).normal(size=(len(prepared), 384)).astype(np.float32)
    source_replace_rows(source, Collected(docs), prepared, vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    return source


# --- made and emptied with the catalog ------------------------------------------------------


@pytest.mark.django_db
def test_a_new_catalog_has_its_partitions_and_indexes(make_catalog):
    catalog = make_catalog("kb")  # the ORM's own create: a trigger makes them

    assert partitions(catalog.pk) == {f"{parent}_c{catalog.pk}": 0 for parent in PARENTS}
    assert set(catalog_indexes(catalog.pk)) == {f"catalog_chunk_c{catalog.pk}_hnsw"}


@pytest.mark.django_db(transaction=True)
def test_deleting_a_catalog_empties_its_partitions_and_migrate_drops_them(make_catalog):
    with connected_as_owner() as owner:  # catalogs an earlier test's flush (TRUNCATE: no trigger) left
        partitions_prune(connection=owner)
    kept, gone = make_catalog("kept"), make_catalog("gone")
    lexical_source(kept, "notes", 5, seed=1)
    lexical_source(gone, "notes", 7, seed=2)

    catalog_delete(catalog=Catalog.objects.get(pk=gone.pk), by=None)

    assert partitions(gone.pk) == {f"{parent}_c{gone.pk}": 0 for parent in PARENTS}  # emptied, not dropped
    with connected_as_owner() as owner:  # as `manage.py migrate` does
        assert partitions_prune(connection=owner) == 1
    assert partitions(gone.pk) == {}
    assert partitions(kept.pk) == {f"catalog_chunk_c{kept.pk}": 5, f"catalog_postings_c{kept.pk}": 5}
    assert term_postings_mismatches(Catalog.objects.get(pk=kept.pk)) == []


@pytest.mark.django_db
def test_a_catalog_deleted_through_the_orm_loses_its_rows(make_catalog):
    catalog = make_catalog("kb")
    lexical_source(catalog, "notes", 4, seed=1)

    Catalog.objects.get(pk=catalog.pk).delete()  # the admin's way: the ORM cascades first, then the trigger

    assert partitions(catalog.pk) == {f"{parent}_c{catalog.pk}": 0 for parent in PARENTS}


@pytest.mark.django_db
def test_the_app_may_not_make_attach_or_drop_partitions(make_catalog):
    catalog = make_catalog("kb")
    for statement in (f"SELECT lectern_catalog_partitions_attach({catalog.pk})",
                      f"SELECT lectern_catalog_partitions_drop({catalog.pk})",
                      "SELECT lectern_catalog_partitions_prune()",
                      f"DROP TABLE catalog_chunk_c{catalog.pk}", f"DROP INDEX catalog_chunk_c{catalog.pk}_hnsw"):
        with pytest.raises(DatabaseError) as error, transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)
        assert isinstance(error.value.__cause__, psycopg.errors.InsufficientPrivilege), (statement, error.value)


# --- one catalog's search reads its partitions alone -------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["bm25", "vector", "hybrid", "bm25_tiebreak"])
def test_a_search_reads_only_its_catalogs_partitions(make_catalog, mode):
    small, big = make_catalog("small"), make_catalog("big")
    lexical_source(small, "ledger", 20, seed=1)
    lexical_source(big, "ledger", 200, seed=2)
    small.refresh_from_db()  # its statistics, as a request reads them
    with CaptureQueriesContext(connection) as queries:
        result = chunk_search(catalog=small, query="reconcile the ledger", options=SearchOptions(mode=mode, top_k=5))
    assert len(result.hits) == 5

    plans = []
    with connection.cursor() as cursor:
        for query in queries.captured_queries:
            if any(parent in query["sql"] for parent in PARENTS):
                cursor.execute(f"EXPLAIN {query['sql']}")
                plans.append(" ".join(row[0] for row in cursor.fetchall()))
    assert plans and all(f"_c{big.pk}" not in plan for plan in plans)
    assert any(f"_c{small.pk}" in plan for plan in plans)


# --- bulk loads ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_large_import_into_an_empty_catalog_builds_its_indexes_with_its_rows(make_catalog, monkeypatch):
    monkeypatch.setattr(runs, "BULK_IMPORT_DOCUMENTS", 5)
    catalog = make_catalog("kb")
    before = catalog_indexes(catalog.pk)

    import_documents(catalog=catalog, slug="notes", documents=documents(6))

    after = catalog_indexes(catalog.pk)
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT xmin::text::bigint FROM catalog_chunk WHERE catalog_id = %s", [catalog.pk])
        (written,), = cursor.fetchall()
    # rebuilt, by the very transaction that wrote the rows: no one saw the rows without them
    assert set(after) == set(before) and set(after.values()) == {written} != set(before.values())
    assert term_postings_mismatches(Catalog.objects.get(pk=catalog.pk)) == []


@pytest.mark.django_db
@pytest.mark.parametrize("count", [4, 6])
def test_an_import_into_a_catalog_that_holds_chunks_keeps_its_indexes(make_catalog, monkeypatch, count):
    monkeypatch.setattr(runs, "BULK_IMPORT_DOCUMENTS", 5)  # 4: not a bulk import; 6: one, not into an empty catalog
    catalog = make_catalog("kb")
    import_documents(catalog=catalog, slug="first", documents=documents(2, "first"))
    before = catalog_indexes(catalog.pk)

    import_documents(catalog=catalog, slug="second", documents=documents(count, "second"))

    assert catalog_indexes(catalog.pk) == before  # the same indexes, maintained row by row
    assert Chunk.objects.filter(catalog=catalog).count() == 2 + count


@pytest.mark.django_db
def test_a_load_across_writes_builds_the_indexes_once_when_it_ends(make_catalog):
    catalog, other = make_catalog("kb"), make_catalog("other")
    others = catalog_indexes(other.pk)
    during = []

    with catalog_bulk_load(catalog, across_writes=True) as deferred:
        for number in range(3):
            lexical_source(catalog, f"s{number}", 4, seed=number)
            during.append(catalog_indexes(catalog.pk))

    assert deferred and during == [{}, {}, {}]
    assert len(catalog_indexes(catalog.pk)) == 1 and catalog_indexes(other.pk) == others
    catalog.refresh_from_db()
    assert catalog.chunk_count == 12 and term_postings_mismatches(catalog) == []


@pytest.mark.django_db
@pytest.mark.parametrize("then", ["recovery", "next write"])
def test_a_killed_load_across_writes_gets_its_bm25_blocks_with_its_indexes(make_catalog, then):
    # given: a load across writes whose process died after two writes: its indexes
    # missing, its writes' BM25 blocks never packed (they are left to the load's end)
    catalog = make_catalog("kb")
    with connection.cursor() as cursor:
        cursor.execute("SELECT lectern_catalog_indexes_defer(%s)", [catalog.pk])
    bulk._deferred_across_writes.add(catalog.pk)
    try:
        for number in range(2):
            lexical_source(catalog, f"s{number}", 4, seed=number)
    finally:
        bulk._deferred_across_writes.discard(catalog.pk)  # the process is gone
    catalog.refresh_from_db()
    assert term_postings_mismatches(catalog) != []  # postings the blocks do not hold yet

    # when: the next recovery, or the next write of another process, builds the indexes
    if then == "recovery":
        assert bulk_loads_recover() == [catalog.pk]
    else:
        lexical_source(catalog, "s2", 4, seed=2)

    # then: the blocks hold every posting, and BM25 ranks from them
    catalog.refresh_from_db()
    assert len(catalog_indexes(catalog.pk)) == 1 and term_postings_mismatches(catalog) == []
    hits = chunk_search(catalog=catalog, query="reconcile ledger", options=SearchOptions(mode="bm25", top_k=3)).hits
    assert len(hits) == 3


@pytest.mark.django_db
def test_a_load_that_fails_still_builds_the_indexes(make_catalog):
    catalog = make_catalog("kb")

    with pytest.raises(RuntimeError, match="failed"), catalog_bulk_load(catalog, across_writes=True):
        lexical_source(catalog, "s", 4, seed=1)
        raise RuntimeError("the load failed")

    assert len(catalog_indexes(catalog.pk)) == 1


@pytest.mark.django_db
def test_a_catalog_holding_chunks_is_not_loaded_in_bulk(make_catalog):
    catalog = make_catalog("kb")
    lexical_source(catalog, "s", 3, seed=1)
    before = catalog_indexes(catalog.pk)

    with catalog_bulk_load(catalog, across_writes=True) as deferred:
        assert catalog_indexes(catalog.pk) == before  # its indexes serve its chunks
        lexical_source(catalog, "t", 3, seed=2)

    assert not deferred and catalog_indexes(catalog.pk) == before


def session_end_wait(pid: int, timeout_s: float = 30) -> None:
    """Until the server process `pid` has exited, and its session's locks with it (the
    deadline is only a safety net)."""
    deadline = time.monotonic() + timeout_s
    with connection.cursor() as cursor:
        while True:
            cursor.execute("SELECT EXISTS (SELECT FROM pg_locks WHERE pid = %s)", [pid])
            if not cursor.fetchone()[0]:
                return
            assert time.monotonic() < deadline, f"session {pid} still holds locks after {timeout_s} s"


@pytest.mark.django_db(transaction=True)
def test_recovery_builds_the_indexes_a_killed_load_left_missing_but_not_a_live_loads(make_catalog):
    killed, live = make_catalog("killed"), make_catalog("live")
    with connection.cursor() as cursor:  # both without them: one's loader died, the other's is at work
        cursor.execute("SELECT lectern_catalog_indexes_defer(%s), lectern_catalog_indexes_defer(%s)",
                       [killed.pk, live.pk])
    with owner_connection() as loader:  # another session holds the live load's lock
        loader.execute("SELECT pg_advisory_lock(%s, %s)", [BULK_LOCK_NAMESPACE, live.pk])

        assert bulk_loads_recover() == [killed.pk]

        assert len(catalog_indexes(killed.pk)) == 1 and catalog_indexes(live.pk) == {}
        loader_pid = loader.info.backend_pid
    session_end_wait(loader_pid)  # a closed client's server process exits on its own time
    assert bulk_loads_recover() == [live.pk]  # its loader gone (the lock with its session)
    assert bulk._deferred_across_writes == set()
