"""Index runs: the one way a source's index is written.

Every writer (the worker's tasks, `manage.py index`, `import_jsonl`, `load_demo`, the
API's edits, the scheduled scan) goes through an IndexRun executed under the source's
advisory lock, so a source has one writer at a time.

index_run_execute() is what a worker (or a command, in its own process) does:
  1. take the source's advisory lock (a session lock: it dies with a killed worker),
     waiting while another worker holds it
  2. fail any other run still marked running (its worker died: we hold the lock it held)
     and claim this one with a conditional update; a run already finished is left alone
  3. run catalog.indexing.source_index, reporting stage and progress on the run
  4. record counts and timings, or the error; the source's rows are switched in one
     transaction by source_index, so a failure or a kill leaves the old generation

A request never hands back a running run: that run may have read the source before the
caller's edit. It gets the source's queued run, or a new one, which waits for the lock
and reads the source as it is then. An edit (or a new source) and the request for the
run that indexes it are one transaction (source_edit_queued, source_create_queued: the
API's edits and the dashboard's): both are stored or neither, and one that loses a
deadlock or a serialization failure to another writer is tried again.

Row locks are taken in one order, catalog -> source -> run: a run's switch locks the
catalog row (catalog.indexing.writes) and then updates the source row; a request locks
the source row alone (never the catalog's, which a join would lock too) and then inserts
or reads runs; deleting takes the catalog, then the sources (catalog.indexing.removal).

runs_recover() runs when a worker starts and at every scan: a run left running by a dead
worker is failed as interrupted and its source queued again (a full run again if the
interrupted one was full), and a queued run whose task is no longer in the queue is
enqueued again. A run that fails an interrupted full run itself becomes full.

sources_scan() also queues a run for every source with a document cut under other
chunking settings than its catalog's now (catalog.indexing.chunks.CurrentCut): a
change of chunk size, overlap, model or chunker is rebuilt even where no full run was
asked for, or where one was lost. A worker without a model (switched off, or failing to
load) rebuilds nothing for the model's sake; once it has one, it cuts again and embeds
what was cut lexically meanwhile.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, TypeVar

from django.db import OperationalError, connection, transaction
from django.utils import timezone

from catalog.embedder import get_embedder
from catalog.indexing.bulk import bulk_loads_recover, catalog_bulk_load
from catalog.indexing.chunks import current_cut
from catalog.indexing.source_index import source_index
from catalog.models import Catalog, Document, IndexRun, ReferenceSource
from catalog.progress import Progress
from catalog.sealing import SecretUnreadable
from catalog.sources.documents import DocumentInput, source_fingerprint
from catalog.sources.editing import upload_source_ensure, uploads_replace
from catalog.sources.errors import SourceError

logger = logging.getLogger(__name__)

LOCK_NAMESPACE = 0x4C43  # "LC": the first key of pg_advisory_lock(int, int)
ACTIVE = (IndexRun.Status.QUEUED, IndexRun.Status.RUNNING)
# Where each stage's progress lands on the run's 0-100 scale.
STAGES = {"collect": (0, 5), "chunk": (5, 15), "embed": (15, 90), "write": (90, 100)}
TASK_NAME = "reindex-run-{}"


# --- the source lock ------------------------------------------------------------------------


@contextmanager
def source_lock(source_id: int) -> Iterator[None]:
    """Hold the source's advisory lock, waiting for it. Re-entrant within a process's
    connection (Postgres counts a session's holds)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s, %s)", [LOCK_NAMESPACE, source_id])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, source_id])


@contextmanager
def source_lock_if_free(source_id: int) -> Iterator[bool]:
    """Hold the source's advisory lock if nobody does (True), else do nothing (False)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_NAMESPACE, source_id])
        held = cursor.fetchone()[0]
    try:
        yield held
    finally:
        if held:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, source_id])


def locked_source_ids() -> set[int]:
    """Sources whose advisory lock some session holds now (a writer is at work)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = %s "
                       "AND objsubid = 2 "
                       "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                       [LOCK_NAMESPACE])
        return {row[0] for row in cursor.fetchall()}


def _fail_stale_runs(source_id: int, *, keep: int | None = None) -> list[bool]:
    """Fail the source's runs marked running; each failed run's `full`, which the run
    taking over carries on. Call only while holding the source's lock, so none of them
    can have a live worker (a worker holds the lock for as long as it runs)."""
    stale = IndexRun.objects.filter(source_id=source_id, status=IndexRun.Status.RUNNING)
    if keep is not None:
        stale = stale.exclude(pk=keep)
    interrupted = list(stale.values_list("full", flat=True))
    stale.update(status=IndexRun.Status.FAILED, error="interrupted: its worker stopped", finished_at=timezone.now())
    if interrupted:
        ReferenceSource.objects.filter(pk=source_id, status=ReferenceSource.Status.INDEXING).update(
            status=ReferenceSource.Status.ERROR, last_error="indexing interrupted: its worker stopped")
    return interrupted


def _recover_source(source_id: int) -> list[bool]:
    """Fail the source's orphaned runs, if its lock is free; each failed run's `full`."""
    with source_lock_if_free(source_id) as free:
        return _fail_stale_runs(source_id) if free else []


# --- requesting and executing ---------------------------------------------------------------


def index_run_request(*, source: ReferenceSource, trigger: str, full: bool = False) -> tuple[IndexRun, bool]:
    """(run, created): the source's queued run, or a new queued run; never a running one
    (see the module docstring). The task is enqueued when the surrounding transaction
    commits."""
    with transaction.atomic():
        # The source row alone, and no key: inserts referencing it (runs, files) go on,
        # and a switch holding the catalog row while it waits for this one cannot be
        # waited for in turn (see the module docstring's lock order).
        ReferenceSource.objects.select_for_update(no_key=True, of=("self",)).filter(pk=source.pk).first()
        if IndexRun.objects.filter(source=source, status=IndexRun.Status.RUNNING).exists():
            # Its worker may be dead: then nobody would finish it, so this run takes over.
            full = any(_recover_source(source.pk)) or full
        queued = IndexRun.objects.filter(source=source, status=IndexRun.Status.QUEUED).order_by("pk").first()
        if queued is not None and (queued.full or not full):
            return queued, False
        run = IndexRun.objects.create(catalog_id=source.catalog_id, source=source, trigger=trigger, full=full)
        transaction.on_commit(lambda: _enqueue(run.pk))
    return run, True


Edited = TypeVar("Edited")
EDIT_ATTEMPTS = 3
_LOST_TO_ANOTHER_WRITER = {"40P01", "40001"}  # deadlock_detected, serialization_failure


class EditConflict(Exception):
    """An edit that lost to concurrent writers every time it was tried; nothing of it
    was stored, so the caller may simply try again."""


def source_edit_queued(*, source: ReferenceSource, trigger: str, edit: Callable[[], Edited],
                       reindex: Callable[[Edited], bool] = bool) -> tuple[Edited, IndexRun | None]:
    """`edit()` (a catalog.sources service changing `source`) and the run that indexes
    it, in one transaction: the edit is never stored with an error answered. An edit
    whose result `reindex` refuses (by default a falsy one: it changed nothing) requests
    no run. Losing a deadlock or a serialization failure rolls both back; the edit is
    tried EDIT_ATTEMPTS times in all, then EditConflict."""
    return _edit_and_request(name=source.slug, trigger=trigger, edit=edit,
                             indexed=lambda result: source if reindex(result) else None)


def source_create_queued(*, slug: str, trigger: str,
                         create: Callable[[], ReferenceSource]) -> tuple[ReferenceSource, IndexRun]:
    """`create()` (catalog.sources.lifecycle.source_create making source `slug`) and the
    run that indexes the new source, in one transaction, tried again as
    source_edit_queued's edits are."""
    created, run = _edit_and_request(name=slug, trigger=trigger, edit=create, indexed=lambda source: source)
    assert run is not None  # `indexed` names the new source
    return created, run


def _edit_and_request(*, name: str, trigger: str, edit: Callable[[], Edited],
                      indexed: Callable[[Edited], ReferenceSource | None]) -> tuple[Edited, IndexRun | None]:
    """`edit()` and a run of the source `indexed(result)` names (None: no run), in one
    transaction, tried EDIT_ATTEMPTS times while it loses to other writers."""
    for attempt in range(1, EDIT_ATTEMPTS + 1):
        try:
            with transaction.atomic():
                result = edit()
                source = indexed(result)
                run = index_run_request(source=source, trigger=trigger)[0] if source is not None else None
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) not in _LOST_TO_ANOTHER_WRITER:
                raise
            logger.warning("edit of source %r, attempt %d of %d, lost to another writer: %s", name, attempt,
                           EDIT_ATTEMPTS, exc)
            # The winner needs a moment to take what it waited for; retrying at once
            # can walk into the same cycle again.
            time.sleep(random.uniform(0.05, 0.2) * attempt)
            continue
        return result, run
    raise EditConflict(f"source {name!r} is being changed by others at the same time: nothing was changed; "
                       "try again")


