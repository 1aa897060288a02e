"""Withdrawing an approval: a reviewer revokes an approved request; the gate refuses it
from then on, and nothing is raised again for that content on its own (the agent or a
curator may ask anew by hand)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from approvals.channels.events import events_record
from approvals.models import COMMENT_MAX_CHARS, ApprovalRequest
from approvals.selectors.requests import with_state_now
from approvals.services.errors import conflict, forbidden, invalid, not_found
from catalog.audit.log import Action, Actor, AuditEvent, audit_append
from catalog.auth import is_reviewer


def approval_revoke(*, request_id: int, by: User, reason: str = "") -> ApprovalRequest:
    """Revoke an approved request. Raises ForbiddenError not_reviewer, NotFoundError, InvalidError,
    ConflictError not_approved (pending, rejected or already ended: its time up counts, as the
    gate and the listings see it, whether or not the expiry task has marked it)."""
    if not is_reviewer(by):
        raise forbidden("only a member of the reviewer group revokes approvals", code="not_reviewer")
    if len(reason) > COMMENT_MAX_CHARS:
        raise invalid(f"a reason has at most {COMMENT_MAX_CHARS} characters")
    with transaction.atomic():
        request = ApprovalRequest.objects.select_for_update().filter(pk=request_id).first()
        if request is None:
            raise not_found(f"approval request {request_id}")
        state = with_state_now(ApprovalRequest.objects.filter(pk=request.pk)).values_list("state_now", flat=True)[0]
        if state != ApprovalRequest.State.APPROVED:
            raise conflict(f"request {request.pk} is {state}, not approved", code="not_approved", state=state)
        request.state, request.ended_at = ApprovalRequest.State.REVOKED, timezone.now()
        request.save(update_fields=["state", "ended_at"])
        events_record([audit_append(AuditEvent(Action.REQUEST_REVOKED, Actor.of(by), request_id=request.pk,
                                                source_id=request.source_id, agent_id=request.agent_id,
                                                fingerprint=request.fingerprint, payload={"reason": reason}))])
    return request
