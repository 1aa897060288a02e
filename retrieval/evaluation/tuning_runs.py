"""Tuning runs: asked for by a curator, done by the worker, applied by a curator.

tuning_request() records a queued run of a catalog's test set and enqueues
retrieval.tasks.tune once the transaction commits. tuning_execute() is the worker's:
the run's advisory lock without waiting, a conditional claim, then
retrieval.evaluation.tuning.ranking_tune with its progress written at most twice a
second, and the report stored with status succeeded in one update (or failed with the
error, and no report: a run is shown done whole or not at all).

tuning_apply() sets the chosen settings on the catalog (catalog_ranking_update:
audited, naming the run), refused unless the run succeeded, its held-out nDCG@10 gain
is positive, and the catalog's settings are still those it tuned from.

tunings_recover() runs when a worker starts, as evaluations_recover does.
"""

from __future__ import annotations

import logging
import time

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from catalog.catalogs import catalog_ranking_update
from catalog.errors import ConflictError
from catalog.indexing.runs import pending_task_names
from catalog.models import Agent, Catalog
from catalog.ranking import RankingSettings
from retrieval.evaluation.runs import run_lock_if_free
from retrieval.evaluation.tuning import FOLDS, ranking_tune
from retrieval.models import EvaluationSet, TuningRun

logger = logging.getLogger(__name__)

LOCK_NAMESPACE = 0x4C54  # "LT": pg_advisory_lock(namespace, run id); evaluation runs use 0x4C45
TASK_NAME = "tuning-run-{}"
# The most judged queries a run tunes on: the grid costs about 1.7 s a query on two
# cores, and a worker's task is stopped after an hour (Q_TIMEOUT).
MAX_QUERIES = 1000
ACTIVE = (TuningRun.Status.QUEUED, TuningRun.Status.RUNNING)


def tuning_request(*, catalog: Catalog, query_set: EvaluationSet, by: str, folds: int = FOLDS) -> TuningRun:
    """A queued tuning run; ValidationError({"query_set": ...}) for a set of another
    catalog or one with fewer queries than folds, ({"folds": ...}) out of 2 to 10."""
    if query_set.catalog_id != catalog.pk:
        raise ValidationError({"query_set": [f"Test set {query_set.pk} was not uploaded for catalog {catalog.slug}."]})
    if not 2 <= folds <= 10:
        raise ValidationError({"folds": ["Choose 2 to 10 folds."]})
    if query_set.query_count > MAX_QUERIES:
        raise ValidationError({"query_set": [f"Test set {query_set.pk} has {query_set.query_count} judged queries: a "
                                             f"tuning run takes at most {MAX_QUERIES} (upload a sample of them)."]})
    if query_set.query_count < folds:
        raise ValidationError({"query_set": [f"Test set {query_set.pk} has {query_set.query_count} judged queries: "
                                             f"{folds} folds need at least {folds}."]})
    with transaction.atomic():
        Catalog.objects.select_for_update(no_key=True).filter(pk=catalog.pk).first()  # one request at a time
        active = TuningRun.objects.filter(catalog=catalog, status__in=ACTIVE).values_list("pk", flat=True).first()
        if active is not None:
            raise ValidationError({"query_set": [f"Tuning run {active} of {catalog.slug} is not done yet: wait for "
                                                 "it (runs of one catalog go one at a time)."]})
        run = TuningRun.objects.create(catalog=catalog, query_set=query_set, folds=folds, created_by=by)
        transaction.on_commit(lambda: _enqueue(run.pk))
    return run


def _enqueue(run_id: int) -> None:
    from django_q.tasks import async_task

    async_task("retrieval.tasks.tune", run_id, task_name=TASK_NAME.format(run_id), group="tuning")


