"""Storing enrichment traces: one statement per trace as enrichment makes it, and their
retention (purged in batches past LECTERN_TRACE_RETENTION_DAYS, with the passages they
served and the texts no passage names any longer)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from retrieval.models import ServedPassage, ServedText, Trace

PURGE_BATCH = 1000


def insert_trace(trace: Trace) -> None:
    """Store a new trace in one statement, one round trip (the ORM's create inside a
    transaction took four). Alone, in autocommit, a trace is a diagnostic record whose
    commit does not wait for the WAL flush: a crash may lose the last few traces, never
    corrupt anything. Inside a transaction (a grant rides along) the commit stays durable."""
    fields = Trace._meta.concrete_fields
    # a concrete field is one with a column (the stubs type Field.column as optional)
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)  # type: ignore[arg-type]
    values = [f.get_db_prep_save(f.pre_save(trace, add=True), connection) for f in fields]
    commit = "off" if connection.get_autocommit() else "on"
    with connection.cursor() as cursor:
        cursor.execute(f"WITH durability AS (SELECT set_config('synchronous_commit', %s, true)) "
                       f"INSERT INTO {Trace._meta.db_table} ({columns}) "
                       f"SELECT {', '.join(['%s'] * len(fields))} FROM durability", [commit, *values])
    trace._state.adding, trace._state.db = False, connection.alias


def trace_retention_cutoff(*, now: datetime | None = None) -> datetime | None:
    """Traces made before this are past LECTERN_TRACE_RETENTION_DAYS; None when traces
    are kept forever (0)."""
    days = settings.LECTERN_TRACE_RETENTION_DAYS
    if days == 0:
        return None
    return (now or timezone.now()) - timedelta(days=days)


def traces_purge(*, before: datetime, batch_size: int = PURGE_BATCH) -> int:
    """Delete the traces made before `before`, oldest first, in short transactions of
    `batch_size` (no long lock, no WAL burst, enrichments go on writing). Rows another
    purge has locked are skipped: it is deleting them. A selection granted by a deleted
    trace keeps its grant and loses only the link (SET_NULL); the passages a trace served
    go with it, then their texts (served_texts_purge). Returns how many traces went."""
    deleted = 0
    while True:
        with transaction.atomic():
            ids = list(Trace.objects.filter(created_at__lt=before).order_by("created_at")
                       .select_for_update(skip_locked=True).values_list("pk", flat=True)[:batch_size])
            if not ids:
                break
            # only("pk"): the collector must not load a batch of full texts to delete them.
            _, per_model = Trace.objects.filter(pk__in=ids).only("pk").delete()
        deleted += per_model.get(Trace._meta.label, 0)
    served_texts_purge(before=before)
    return deleted


def served_texts_purge(*, before: datetime) -> int:
    """Delete the served texts no passage names any longer and not served since
    `before`; returns how many went. A text served again meanwhile was marked served
    (retrieval.citations.services), so it stays for the trace being written."""
    named = ServedPassage.objects.filter(text_id=OuterRef("pk"))
    deleted, _ = ServedText.objects.filter(served_at__lt=before).filter(~Exists(named)).delete()
    return deleted
