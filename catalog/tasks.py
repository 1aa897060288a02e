"""django-q2 tasks: thin wrappers over catalog.reindex."""

from __future__ import annotations

from django.conf import settings

from catalog.reindex import index_run_execute, sources_scan

SCAN_SCHEDULE = "lectern-scan-sources"


def reindex(run_id: int) -> str:
    run = index_run_execute(run_id=run_id)
    return "missing" if run is None else run.status


def scan() -> int:
    return len(sources_scan())


def ensure_scan_schedule(**kwargs) -> None:
    """post_migrate: keep the scan schedule's interval equal to the setting."""
    from django_q.models import Schedule

    Schedule.objects.update_or_create(name=SCAN_SCHEDULE, defaults={
        "func": "catalog.tasks.scan", "schedule_type": Schedule.MINUTES,
        "minutes": settings.LECTERN_SCAN_MINUTES, "repeats": -1,
    })
