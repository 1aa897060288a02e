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
from functools import partial

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from catalog.audit.log import Action, Actor, AuditEvent, audit_append
from catalog.catalogs import CatalogSettings, catalog_ranking_update, catalog_update
from catalog.errors import ConflictError
from catalog.indexing.runs import index_run_request, pending_task_names
from catalog.models import Agent, Catalog, IndexRun
from catalog.ranking import RankingSettings
from retrieval.evaluation.runs import ThrottledProgress, run_lock_if_free
from retrieval.evaluation.shadows import shadow_drop, shadow_execute
from retrieval.evaluation.tuning import FOLDS, ranking_tune
from retrieval.models import EvaluationSet, TuningRun

logger = logging.getLogger(__name__)

LOCK_NAMESPACE = 0x4C54  # "LT": pg_advisory_lock(namespace, run id); evaluation runs use 0x4C45
TASK_NAME = "tuning-run-{}"
# The most judged queries a run tunes on: the grid costs about 1.7 s a query on two
# cores, and a worker's task is stopped after an hour (Q_TIMEOUT).
MAX_QUERIES = 1000
ACTIVE = (TuningRun.Status.QUEUED, TuningRun.Status.RUNNING)


def chunking_problems(catalog: Catalog, chunking: dict[str, int]) -> dict[str, list[str]]:
    """Why a proposed chunk size and overlap cannot be tried, by field ({}: it can)."""
    size, overlap = chunking.get("chunk_size"), chunking.get("chunk_overlap")
    problems: dict[str, list[str]] = {}
    if not isinstance(size, int) or isinstance(size, bool) or not 100 <= size <= 20_000:
        problems["chunk_size"] = ["A whole number of characters from 100 to 20000."]
    if not isinstance(overlap, int) or isinstance(overlap, bool) or not 0 <= overlap <= 10_000:
        problems["chunk_overlap"] = ["A whole number of characters from 0 to 10000."]
    elif isinstance(size, int) and overlap >= size:
        problems["chunk_overlap"] = ["Overlap must be smaller than the chunk size."]
    if not problems and (size, overlap) == (catalog.chunk_size, catalog.chunk_overlap):
        problems["chunk_size"] = [f"{catalog.slug} is cut {size}/{overlap} already: propose another chunking."]
    return problems


def tuning_request(*, catalog: Catalog, query_set: EvaluationSet, by: str, folds: int = FOLDS,
                   chunking: dict[str, int] | None = None) -> TuningRun:
    """A queued tuning run: of the ranking settings, or with `chunking` ({chunk_size,
    chunk_overlap}) of that chunking on a shadow catalog. ValidationError({"query_set":
    ...}) for a set of another catalog or one with fewer queries than folds, ({"folds":
    ...}) out of 2 to 10, ({"chunk_size" / "chunk_overlap": ...}) for a chunking that
    cannot be tried."""
    if chunking is not None and (problems := chunking_problems(catalog, chunking)):
        raise ValidationError(problems)
    if query_set.catalog_id != catalog.pk:
        raise ValidationError({"query_set": [f"Test set {query_set.pk} was not uploaded for catalog {catalog.slug}."]})
    if not 2 <= folds <= 10:
        raise ValidationError({"folds": ["Choose 2 to 10 folds."]})
    if query_set.query_count > MAX_QUERIES:
        raise ValidationError({"query_set": [f"Test set {query_set.pk} has {query_set.query_count} judged queries: a "
                                             f"tuning run takes at most {MAX_QUERIES} (upload a sample of them)."]})
    if chunking is None and query_set.query_count < folds:  # a chunking run compares on every query
        raise ValidationError({"query_set": [f"Test set {query_set.pk} has {query_set.query_count} judged queries: "
                                             f"{folds} folds need at least {folds}."]})
    with transaction.atomic():
        Catalog.objects.select_for_update(no_key=True).filter(pk=catalog.pk).first()  # one request at a time
        active = TuningRun.objects.filter(catalog=catalog, status__in=ACTIVE).values_list("pk", flat=True).first()
        if active is not None:
            raise ValidationError({"query_set": [f"Tuning run {active} of {catalog.slug} is not done yet: wait for "
                                                 "it (runs of one catalog go one at a time)."]})
        kind = TuningRun.Kind.SETTINGS if chunking is None else TuningRun.Kind.CHUNKING
        run = TuningRun.objects.create(catalog=catalog, query_set=query_set, folds=folds, created_by=by, kind=kind,
                                       proposal=chunking or {})
        transaction.on_commit(lambda: _enqueue(run.pk))
    return run


def _enqueue(run_id: int) -> None:
    from django_q.tasks import async_task

    async_task("retrieval.tasks.tune", run_id, task_name=TASK_NAME.format(run_id), group="tuning")


