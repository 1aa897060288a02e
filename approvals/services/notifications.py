"""Telling reviewers of new approval requests: one e-mail per request raised, to every
active member of the reviewer group who has an address, through Django's mail backend
(the console under `make run`).

requests_raise hands the ids it inserted to reviewers_notify_on_commit: once the raise
commits, a django-q2 task (approvals.tasks.notify_reviewers) sends the mail, so a read
path that raised a request never waits on a mail server, and a raise rolled back
tells no one. A read that finds a request already pending inserts nothing and sends
nothing. The task claims each request by its `notified_at` (a locked, conditional
update) and sends inside that transaction: a retried or doubled task sends nothing
twice, and a failed send rolls the claim back for django-q2's retry."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import EmailMessage, get_connection
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from approvals.models import ApprovalRequest
from catalog.audit.log import Action, Actor, AuditEvent, audit_append_many
from catalog.auth import REVIEWER_GROUP

NOTIFIER = Actor.of(None, system="notifications")
CONTEXT_IN_MAIL_CHARS = 300


def reviewers_notify_on_commit(request_ids: Sequence[int]) -> None:
    """Queue the e-mails for these new requests once the current transaction commits."""
    if request_ids:
        transaction.on_commit(partial(_enqueue, list(request_ids)))


def _enqueue(request_ids: list[int]) -> None:
    from django_q.tasks import async_task

    async_task("approvals.tasks.notify_reviewers", request_ids, group="notify-reviewers")


def reviewer_addresses() -> list[str]:
    """The addresses of the active members of the reviewer group (superusers are
    mailed only when they are members: mail is asked for by joining the group)."""
    return sorted(set(User.objects.filter(is_active=True, groups__name=REVIEWER_GROUP).exclude(email="")
                      .values_list("email", flat=True)))


def reviewers_notify(*, request_ids: Sequence[int]) -> int:
    """E-mail the reviewers about each of these requests still pending and not yet
    told of; the number of e-mails sent (one per request). Audited per request."""
    recipients = reviewer_addresses()
    if not recipients:
        return 0
    with transaction.atomic():
        claimed = list(ApprovalRequest.objects.select_for_update(of=("self",), skip_locked=True)
                       .filter(pk__in=list(request_ids), state=ApprovalRequest.State.PENDING, notified_at__isnull=True)
                       .select_related("source__catalog", "agent", "previous").order_by("pk"))
        if not claimed:
            return 0
        ApprovalRequest.objects.filter(pk__in=[r.pk for r in claimed]).update(notified_at=timezone.now())
        with get_connection() as connection:
            connection.send_messages([_message(request, recipients) for request in claimed])
        audit_append_many([AuditEvent(Action.REQUEST_NOTIFIED, NOTIFIER, request_id=r.pk, source_id=r.source_id,
                                      agent_id=r.agent_id, fingerprint=r.fingerprint,
                                      payload={"recipients": len(recipients)}) for r in claimed])
    return len(claimed)


def _message(request: ApprovalRequest, recipients: list[str]) -> EmailMessage:
    source, agent = request.source, request.agent
    subject = f"Lectern: {agent.name} asks to read {source} (request {request.pk})"
    lines = [f'Agent "{agent.name}" asks to read the reference {source} ("{source.name}") as it is now.',
             f"Raised via: {request.raised_via}, {request.created_at:%Y-%m-%d %H:%M} UTC."]
    if request.context:
        context = " ".join(request.context.split())
        if len(context) > CONTEXT_IN_MAIL_CHARS:
            context = context[:CONTEXT_IN_MAIL_CHARS - 1] + "…"
        lines.append(f"Context: {context}")
    if request.previous is not None:
        lines.append(f"It follows request {request.previous_id}: the content changed since."
                     if request.follows_other_content else
                     f"It follows request {request.previous_id} (now {request.previous.state}), for the same content.")
    lines += ["", f"Review it: {settings.LECTERN_BASE_URL}{reverse('approvals-request', args=[request.pk])}",
              "", "You receive this as a member of Lectern's reviewer group."]
    return EmailMessage(subject=" ".join(subject.split()), body="\n".join(lines), to=recipients)
