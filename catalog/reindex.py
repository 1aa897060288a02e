"""Index runs: requesting, claiming and executing a source's reindex, one at a time.

index_run_execute() is what a worker does:
  1. take the source's advisory lock (a session lock: it dies with a killed worker),
     waiting while another worker holds it
  2. claim the run with a conditional update; a run already finished is left alone,
     and any other run still marked running is stale (its worker died) and is failed
  3. run catalog.services.source_index, reporting stage and progress on the run
  4. record counts and timings, or the error; the source's rows are switched in one
     transaction by source_index, so a failure or a kill leaves the old generation
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction
from django.utils import timezone

from catalog.models import IndexRun, ReferenceSource
from catalog.services import Progress, SourceError, source_fingerprint, source_index

logger = logging.getLogger(__name__)

LOCK_NAMESPACE = 0x4C43  # "LC": the first key of pg_advisory_lock(int, int)
ACTIVE = (IndexRun.Status.QUEUED, IndexRun.Status.RUNNING)
# Where each stage's progress lands on the run's 0-100 scale.
STAGES = {"collect": (0, 5), "chunk": (5, 15), "embed": (15, 90), "write": (90, 100)}


@contextmanager
def source_lock(source_id: int) -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s, %s)", [LOCK_NAMESPACE, source_id])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, source_id])


def _lock_is_free(source_id: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_NAMESPACE, source_id])
        if not cursor.fetchone()[0]:
            return False
        cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, source_id])
    return True


def _fail_stale_runs(source_id: int, *, keep: int | None = None) -> None:
    """Runs marked running while nobody holds the source's lock: their worker died."""
    stale = IndexRun.objects.filter(source_id=source_id, status=IndexRun.Status.RUNNING).exclude(pk=keep)
    if stale.update(status=IndexRun.Status.FAILED, error="interrupted: its worker stopped",
                    finished_at=timezone.now()):
        ReferenceSource.objects.filter(pk=source_id, status=ReferenceSource.Status.INDEXING).update(
            status=ReferenceSource.Status.ERROR, last_error="indexing interrupted: its worker stopped")


def index_run_request(*, source: ReferenceSource, trigger: str, full: bool = False) -> tuple[IndexRun, bool]:
    """(run, created): a new queued run, or the source's queued or running one.

    The task is enqueued when the surrounding transaction commits.
    """
    with transaction.atomic():
        ReferenceSource.objects.select_for_update().filter(pk=source.pk).first()
        active = IndexRun.objects.filter(source=source, status__in=ACTIVE).order_by("pk").first()
        if active is not None and active.status == IndexRun.Status.RUNNING and _lock_is_free(source.pk):
            _fail_stale_runs(source.pk)  # its worker died: do not hand back a run nobody executes
            active = IndexRun.objects.filter(source=source, status=IndexRun.Status.QUEUED).order_by("pk").first()
        if active is not None and (active.full or not full):
            return active, False
        run = IndexRun.objects.create(catalog_id=source.catalog_id, source=source, trigger=trigger, full=full)
        transaction.on_commit(lambda: _enqueue(run.pk))
    return run, True


def _enqueue(run_id: int) -> None:
    from django_q.tasks import async_task

    async_task("catalog.tasks.reindex", run_id, task_name=f"reindex-run-{run_id}", group="reindex")


class _RunProgress:
    """services.Progress that writes stage and percentage to the run, at most twice a
    second, and passes every report on to `also` (a command's progress bar)."""

    def __init__(self, run_id: int, also: Progress | None = None) -> None:
        self.run_id, self.also, self._last = run_id, also, 0.0

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.also:
            self.also(stage, done, total)
        now = time.monotonic()
        if now - self._last < 0.5 and done < total:
            return
        self._last = now
        lo, hi = STAGES.get(stage, (0, 100))
        percent = lo + (hi - lo) * done // max(total, 1)
        IndexRun.objects.filter(pk=self.run_id).update(stage=stage, progress=percent)


def index_run_create(*, source: ReferenceSource, trigger: str, full: bool = False) -> IndexRun:
    """A run to execute in this process (commands), not queued for a worker."""
    return IndexRun.objects.create(catalog_id=source.catalog_id, source=source, trigger=trigger, full=full)


def index_run_execute(*, run_id: int, progress: Progress | None = None) -> IndexRun | None:
    """Execute a queued run (see the module docstring); idempotent."""
    run = IndexRun.objects.select_related("source__catalog").filter(pk=run_id).first()
    if run is None:
        return None
    with source_lock(run.source_id):
        _fail_stale_runs(run.source_id, keep=run_id)
        claimed = IndexRun.objects.filter(pk=run_id, status__in=ACTIVE).update(
            status=IndexRun.Status.RUNNING, started_at=timezone.now(), progress=0, error="")
        if not claimed:
            return IndexRun.objects.get(pk=run_id)
        try:
            report = source_index(source=run.source, full=run.full, progress=_RunProgress(run_id, progress))
        except Exception as exc:
            logger.exception("index run %s failed", run_id)
            IndexRun.objects.filter(pk=run_id).update(status=IndexRun.Status.FAILED, finished_at=timezone.now(),
                                                      error=f"{type(exc).__name__}: {exc}")
            raise
        IndexRun.objects.filter(pk=run_id).update(
            status=IndexRun.Status.SUCCEEDED, progress=100, stage="done", finished_at=timezone.now(),
            counts=report.counts, timings={k: round(v, 4) for k, v in report.timings.items()})
    return IndexRun.objects.get(pk=run_id)


def sources_scan(*, trigger: str = IndexRun.Trigger.SCHEDULE) -> list[IndexRun]:
    """Request a run for every source whose fingerprint moved (or that never indexed)."""
    runs = []
    for source in ReferenceSource.objects.select_related("catalog"):
        try:
            current = source_fingerprint(source=source)
        except (SourceError, OSError) as exc:  # reported on the source; the scan goes on
            logger.warning("scan: cannot fingerprint %s: %s", source, exc)
            ReferenceSource.objects.filter(pk=source.pk).update(status=ReferenceSource.Status.ERROR,
                                                                 last_error=f"{type(exc).__name__}: {exc}")
            continue
        if current != source.fingerprint or source.status == ReferenceSource.Status.NEW:
            run, created = index_run_request(source=source, trigger=trigger)
            if created:
                runs.append(run)
    return runs
