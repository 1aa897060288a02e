"""Approvals whose lifetime is over become `expired`. The gate refuses them by their
timestamps already (approvals.selectors.gate, including a lifetime shortened by a policy
since), and listings show them expired from that moment (approvals.selectors.requests
with_state_now); this marks the rows, with the moment each ended, and audits each (the
`approval.expired` event goes out from that entry). The django-q2 schedule
`lectern-expire-approvals` runs it (approvals.tasks)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Min, Q
from django.db.models.expressions import RawSQL
from django.utils import timezone

from approvals.channels.events import events_record
from approvals.models import ApprovalPolicy, ApprovalRequest
from approvals.selectors.gate import APPROVAL_ENDS_SQL
from approvals.selectors.requests import with_state_now
from catalog.audit.log import Action, Actor, AuditEvent, audit_append_many

BATCH = 1000


def approvals_expire(*, now: datetime | None = None) -> int:
    """Mark approved requests whose time is up (APPROVAL_ENDS_SQL: their expiry, or the
    lifetime the policies set now) expired, in batches of BATCH, in id order (rows
    another transaction holds are left to the next run); how many were marked."""
    now = now or timezone.now()
    shortest = ApprovalPolicy.objects.aggregate(shortest=Min("lifetime"))["shortest"]
    total, after = 0, 0
    while True:
        with transaction.atomic():
            candidates = _candidates(now, shortest, after)
            if not candidates:
                return total
            total += _expire(candidates, now)
            after = candidates[-1]


def _candidates(now: datetime, shortest: timedelta | None, after: int) -> list[int]:
    """Approved requests past `after` that may be over, locked: past their expiry, or
    decided longer ago than the shortest lifetime of any policy (the exact rule, per
    source and agent, is applied to these)."""
    maybe = Q(expires_at__lte=now)
    if shortest is not None:
        maybe |= Q(decided_at__lte=now - shortest)
    return list(ApprovalRequest.objects.select_for_update(skip_locked=True)
                .filter(maybe, state=ApprovalRequest.State.APPROVED, pk__gt=after)
                .order_by("pk").values_list("pk", flat=True)[:BATCH])


def _expire(candidates: list[int], now: datetime) -> int:
    over = list(with_state_now(ApprovalRequest.objects.filter(pk__in=candidates), now)
                .filter(state_now=ApprovalRequest.State.EXPIRED).order_by("pk")
                .values_list("pk", "source_id", "agent_id", "fingerprint", "approval_ends"))
    if not over:
        return 0
    ends = RawSQL(APPROVAL_ENDS_SQL.format(r=ApprovalRequest._meta.db_table), [])
    ApprovalRequest.objects.filter(pk__in=[row[0] for row in over]).update(
        state=ApprovalRequest.State.EXPIRED, ended_at=ends)
    events_record(audit_append_many([
        AuditEvent(Action.REQUEST_EXPIRED, Actor.of(None, system="expiry"), request_id=pk, source_id=source_id,
                   agent_id=agent_id, fingerprint=fingerprint,
                   payload={"expires_at": ended.isoformat() if ended is not None else None})
        for pk, source_id, agent_id, fingerprint, ended in over]))
    return len(over)
