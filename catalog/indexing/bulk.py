"""Bulk loads into an empty catalog: its HNSW index and BM25 blocks built once, after
the rows, instead of maintained row by row (docs/decisions/0005-bulk-loads-build-indexes-after-rows.md,
"Bulk loads build a new catalog's indexes after its rows").

Each catalog's chunks and forward postings are partitions of their own (catalog
migration 0017), whose HNSW index the owner's functions drop and build (migration 0019):
`lectern_catalog_indexes_defer` refuses a catalog that holds chunks (its index serves
them), `lectern_catalog_indexes_build` builds it when missing and analyses the
partitions; whenever it does, the catalog's BM25 blocks are packed anew from all its
forward rows in one sorted pass (catalog.indexing.blocks). So a catalog that serves
searches never loses its indexes, and a catalog being loaded for the first time gets
them:
- in the write that loads it (`catalog_bulk_load(..., across_writes=False)`, an import
  of one source): every write ends by building its catalog's missing indexes, before
  it commits, so its rows and their indexes appear together;
- after its last write (`across_writes=True`, a build of many sources): the writes
  meanwhile are seen without the indexes (searches rank them by exact scans), and the
  catalog gets them when the load ends, however it ends; a loader killed outright
  leaves that to the next write or the next recovery (`bulk_loads_recover`).
The loader holds the catalog's advisory lock throughout, so recovery leaves a live load
alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper

from catalog.indexing.blocks import term_blocks_rebuild
from catalog.models import Catalog

BULK_LOCK_NAMESPACE = 0x4C42  # "LB": pg_advisory_lock(int, int) of a catalog being bulk loaded
# Catalogs whose indexes this process builds only when their load ends.
_deferred_across_writes: set[int] = set()


def _indexes_build(cursor: CursorWrapper, catalog_id: int) -> bool:
    """Build the catalog's HNSW index if missing; when it was, its BM25 blocks are packed
    anew from all its forward rows (a bulk load leaves them to this: one sorted pass
    costs far less than merging every write into them); whether it built."""
    cursor.execute("SELECT lectern_catalog_indexes_build(%s)", [catalog_id])
    built = bool(cursor.fetchone()[0])
    if built:
        term_blocks_rebuild(cursor, catalog_id)
    return built


def catalog_loading_across_writes(catalog_id: int) -> bool:
    """Whether this process is bulk loading the catalog across writes (its indexes and
    BM25 blocks are built when the load ends)."""
    return catalog_id in _deferred_across_writes


def catalog_indexes_ensure(cursor: CursorWrapper, catalog_id: int) -> bool:
    """Build the catalog's HNSW index and BM25 blocks if missing (after a
    bulk load's first write, or a killed one), unless this process is loading it
    across writes; whether it built them. One catalog lookup when the index exists."""
    if catalog_loading_across_writes(catalog_id):
        return False
    return _indexes_build(cursor, catalog_id)


def catalog_indexes_build(catalog_id: int, *, memory: str | None = None) -> bool:
    """Build the catalog's missing indexes now, with `memory` as maintenance_work_mem (an
    HNSW graph built in memory is far faster: about 2 GB at 1M vectors)."""
    with transaction.atomic(), connection.cursor() as cursor:
        if memory:
            cursor.execute("SELECT set_config('maintenance_work_mem', %s, true)", [memory])
        return _indexes_build(cursor, catalog_id)


@contextmanager
def catalog_bulk_load(catalog: Catalog, *, across_writes: bool, memory: str | None = None) -> Iterator[bool]:
    """Load a catalog without maintaining its HNSW index and BM25 blocks row by row
    when it holds no chunks (see the module docstring); yields whether it does so (a
    catalog holding chunks keeps its indexes, and the load maintains them)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s, %s)", [BULK_LOCK_NAMESPACE, catalog.pk])
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT lectern_catalog_indexes_defer(%s)", [catalog.pk])
            deferred = bool(cursor.fetchone()[0])
        if deferred and across_writes:
            _deferred_across_writes.add(catalog.pk)
        try:
            yield deferred
        finally:
            _deferred_across_writes.discard(catalog.pk)
            if not connection.in_atomic_block and not connection.is_usable():
                connection.close()  # a failure (Ctrl-C mid-statement) broke it: build on a new one
            if deferred:
                catalog_indexes_build(catalog.pk, memory=memory)
    finally:
        if connection.connection is not None:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [BULK_LOCK_NAMESPACE, catalog.pk])


def bulk_loads_recover() -> list[int]:
    """Build the indexes of catalogs a bulk load left without them (killed before its
    end) and that no load holds now; the catalogs built."""
    with connection.cursor() as cursor:
        cursor.execute("""
            SELECT id FROM catalog_catalog WHERE to_regclass(format('catalog_chunk_c%s_hnsw', id)) IS NULL
            ORDER BY id
        """)
        missing = [row[0] for row in cursor.fetchall()]
    built = []
    for catalog_id in missing:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [BULK_LOCK_NAMESPACE, catalog_id])
            if not cursor.fetchone()[0]:
                continue  # a load holds it: it builds them when it ends
            try:
                with transaction.atomic():
                    if _indexes_build(cursor, catalog_id):
                        built.append(catalog_id)
            finally:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [BULK_LOCK_NAMESPACE, catalog_id])
    return built
