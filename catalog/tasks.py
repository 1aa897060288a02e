"""django-q2 tasks: thin wrappers over catalog.indexing.runs."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import DatabaseError

from catalog.indexing.runs import index_run_execute, runs_recover, sources_scan

logger = logging.getLogger(__name__)

SCAN_SCHEDULE = "lectern-scan-sources"


def reindex(run_id: int) -> str:
    run = index_run_execute(run_id=run_id)
    return "missing" if run is None else run.status


def scan() -> int:
    return len(sources_scan())


def recover_on_worker_start(**kwargs: object) -> None:
    """django-q2's post_spawn (each worker process as it starts): take over at once
    what a killed worker left, rather than at the next scan. A synchronous queue (the
    tests') runs each task in the caller and has no workers to recover."""
    from django_q.conf import Conf

    if Conf.SYNC:
        return
    try:
        recovered = runs_recover()
    except DatabaseError:  # the database is away: the next scan recovers instead
        logger.exception("worker start: could not recover index runs")
        return
    if recovered:
        logger.warning("worker start: %d index runs queued again", len(recovered))


def ensure_scan_schedule(**kwargs: object) -> None:
    """post_migrate: keep the scan schedule's interval equal to the setting."""
    from django_q.models import Schedule

    Schedule.objects.update_or_create(name=SCAN_SCHEDULE, defaults={
        "func": "catalog.tasks.scan", "schedule_type": Schedule.MINUTES,
        "minutes": settings.LECTERN_SCAN_MINUTES, "repeats": -1,
    })