def _enqueue(run_id: int) -> None:
    from django_q.tasks import async_task

    async_task("catalog.tasks.reindex", run_id, task_name=TASK_NAME.format(run_id), group="reindex")


class _RunProgress:
    """A Progress that writes stage, percentage and how far the stage got (`counts`:
    {"stage_done", "stage_total"}, e.g. chunks embedded of those to embed, until the
    run's totals replace them when it succeeds) to the run: every change of stage at
    once (a reader waiting on a stage must see it), progress within a stage at most
    twice a second; every report also goes to `also` (a command's progress bar)."""

    def __init__(self, run_id: int, also: Progress | None = None) -> None:
        self.run_id, self.also, self._last, self._stage = run_id, also, 0.0, ""

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.also:
            self.also(stage, done, total)
        now = time.monotonic()
        if stage == self._stage and now - self._last < 0.5 and done < total:
            return
        self._last, self._stage = now, stage
        lo, hi = STAGES.get(stage, (0, 100))
        percent = lo + (hi - lo) * done // max(total, 1)
        IndexRun.objects.filter(pk=self.run_id).update(stage=stage, progress=percent,
                                                       counts={"stage_done": done, "stage_total": total})


def index_run_create(*, source: ReferenceSource, trigger: str, full: bool = False) -> IndexRun:
    """A run to execute in this process (commands), not queued for a worker."""
    return IndexRun.objects.create(catalog_id=source.catalog_id, source=source, trigger=trigger, full=full)


