"""django-q2 tasks: thin wrappers over approvals' services."""

from __future__ import annotations

from approvals.services.expiry import approvals_expire
from approvals.services.notifications import reviewers_notify

EXPIRY_SCHEDULE = "lectern-expire-approvals"
EXPIRY_MINUTES = 5


def expire_approvals() -> int:
    return approvals_expire()


def notify_reviewers(request_ids: list[int]) -> int:
    return reviewers_notify(request_ids=request_ids)


def ensure_expiry_schedule(**kwargs: object) -> None:
    """post_migrate: approvals past their lifetime are marked expired every few minutes
    (the gate refuses them by timestamp in between)."""
    from django_q.models import Schedule

    Schedule.objects.update_or_create(name=EXPIRY_SCHEDULE, defaults={
        "func": "approvals.tasks.expire_approvals", "schedule_type": Schedule.MINUTES,
        "minutes": EXPIRY_MINUTES, "repeats": -1,
    })