# A stage's part of the progress, from and to: the grid is most of a run's time, the
# held-out searches the rest.
STAGE_SHARES = {"grid": (0, 80), "held out": (80, 99)}


def _progress_write(run_id: int, stage: str, done: int, total: int) -> None:
    """The stage and the run's share done."""
    low, high = STAGE_SHARES.get(stage, (0, 99))
    TuningRun.objects.filter(pk=run_id).update(stage=stage, progress=low + (high - low) * done // max(total, 1))


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
        progress = ThrottledProgress(partial(_progress_write, run.pk))
        try:
            if run.kind == TuningRun.Kind.CHUNKING:
                stored = shadow_execute(run=run, progress=progress)
                current, chosen = stored["current"], stored["proposal"]
            else:
                stored = ranking_tune(catalog=run.catalog, queries=run.query_set.queries, qrels=run.query_set.qrels,
                                      progress=progress, folds=run.folds).as_dict()
                current, chosen = stored["current"], stored["chosen"]
        except Exception as exc:  # recorded on the run
            logger.exception("tuning %s failed", run.pk)
            TuningRun.objects.filter(pk=run.pk).update(status=TuningRun.Status.FAILED, finished_at=timezone.now(),
                                                       error=f"{type(exc).__name__}: {exc}")
        else:
            TuningRun.objects.filter(pk=run.pk).update(
                status=TuningRun.Status.SUCCEEDED, progress=100, stage="done", current=current,
                chosen=chosen, report=stored, finished_at=timezone.now())
    return TuningRun.objects.get(pk=run_id)


def apply_problem(run: TuningRun) -> str | None:
    """Why `run`'s choice may not be applied, or None."""
    if run.status != TuningRun.Status.SUCCEEDED:
        return f"Tuning run {run.pk} has not succeeded (it is {run.status})."
    if run.applied_at is not None:
        return f"Tuning run {run.pk} was applied already ({run.applied_at:%Y-%m-%d %H:%M} UTC, by {run.applied_by})."
    gain = run.gain
    if run.kind == TuningRun.Kind.CHUNKING and (gain is None or gain <= 0):
        return "Its shadow did no better than the live catalog (nDCG@10 gain not positive): it was dropped."
    if gain is None or gain <= 0:
        return (f"Its held-out nDCG@10 gain is {gain:+.4f}: not positive, so the chosen settings did no better than "
                "the current ones on queries they were not chosen on." if gain is not None
                else "It has no held-out gain.")
    if run.kind == TuningRun.Kind.CHUNKING:
        if run.shadow_id is None:
            return "Its shadow was dropped: run it again."
        if (run.catalog.chunk_size, run.catalog.chunk_overlap) != (run.current["chunk_size"],
                                                                   run.current["chunk_overlap"]):
            return "The catalog's chunking changed since this run compared with it. Run it again."
        return None
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
        if locked.kind == TuningRun.Kind.CHUNKING:
            changed = _chunking_apply(locked, by)
        else:
            changed = catalog_ranking_update(catalog=locked.catalog, values=locked.chosen, by=by,
                                             tuning_run=locked.pk)
        name = by.get_username() if isinstance(by, AbstractBaseUser) else getattr(by, "name", "system")
        TuningRun.objects.filter(pk=locked.pk).update(applied_at=timezone.now(), applied_by=name)
    if run.kind == TuningRun.Kind.CHUNKING:
        shadow_drop(run=run)  # its vectors stay in the embedding cache for the live re-cut
    run.refresh_from_db()
    return changed


def _chunking_apply(run: TuningRun, by: AbstractBaseUser | AnonymousUser | Agent | None) -> dict[str, list[object]]:
    """The run's chunking set on the live catalog, audited, and a full run of each of
    its sources requested (each re-cuts and switches atomically)."""
    catalog = run.catalog
    changed = {name: [getattr(catalog, name), run.chosen[name]] for name in ("chunk_size", "chunk_overlap")
               if getattr(catalog, name) != run.chosen[name]}
    catalog_update(catalog=catalog, settings=CatalogSettings(
        name=catalog.name, description=catalog.description, chunk_size=run.chosen["chunk_size"],
        chunk_overlap=run.chosen["chunk_overlap"]))
    audit_append(AuditEvent(Action.CHUNKING_CHANGED, Actor.of(by), payload={
        "catalog": catalog.slug, "changed": changed, "tuning_run": run.pk}))
    for source in catalog.sources.all():
        index_run_request(source=source, trigger=IndexRun.Trigger.UI, full=True)
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
                shadow_drop(run=TuningRun(pk=run_id))  # a chunking run's half-built shadow
    queued = list(TuningRun.objects.filter(status=TuningRun.Status.QUEUED).values_list("pk", flat=True))
    pending = pending_task_names() if queued else None
    for run_id in queued:
        if pending is not None and TASK_NAME.format(run_id) not in pending:
            _enqueue(run_id)
            touched.append(run_id)
    return touched
