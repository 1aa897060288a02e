"""django-q2 tasks: thin wrappers over approvals' services."""

from __future__ import annotations

from django.conf import settings

from approvals.channels.files import decision_files_apply
from approvals.channels.webhooks.delivery import deliveries_send_due, delivery_attempt
from approvals.services.expiry import approvals_expire
from approvals.services.notifications import reviewers_notify
from catalog.audit.checkpoints import audit_checkpoint_write

EXPIRY_SCHEDULE = "lectern-expire-approvals"
EXPIRY_MINUTES = 5
WEBHOOK_SCHEDULE = "lectern-deliver-webhooks"
DECISION_FILES_SCHEDULE = "lectern-apply-decision-files"
CHECKPOINT_SCHEDULE = "lectern-audit-checkpoint"


def expire_approvals() -> int:
    return approvals_expire()


def deliver_webhook(delivery_id: int) -> str:
    """Queued when an event commits: its first attempt (a no-op when the sweep, or
    another worker, claimed it first)."""
    delivery = delivery_attempt(delivery_id=delivery_id)
    return "not due" if delivery is None else delivery.status


def deliver_due_webhooks() -> int:
    return deliveries_send_due()


def apply_decision_files() -> int:
    return sum(outcome.applied for outcome in decision_files_apply())


def write_audit_checkpoint() -> str:
    written = audit_checkpoint_write()
    return "unchanged" if written is None else f"written: {written.path.name}"


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


def ensure_channel_schedules(**kwargs: object) -> None:
    """post_migrate: each minute, webhook deliveries that are due (retries, and first
    attempts whose queued task was lost) are attempted, and the decision directory read."""
    from django_q.models import Schedule

    for name, func in ((WEBHOOK_SCHEDULE, "approvals.tasks.deliver_due_webhooks"),
                       (DECISION_FILES_SCHEDULE, "approvals.tasks.apply_decision_files")):
        Schedule.objects.update_or_create(name=name, defaults={
            "func": func, "schedule_type": Schedule.MINUTES, "minutes": 1, "repeats": -1})


def ensure_checkpoint_schedule(**kwargs: object) -> None:
    """post_migrate: the audit chain's head is written outside the database every
    LECTERN_AUDIT_CHECKPOINT_MINUTES, when it has moved (catalog.audit.checkpoints)."""
    from django_q.models import Schedule

    Schedule.objects.update_or_create(name=CHECKPOINT_SCHEDULE, defaults={
        "func": "approvals.tasks.write_audit_checkpoint", "schedule_type": Schedule.MINUTES,
        "minutes": settings.LECTERN_AUDIT_CHECKPOINT_MINUTES, "repeats": -1})
