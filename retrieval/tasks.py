"""django-q2 tasks: thin wrappers over retrieval.traces.services and
retrieval.evaluation.runs and tuning_runs."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import DatabaseError

from retrieval.evaluation.runs import evaluation_execute, evaluations_recover
from retrieval.evaluation.tuning_runs import tuning_execute, tunings_recover
from retrieval.traces.services import trace_retention_cutoff, traces_purge

logger = logging.getLogger(__name__)

PURGE_SCHEDULE = "lectern-purge-traces"


def purge_traces() -> int:
    before = trace_retention_cutoff()
    return 0 if before is None else traces_purge(before=before)


def ensure_purge_schedule(**kwargs: object) -> None:
    """post_migrate: an hourly purge while a retention is set, none while traces are kept
    forever (the task reads the setting again when it runs)."""
    from django_q.models import Schedule

    if settings.LECTERN_TRACE_RETENTION_DAYS == 0:
        Schedule.objects.filter(name=PURGE_SCHEDULE).delete()
        return
    Schedule.objects.update_or_create(name=PURGE_SCHEDULE, defaults={
        "func": "retrieval.tasks.purge_traces", "schedule_type": Schedule.HOURLY, "repeats": -1,
    })


def evaluate(run_id: int) -> str:
    run = evaluation_execute(run_id=run_id)
    return "missing" if run is None else run.status


def tune(run_id: int) -> str:
    run = tuning_execute(run_id=run_id)
    return "missing" if run is None else run.status


def recover_evaluations_on_worker_start(**kwargs: object) -> None:
    """django-q2's post_spawn: fail the evaluations a killed worker left running and
    enqueue again those queued without a task (as catalog.tasks does for index runs)."""
    from django_q.conf import Conf

    if Conf.SYNC:
        return
    try:
        touched = evaluations_recover() + tunings_recover()
    except DatabaseError:  # the database is away: the next worker start looks again
        logger.exception("worker start: could not recover evaluation runs")
        return
    if touched:
        logger.warning("worker start: %d evaluation and tuning runs failed as interrupted or enqueued again",
                       len(touched))
