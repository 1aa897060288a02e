"""Deleting a source or a whole catalog: the other writer of the index besides runs.

A source's documents, chunks and postings go through the write path's own deletion
(writes.delete_document_rows: term frequencies released, the catalog's BM25 statistics
recomputed), so the rest of the catalog keeps scoring exactly; then the row goes, and
the ORM cascades what hangs off it (uploads, runs, and the layers above: approval
requests, selections, detection profiles). A catalog's index rows go by catalog in a
few statements, not by the ORM's per-row cascade.

Both hold the sources' advisory locks (catalog.indexing.runs.source_lock_if_free) for
the whole deletion, so no run writes meanwhile; a source being indexed now is refused
(SourceBusy) rather than waited for. Each source deleted is announced as changed by
the person (`fields=["deleted"]`), inside the transaction: approvals audits it.
"""

from __future__ import annotations

from contextlib import ExitStack

from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from catalog.indexing.runs import source_lock_if_free
from catalog.indexing.writes import delete_document_rows, refresh_catalog_stats
from catalog.models import Catalog, Document, ReferenceSource
from catalog.sources.editing import source_changed_by
from catalog.sources.errors import SourceError
from catalog.sources.git import mirror_remove


class SourceBusy(SourceError):
    """A source that a run is indexing now: deleting it waits for the run to end."""


def _hold(stack: ExitStack, sources: list[ReferenceSource]) -> None:
    for source in sources:
        if not stack.enter_context(source_lock_if_free(source.pk)):
            raise SourceBusy(f"source {source.slug!r} is being indexed now: delete it once its run has finished")


def source_delete(*, source: ReferenceSource, by: User | None) -> None:
    with ExitStack() as stack:
        _hold(stack, [source])
        with transaction.atomic():
            Catalog.objects.select_for_update(no_key=True).filter(pk=source.catalog_id).first()
            source_changed_by(source=source, by=by, fields=["deleted"])
            with connection.cursor() as cursor:
                delete_document_rows(cursor, source.catalog_id,
                                     list(Document.objects.filter(source=source).values_list("pk", flat=True)))
                refresh_catalog_stats(cursor, source.catalog_id)
            source.delete()
        mirror_remove(source.pk)  # a git source's mirror is its cache: it goes with it


# What the dashboard's catalog deletion removes by SQL rather than by the ORM's per-row
# cascade: the catalog's chunk-side partitions are emptied (TRUNCATE: their locks alone,
# and instant at any size), then its documents and vocabulary.
_CATALOG_ROWS = (
    "SELECT lectern_catalog_partitions_empty(%s)",
    "DELETE FROM catalog_termblock WHERE catalog_id = %s",  # not partitioned: keyed by catalog first
    "DELETE FROM catalog_document WHERE catalog_id = %s",
    "DELETE FROM catalog_term WHERE catalog_id = %s",
)


def catalog_delete(*, catalog: Catalog, by: User | None) -> None:
    sources = list(catalog.sources.select_related("catalog").order_by("pk"))
    with ExitStack() as stack:
        _hold(stack, sources)
        with transaction.atomic():
            Catalog.objects.select_for_update().filter(pk=catalog.pk).first()
            for source in sources:
                source_changed_by(source=source, by=by, fields=["deleted"])
            with connection.cursor() as cursor:
                for statement in _CATALOG_ROWS:
                    cursor.execute(statement, [catalog.pk])
            catalog.delete()
        for source in sources:
            mirror_remove(source.pk)


def partitions_prune(*, connection: BaseDatabaseWrapper) -> int:
    """As the schema's owner (`manage.py migrate`): drop the emptied partitions of deleted
    catalogs; how many catalogs' went. Dropping a partition locks every reader out of
    its parent table, which a deletion, while the app serves, does not."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regprocedure('lectern_catalog_partitions_prune()') IS NOT NULL")
        if not cursor.fetchone()[0]:  # migrated back before the partitions
            return 0
        cursor.execute("SELECT lectern_catalog_partitions_prune()")
        return int(cursor.fetchone()[0])
