"""Approvals whose lifetime is over become `expired`. The gate refuses them by their
timestamps already (approvals.selectors, including a lifetime shortened by a policy
since); this marks the rows and audits each, for the listings and the queue. The
django-q2 schedule `lectern-expire-approvals` runs it (approvals.tasks)."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from approvals.audit.log import Action, Actor, AuditEvent, audit_append_many
from approvals.models import ApprovalRequest

BATCH = 1000


def approvals_expire(*, now: datetime | None = None) -> int:
    """Mark approved requests past `expires_at` expired, in batches of BATCH (rows
    another transaction holds are left to the next run); how many were marked."""
    now = now or timezone.now()
    total = 0
    while True:
        with transaction.atomic():
            due = list(ApprovalRequest.objects.select_for_update(skip_locked=True)
                       .filter(state=ApprovalRequest.State.APPROVED, expires_at__lte=now)
                       .order_by("pk").values_list("pk", "source_id", "agent_id", "fingerprint", "expires_at")[:BATCH])
            if not due:
                return total
            ApprovalRequest.objects.filter(pk__in=[row[0] for row in due]).update(
                state=ApprovalRequest.State.EXPIRED, ended_at=now)
            audit_append_many([
                AuditEvent(Action.REQUEST_EXPIRED, Actor.of(None, system="expiry"), request_id=pk,
                           source_id=source_id, agent_id=agent_id, fingerprint=fingerprint,
                           payload={"expires_at": expires_at.isoformat() if expires_at else None})
                for pk, source_id, agent_id, fingerprint, expires_at in due])
            total += len(due)