class _Progress:
    """Writes the stage and the share done: every change of stage at once, within one
    at most twice a second. The grid is most of a run's time; the held-out searches the
    rest."""

    SHARES = {"grid": (0, 80), "held out": (80, 99)}

    def __init__(self, run_id: int) -> None:
        self.run_id, self._last, self._stage = run_id, 0.0, ""

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if stage == self._stage and now - self._last < 0.5:
            return
        self._last, self._stage = now, stage
        low, high = self.SHARES.get(stage, (0, 99))
        TuningRun.objects.filter(pk=self.run_id).update(
            stage=stage, progress=low + (high - low) * done // max(total, 1))


def tuning_execute(*, run_id: int) -> TuningRun | None:
    """Execute a run; idempotent. A failure is recorded on the run, not raised."""
    with run_lock_if_free(run_id, LOCK_NAMESPACE) as free:
        if not free:
            return TuningRun.objects.filter(pk=run_id).first()
        claimed = TuningRun.objects.filter(pk=run_id, status__in=ACTIVE).update(
            status=TuningRun.Status.RUNNING, started_at=timezone.now(), progress=0, stage="", error="", report={})
        run = TuningRun.objects.select_related("catalog", "query_set").filter(pk=run_id).first()
        if not claimed or run is None:
            return run
        try:
            report = ranking_tune(catalog=run.catalog, queries=run.query_set.queries, qrels=run.query_set.qrels,
                                  progress=_Progress(run.pk), folds=run.folds)
        except Exception as exc:  # recorded on the run
            logger.exception("tuning %s failed", run.pk)
            TuningRun.objects.filter(pk=run.pk).update(status=TuningRun.Status.FAILED, finished_at=timezone.now(),
                                                       error=f"{type(exc).__name__}: {exc}")
        else:
            stored = report.as_dict()
            TuningRun.objects.filter(pk=run.pk).update(
                status=TuningRun.Status.SUCCEEDED, progress=100, stage="done", current=stored["current"],
                chosen=stored["chosen"], report=stored, finished_at=timezone.now())
    return TuningRun.objects.get(pk=run_id)


def apply_problem(run: TuningRun) -> str | None:
    """Why `run`'s choice may not be applied, or None."""
    if run.status != TuningRun.Status.SUCCEEDED:
        return f"Tuning run {run.pk} has not succeeded (it is {run.status})."
    if run.applied_at is not None:
        return f"Tuning run {run.pk} was applied already ({run.applied_at:%Y-%m-%d %H:%M} UTC, by {run.applied_by})."
    gain = run.gain
    if gain is None or gain <= 0:
        return (f"Its held-out nDCG@10 gain is {gain:+.4f}: not positive, so the chosen settings did no better than "
                "the current ones on queries they were not chosen on." if gain is not None
                else "It has no held-out gain.")
    if RankingSettings.from_stored(run.chosen) == RankingSettings.from_stored(run.current):
        return "Its choice is the current settings: there is nothing to apply."
    if RankingSettings.from_stored(run.current) != run.catalog.ranking_settings:
        return ("The catalog's ranking settings changed since this run tuned from them: its gain was measured "
                "against settings no longer in use. Run it again.")
    return None


def tuning_apply(*, run: TuningRun, by: AbstractBaseUser | AnonymousUser | Agent | None) -> dict[str, list[object]]:
    """Set `run`'s chosen settings on its catalog, audited with the run's id; the
    settings that changed. ConflictError (409) with the reason when apply_problem finds
    one; nothing changes then."""
    with transaction.atomic():
        locked = TuningRun.objects.select_for_update().select_related("catalog").get(pk=run.pk)
        if problem := apply_problem(locked):
            raise ConflictError(problem, code="tuning_not_applicable")
        changed = catalog_ranking_update(catalog=locked.catalog, values=locked.chosen, by=by, tuning_run=locked.pk)
        name = by.get_username() if isinstance(by, AbstractBaseUser) else getattr(by, "name", "system")
        TuningRun.objects.filter(pk=locked.pk).update(applied_at=timezone.now(), applied_by=name)
    run.refresh_from_db()
    return changed


def tunings_recover() -> list[int]:
    """Fail runs a dead worker left running; enqueue again queued runs whose task is gone."""
    touched = []
    for run_id in TuningRun.objects.filter(status=TuningRun.Status.RUNNING).values_list("pk", flat=True):
        with run_lock_if_free(run_id, LOCK_NAMESPACE) as free:
            if free and TuningRun.objects.filter(pk=run_id, status=TuningRun.Status.RUNNING).update(
                    status=TuningRun.Status.FAILED, finished_at=timezone.now(),
                    error="interrupted: its worker stopped; start the tuning again"):
                touched.append(run_id)
    queued = list(TuningRun.objects.filter(status=TuningRun.Status.QUEUED).values_list("pk", flat=True))
    pending = pending_task_names() if queued else None
    for run_id in queued:
        if pending is not None and TASK_NAME.format(run_id) not in pending:
            _enqueue(run_id)
            touched.append(run_id)
    return touched
