"""Evaluation runs: asked for by a curator (the dashboard or the API), done by the worker.

evaluation_request() checks the modes, records a queued run (its total: queries x
modes) and enqueues retrieval.tasks.evaluate once the transaction commits.

evaluation_execute() is what the worker does:
  1. take the run's advisory lock without waiting (another worker holds it: leave it)
  2. claim the run with a conditional update (queued, or running with nobody holding
     its lock: a worker that died), starting its progress again
  3. note what the gate keeps from a person (those sources are left out of every
     ranking) and how many judged documents search could return
  4. mode by mode, every query ranked as a signed-in person's search ranks it
     (retrieval.evaluation.ranking), progress written at each mode's start and at most
     twice a second within one
  5. one transaction: every query's scores, the modes' metrics, status succeeded
An exception on the way fails the run with its error and writes no metric and no
score: a run is shown done whole or not at all.

evaluations_recover() runs when a worker starts: a run left running by a dead worker
is failed as interrupted (start it again), and a queued run whose task is gone from the
queue is enqueued again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from approvals.selectors.gate import withheld_sources
from catalog.indexing.runs import pending_task_names
from catalog.models import Catalog, Document, ReferenceSource
from catalog.ranking import MODES
from retrieval.evaluation.beir import QueryScore, summarise
from retrieval.evaluation.beir import score_query as beir_score_query
from retrieval.evaluation.ranking import TOP_K, ModeUnavailable, rank_query
from retrieval.models import EvaluationQuery, EvaluationRun, EvaluationSet

logger = logging.getLogger(__name__)

LOCK_NAMESPACE = 0x4C45  # "LE": pg_advisory_lock(namespace, run id); catalog's runs use 0x4C43
TASK_NAME = "evaluation-run-{}"
ACTIVE = (EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING)
DEFAULT_MODES = ("bm25", "vector", "hybrid")


def modes_problem(modes: list[str]) -> str | None:
    """Why these modes cannot be run, or None."""
    if not modes:
        return "Choose at least one mode."
    unknown = [mode for mode in modes if mode not in MODES]
    if unknown:
        return f"Unknown mode{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; " \
               f"choose from {', '.join(MODES)}."
    if len(set(modes)) != len(modes):
        return "Name each mode once."
    return None


def evaluation_request(*, catalog: Catalog, query_set: EvaluationSet, modes: list[str], by: str) -> EvaluationRun:
    """A queued run of `modes` (in the order search lists them) over `query_set`;
    ValidationError({"modes": ...}) for modes that cannot be run, ({"query_set": ...})
    for a set of another catalog (its judgements name that catalog's documents, and
    running it here would show its name and questions to this catalog's curators)."""
    if problem := modes_problem(modes):
        raise ValidationError({"modes": [problem]})
    if query_set.catalog_id != catalog.pk:
        raise ValidationError({"query_set": [f"Test set {query_set.pk} was not uploaded for catalog {catalog.slug}."]})
    ordered = [mode for mode in MODES if mode in modes]
    with transaction.atomic():
        run = EvaluationRun.objects.create(catalog=catalog, query_set=query_set, modes=ordered, top_k=TOP_K,
                                           queries_total=query_set.query_count * len(ordered), created_by=by)
        transaction.on_commit(lambda: _enqueue(run.pk))
    return run


def _enqueue(run_id: int) -> None:
    from django_q.tasks import async_task

    async_task("retrieval.tasks.evaluate", run_id, task_name=TASK_NAME.format(run_id), group="evaluation")


# --- the lock -------------------------------------------------------------------------------


@contextmanager
def run_lock_if_free(run_id: int, namespace: int = LOCK_NAMESPACE) -> Iterator[bool]:
    """Hold the run's advisory lock if nobody does (True), else do nothing (False). A
    session lock: it dies with a killed worker's connection. `namespace`: the kind of
    run (tuning runs have their own)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [namespace, run_id])
        held = bool(cursor.fetchone()[0])
    try:
        yield held
    finally:
        if held:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [namespace, run_id])


# --- executing ------------------------------------------------------------------------------


class ThrottledProgress:
    """A run's progress (stage, done, total) passed on to `write`, which stores it: every
    change of stage at once (a reader waiting on a stage must see it), reports within a
    stage at most twice a second."""

    def __init__(self, write: Callable[[str, int, int], None]) -> None:
        self.write, self._last, self._stage = write, 0.0, ""

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if stage == self._stage and now - self._last < 0.5:
            return
        self._last, self._stage = now, stage
        self.write(stage, done, total)


def _progress_write(run_id: int, mode: str, done: int, total: int) -> None:
    """The mode being run, and how many of the run's searches (every mode's) are done."""
    EvaluationRun.objects.filter(pk=run_id).update(
        stage=mode, queries_done=done, progress=min(99, done * 100 // max(total, 1)))


def evaluation_execute(*, run_id: int) -> EvaluationRun | None:
    """Execute a run (see the module docstring); idempotent. A failure is recorded on the
    run, not raised: the run is the report."""
    with run_lock_if_free(run_id) as free:
        if not free:
            return EvaluationRun.objects.filter(pk=run_id).first()
        claimed = EvaluationRun.objects.filter(pk=run_id, status__in=ACTIVE).update(
            status=EvaluationRun.Status.RUNNING, started_at=timezone.now(), progress=0, queries_done=0, stage="",
            error="", metrics=[])
        run = EvaluationRun.objects.select_related("catalog", "query_set").filter(pk=run_id).first()
        if not claimed or run is None:
            return run
        try:
            _evaluate(run)
        except Exception as exc:  # recorded on the run (see _record_failure)
            _record_failure(run, exc)
    return EvaluationRun.objects.get(pk=run_id)


def _evaluate(run: EvaluationRun) -> None:
    catalog, query_set = run.catalog, run.query_set
    queries: dict[str, str] = query_set.queries
    qrels: dict[str, dict[str, int]] = query_set.qrels
    withheld = withheld_sources(agent=None, catalog_ids=[catalog.pk])
    judged, found = _judged_documents(catalog, qrels, withheld=set(withheld))
    EvaluationRun.objects.filter(pk=run.pk).update(
        withheld=sorted(ReferenceSource.objects.filter(pk__in=withheld).values_list("slug", flat=True)),
        judged_documents=judged, missing_documents=judged - found,
        ranking=catalog.ranking_settings.stored())  # what every search below ranks with: `catalog` is read once
    progress = ThrottledProgress(partial(_progress_write, run.pk))
    scores: dict[str, dict[str, dict[str, float]]] = {query_id: {} for query_id in queries}
    reports = []
    done = 0
    for mode in run.modes:
        progress(mode, done, run.queries_total)
        mode_scores: dict[str, QueryScore] = {}
        latencies = []
        for query_id, text in queries.items():
            ranked, took = rank_query(catalog=catalog, mode=mode, text=text, top_k=run.top_k)
            mode_scores[query_id] = beir_score_query(query_id, ranked, qrels[query_id])
            scores[query_id][mode] = {**mode_scores[query_id].as_dict(), "ms": round(took, 3)}
            latencies.append(took)
            done += 1
            progress(mode, done, run.queries_total)
        reports.append(summarise(mode, mode_scores, latencies).as_dict())
    _record_success(run, reports, {query_id: (queries[query_id], by_mode) for query_id, by_mode in scores.items()})


def _judged_documents(catalog: Catalog, qrels: dict[str, dict[str, int]], *, withheld: set[int]) -> tuple[int, int]:
    """(judged documents, of which search can return: a document of the catalog, by its
    path, in a source the gate does not keep from a person)."""
    wanted = {document for judged in qrels.values() for document in judged}
    found = Document.objects.filter(catalog=catalog, path__in=wanted).exclude(source_id__in=withheld) \
        .values("path").distinct().count()
    return len(wanted), found


def _record_success(run: EvaluationRun, reports: list[dict[str, Any]],
                    scores: dict[str, tuple[str, dict[str, dict[str, float]]]]) -> None:
    with transaction.atomic():
        EvaluationQuery.objects.bulk_create(
            [EvaluationQuery(run_id=run.pk, query_id=query_id, text=text, scores=by_mode)
             for query_id, (text, by_mode) in scores.items()], batch_size=1000)
        EvaluationRun.objects.filter(pk=run.pk).update(
            status=EvaluationRun.Status.SUCCEEDED, progress=100, stage="done", queries_done=run.queries_total,
            metrics=reports, finished_at=timezone.now())


def _record_failure(run: EvaluationRun, exc: Exception) -> None:
    """A mode that cannot run as asked is the curator's to know (one log line); anything
    else is a bug or the database, logged with its traceback. Called from the except block."""
    if isinstance(exc, ModeUnavailable):
        logger.warning("evaluation %s failed: %s", run.pk, exc)
        error = str(exc)
    else:
        logger.exception("evaluation %s failed", run.pk)
        error = f"{type(exc).__name__}: {exc}"
    EvaluationRun.objects.filter(pk=run.pk).update(status=EvaluationRun.Status.FAILED, finished_at=timezone.now(),
                                                   error=error, metrics=[])


# --- recovery -------------------------------------------------------------------------------


def evaluations_recover() -> list[int]:
    """Fail runs a dead worker left running; enqueue again queued runs whose task is
    gone. Returns the ids of the runs it touched."""
    touched = []
    for run_id in EvaluationRun.objects.filter(status=EvaluationRun.Status.RUNNING).values_list("pk", flat=True):
        with run_lock_if_free(run_id) as free:
            if free and EvaluationRun.objects.filter(pk=run_id, status=EvaluationRun.Status.RUNNING).update(
                    status=EvaluationRun.Status.FAILED, finished_at=timezone.now(),
                    error="interrupted: its worker stopped; start the evaluation again"):
                touched.append(run_id)
    queued = list(EvaluationRun.objects.filter(status=EvaluationRun.Status.QUEUED).values_list("pk", flat=True))
    pending = pending_task_names() if queued else None
    for run_id in queued:
        if pending is not None and TASK_NAME.format(run_id) not in pending:
            logger.warning("evaluation %s was queued without a task; enqueued again", run_id)
            _enqueue(run_id)
            touched.append(run_id)
    return touched

