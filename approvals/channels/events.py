"""Approval events for the webhook channel, made from the audit log as it is appended.

Every change of a request's state is audited by the service that makes it, in its own
transaction, and that service hands the entries it appended here (events_record). A
request event for a catalog with active endpoints that subscribe to it becomes a
WebhookEvent (its JSON body, fixed now) and one WebhookDelivery per endpoint, written in
that same transaction: the event exists if and only if what it reports committed, and
a crash before delivery loses nothing (the periodic sweep delivers what is due). The
first attempt is queued once it commits.

The body never holds a token nor any content beyond the request's excerpt (what raised
it, at most 1,000 characters): no document text, no diff.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import transaction

from approvals.channels.models import EventType, WebhookDelivery, WebhookEndpoint, WebhookEvent
from approvals.channels.webhooks.signing import new_message_id
from approvals.models import ApprovalRequest
from catalog.audit.log import Action
from catalog.models import AuditEntry

EVENT_OF_ACTION = {
    Action.REQUEST_RAISED: EventType.REQUESTED,
    Action.REQUEST_APPROVED: EventType.DECIDED,
    Action.REQUEST_REJECTED: EventType.DECIDED,
    Action.REQUEST_REVOKED: EventType.REVOKED,
    Action.REQUEST_LAPSED: EventType.LAPSED,
    Action.REQUEST_EXPIRED: EventType.EXPIRED,
}
STATE_OF_ACTION = {
    Action.REQUEST_RAISED: ApprovalRequest.State.PENDING,
    Action.REQUEST_APPROVED: ApprovalRequest.State.APPROVED,
    Action.REQUEST_REJECTED: ApprovalRequest.State.REJECTED,
    Action.REQUEST_REVOKED: ApprovalRequest.State.REVOKED,
    Action.REQUEST_LAPSED: ApprovalRequest.State.LAPSED,
    Action.REQUEST_EXPIRED: ApprovalRequest.State.EXPIRED,
}


def events_record(entries: Sequence[AuditEntry]) -> None:
    """Events and deliveries for the request entries among
    `entries` that some active endpoint of their catalog subscribes to. One query when
    no endpoint listens (the common case)."""
    relevant = [e for e in entries if e.action in EVENT_OF_ACTION and e.request_id is not None]
    if not relevant:
        return
    endpoints = list(WebhookEndpoint.objects.filter(
        active=True, catalog__sources__in={e.source_id for e in relevant}).distinct())
    if not endpoints:
        return
    requests = ApprovalRequest.objects.select_related("source__catalog", "agent").in_bulk(
        [e.request_id for e in relevant])
    events, deliveries = [], []
    for entry in relevant:
        request = requests.get(entry.request_id)
        kind = EVENT_OF_ACTION[Action(entry.action)]
        targets = [ep for ep in endpoints if request is not None and ep.catalog_id == request.source.catalog_id
                   and kind in ep.event_types]
        if request is None or not targets:
            continue
        event = WebhookEvent(message_id=new_message_id(), type=kind, request_id=request.pk, audit_seq=entry.seq,
                             body=event_body(kind, entry, request), created_at=entry.at)
        events.append(event)
        deliveries += [WebhookDelivery(event=event, endpoint=ep, next_attempt_at=entry.at, created_at=entry.at)
                       for ep in targets]
    WebhookEvent.objects.bulk_create(events)
    created = WebhookDelivery.objects.bulk_create(deliveries)
    ids = [d.pk for d in created]
    transaction.on_commit(lambda: _enqueue(ids))


def _enqueue(delivery_ids: list[int]) -> None:
    from django_q.tasks import async_task

    for delivery_id in delivery_ids:
        async_task("approvals.tasks.deliver_webhook", delivery_id, group="webhooks")


def event_body(kind: str, entry: AuditEntry, request: ApprovalRequest) -> str:
    """The JSON sent: {type, timestamp, data}, as Standard Webhooks suggests."""
    return json.dumps({"type": kind, "timestamp": _iso(entry.at), "data": event_data(entry, request)},
                      ensure_ascii=False, separators=(",", ":"))


def event_data(entry: AuditEntry, request: ApprovalRequest) -> dict[str, Any]:
    """What the request is, as the event reports it; the state is the one the entry
    records (the row may move on in the same transaction, as a reindex's lapse does)."""
    payload = entry.payload
    data: dict[str, Any] = {
        "request_id": request.pk,
        "state": STATE_OF_ACTION[Action(entry.action)],
        "catalog": request.source.catalog.slug,
        "source": request.source.slug,
        "agent": request.agent.name,
        "fingerprint": request.fingerprint,
        "raised_via": request.raised_via,
        "excerpt": request.context,
        "previous_request_id": request.previous_id,
        "approvals": request.approvals,
        "created_at": _iso(request.created_at),
        "decided_at": _iso(request.decided_at),
        "expires_at": _iso(request.expires_at),
        "ended_at": _iso(request.ended_at),
        "decision_path": f"/api/v1/approvals/{request.pk}/decision",
    }
    if entry.action in (Action.REQUEST_APPROVED, Action.REQUEST_REJECTED):
        data["decision"] = {"verdict": payload.get("verdict"), "reviewer": entry.actor_name,
                            "comment": payload.get("comment", ""), "channel": payload.get("channel"),
                            "required": payload.get("required")}
    elif entry.action == Action.REQUEST_REVOKED:
        data["revocation"] = {"by": entry.actor_name, "reason": payload.get("reason", "")}
    elif entry.action == Action.REQUEST_LAPSED:
        data["lapse"] = {"was": payload.get("was"), "new_fingerprint": payload.get("new_fingerprint")}
    return data


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None