def index_run_execute(*, run_id: int, progress: Progress | None = None) -> IndexRun | None:
    """Execute a run (see the module docstring); idempotent. A failure is recorded on the
    run (and logged: see _record_failure), not raised: the run is the report."""
    run = IndexRun.objects.select_related("source__catalog").filter(pk=run_id).first()
    if run is None:
        return None
    with source_lock(run.source_id):
        full = any(_fail_stale_runs(run.source_id, keep=run_id)) or run.full
        claimed = IndexRun.objects.filter(pk=run_id, status__in=ACTIVE).update(
            status=IndexRun.Status.RUNNING, started_at=timezone.now(), progress=0, error="", counts={}, full=full,
            skipped=[])
        if not claimed:
            return IndexRun.objects.get(pk=run_id)
        try:
            report = source_index(source=run.source, full=full, progress=_RunProgress(run_id, progress))
        except Exception as exc:  # recorded on the run (see _record_failure)
            _record_failure(run, exc)
        else:
            IndexRun.objects.filter(pk=run_id).update(
                status=IndexRun.Status.SUCCEEDED, progress=100, stage="done", finished_at=timezone.now(),
                counts=report.counts, timings={k: round(v, 4) for k, v in report.timings.items()},
                skipped=[[path, why] for path, why in report.skipped])
    return IndexRun.objects.get(pk=run_id)


def _record_failure(run: IndexRun, exc: Exception) -> None:
    """A source that cannot be read as configured is the curator's to fix (one log line);
    anything else is a bug or the database, logged with its traceback. Called from the
    except block."""
    if isinstance(exc, SourceError):
        logger.warning("index run %s of %s failed: %s", run.pk, run.source, exc)
    else:
        logger.exception("index run %s of %s failed", run.pk, run.source)
    IndexRun.objects.filter(pk=run.pk).update(status=IndexRun.Status.FAILED, finished_at=timezone.now(),
                                              error=f"{type(exc).__name__}: {exc}")


def source_index_now(*, source: ReferenceSource, trigger: str, full: bool = False,
                     progress: Progress | None = None) -> IndexRun:
    """Create a run and execute it in this process (commands, the demo loader)."""
    run = index_run_create(source=source, trigger=trigger, full=full)
    executed = index_run_execute(run_id=run.pk, progress=progress)
    if executed is None:  # the run went with its source, deleted meanwhile
        raise SourceError(f"source {source.slug!r} was deleted before its run started")
    return executed


# An import of at least this many documents into a catalog that holds no chunks builds
# the catalog's HNSW index and postings key once, in its write, after the rows
# (catalog.indexing.bulk).
BULK_IMPORT_DOCUMENTS = 1_000


def source_import(*, catalog: Catalog, slug: str, documents: list[DocumentInput], trigger: str,
                  progress: Progress | None = None) -> IndexRun:
    """Make `documents` the whole content of upload source `slug` (created if missing)
    and index what changed, holding the source's lock from the first write to the
    switch: a worker's scan sees the source busy and leaves it alone. A large import
    into an empty catalog is a bulk load (BULK_IMPORT_DOCUMENTS)."""
    source = upload_source_ensure(catalog=catalog, slug=slug)
    bulk = len(documents) >= BULK_IMPORT_DOCUMENTS
    with source_lock(source.pk), catalog_bulk_load(catalog, across_writes=False) if bulk else nullcontext():
        uploads_replace(source=source, documents=documents)
        return source_index_now(source=source, trigger=trigger, progress=progress)


