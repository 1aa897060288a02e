"""Writes of the retrieval app beside the enrichment pipeline: trace retention."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from retrieval.models import Trace

PURGE_BATCH = 1000


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
    trace keeps its grant and loses only the link (SET_NULL). Returns how many went."""
    deleted = 0
    while True:
        with transaction.atomic():
            ids = list(Trace.objects.filter(created_at__lt=before).order_by("created_at")
                       .select_for_update(skip_locked=True).values_list("pk", flat=True)[:batch_size])
            if not ids:
                return deleted
            # only("pk"): the collector must not load a batch of full texts to delete them.
            _, per_model = Trace.objects.filter(pk__in=ids).only("pk").delete()
        deleted += per_model.get(Trace._meta.label, 0)
