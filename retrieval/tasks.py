"""django-q2 tasks: thin wrappers over retrieval.enrichment.traces."""

from __future__ import annotations

from django.conf import settings

from retrieval.enrichment.traces import trace_retention_cutoff, traces_purge

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