# --- recovery and the scan ------------------------------------------------------------------


def pending_task_names() -> set[str] | None:
    """Names of the tasks waiting in the broker's queue: the ORM broker's rows (waiting,
    or taken and not yet done), or Redis's list (waiting only: a task a cluster has
    taken is gone from it, so a run whose task a live cluster holds is enqueued again,
    and the second task finds the run claimed or done: index_run_execute is
    idempotent). None with another broker, whose queue this cannot read."""
    from django_q.brokers import get_broker
    from django_q.conf import Conf
    from django_q.models import OrmQ
    from django_q.signing import SignedPackage

    if Conf.ORM:
        return {q.name() for q in OrmQ.objects.all()}
    if Conf.REDIS:
        broker = get_broker()
        tasks: list[dict[str, Any]] = [SignedPackage.loads(payload)
                                       for payload in broker.connection.lrange(broker.list_key, 0, -1)]
        return {task["name"] for task in tasks}
    return None


def runs_recover() -> list[IndexRun]:
    """Fail runs a dead worker left running and queue their sources again; enqueue again
    queued runs whose task is gone; build the indexes a killed bulk load left missing.
    Returns the runs queued or enqueued."""
    for catalog_id in bulk_loads_recover():
        logger.warning("catalog %s: its indexes were missing (a bulk load killed before its end): built them",
                       catalog_id)
    recovered = []
    for source_id in set(IndexRun.objects.filter(status=IndexRun.Status.RUNNING).values_list("source_id", flat=True)):
        if interrupted := _recover_source(source_id):
            source = ReferenceSource.objects.get(pk=source_id)
            logger.warning("recovered %s: its run was interrupted; queued again", source)
            recovered.append(index_run_request(source=source, trigger=IndexRun.Trigger.RECOVERY,
                                               full=any(interrupted))[0])
    queued = IndexRun.objects.filter(status=IndexRun.Status.QUEUED).exclude(pk__in=[r.pk for r in recovered])
    pending = pending_task_names() if queued.exists() else None
    if pending is not None:
        for run in queued:
            if TASK_NAME.format(run.pk) not in pending:
                logger.warning("run %s was queued without a task; enqueued again", run.pk)
                _enqueue(run.pk)
                recovered.append(run)
    return recovered


def sources_cut_otherwise() -> set[int]:
    """Sources with a document a run would cut again (catalog.indexing.chunks.CurrentCut):
    a size, overlap or chunker since changed; with a model loaded, also a model since
    changed, or chunks cut lexically while it was down (so they get their vectors)."""
    embedder = get_embedder()
    found: set[int] = set()
    for catalog in Catalog.objects.all():
        found.update(Document.objects.filter(catalog=catalog).exclude(current_cut(catalog, embedder).held())
                     .order_by().values_list("source_id", flat=True).distinct())
    return found


SCAN_FAILED = "scan: "  # how a source's last_error begins when the scan could not fingerprint it


def sources_scan(*, trigger: str = IndexRun.Trigger.SCHEDULE) -> list[IndexRun]:
    """Recover orphaned runs, then request a run for every source whose fingerprint
    moved (or that never indexed) or whose documents were cut otherwise than its catalog
    now says, skipping sources a writer holds or a run waits for."""
    runs_recover()
    busy = locked_source_ids() | set(
        IndexRun.objects.filter(status__in=ACTIVE).values_list("source_id", flat=True))
    cut_otherwise = sources_cut_otherwise()
    runs = []
    for source in ReferenceSource.objects.select_related("catalog").exclude(pk__in=busy):
        try:
            current = source_fingerprint(source=source)
        except (SourceError, OSError, SecretUnreadable) as exc:  # reported on the source; the scan goes on
            logger.warning("scan: cannot fingerprint %s: %s", source, exc)
            ReferenceSource.objects.filter(pk=source.pk).update(status=ReferenceSource.Status.ERROR,
                                                                 last_error=f"{SCAN_FAILED}{type(exc).__name__}: {exc}")
            continue
        # A source the scan itself marked failed (a remote that did not answer) gets a run
        # once it answers again, whose outcome replaces the scan's error.
        scan_failed = source.status == ReferenceSource.Status.ERROR and source.last_error.startswith(SCAN_FAILED)
        if (current != source.fingerprint or source.status == ReferenceSource.Status.NEW
                or source.pk in cut_otherwise or scan_failed):
            run, created = index_run_request(source=source, trigger=trigger)
            if created:
                runs.append(run)
    return runs
