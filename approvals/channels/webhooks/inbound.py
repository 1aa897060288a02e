"""Decisions sent back by webhook: `POST /api/v1/approvals/{id}/decision`, signed with
the secret of an active endpoint of the request's catalog that accepts decisions.

decision_admit takes a message in before anything of the body is read:

1. decision_verify checks the Standard Webhooks headers: present, a timestamp within 5
   minutes of now, a signature made with one of those secrets. For a request that does
   not exist, every accepting endpoint's secret is tried, so that only a signed caller
   learns it is missing (404); anyone else gets 401 either way.
2. message_spend records the message id, committed on its own: a signed message is
   taken once, whatever becomes of it (accepted, refused by the service, its body
   invalid, its request missing). A message refused for a transient reason is sent
   again under a new id, signed anew; a captured one can never be played again, on
   this request or another.

decision_receive then checks that the signed body names this request and the content
it is for (its fingerprint: the URL is not signed, the body is), and decides through
request_decide: four eyes, self-approval, required approvals and conflicts hold as on
any channel. Every refusal is logged as a warning, without secret, signature or body.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from approvals.channels.models import InboundWebhookMessage, WebhookEndpoint
from approvals.channels.webhooks.sealing import SecretUnreadable, unseal
from approvals.channels.webhooks.signing import Refusal, matching_secret, signed_parts
from approvals.models import ApprovalRequest, Decision
from approvals.services.decisions import request_decide
from approvals.services.errors import conflict, invalid, not_found
from catalog.audit.log import Action, Actor, AuditEvent, audit_append
from catalog.errors import ApplicationError, InvalidError, UnauthenticatedError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Verified:
    endpoint: WebhookEndpoint
    message_id: str


def _shown(value: str) -> str:
    """A caller-supplied value as a log line may hold it."""
    return repr(value[:80])


def decision_admit(*, request_id: int, headers: Mapping[str, str], body: bytes, client: str = "",
                   now: datetime | None = None) -> Verified:
    """The verified message, its id spent. Raises UnauthenticatedError missing_signature /
    stale_timestamp / bad_signature, ConflictError replayed, NotFoundError."""
    now = now or timezone.now()
    verified, found = decision_verify(request_id=request_id, headers=headers, body=body, client=client, now=now)
    message_spend(request_id=request_id, verified=verified, client=client, now=now)
    if not found:
        logger.warning("webhook decision for request %s refused: no such request; webhook-id %s, from %s",
                       request_id, _shown(verified.message_id), client or "?")
        raise not_found(f"approval request {request_id}")
    return verified


def decision_verify(*, request_id: int, headers: Mapping[str, str], body: bytes, client: str = "",
                    now: datetime) -> tuple[Verified, bool]:
    """The endpoint whose secret signed this message, and whether the request exists.
    Raises UnauthenticatedError missing_signature / stale_timestamp / bad_signature."""
    catalog_id = ApprovalRequest.objects.filter(pk=request_id).values_list("source__catalog_id", flat=True).first()
    try:
        signed = signed_parts(headers, now=now)
        endpoints = _accepting(catalog_id)
        index = matching_secret(secrets_=[secret for _, secret in endpoints], headers=headers, signed=signed,
                                body=body)
    except Refusal as refusal:
        logger.warning("webhook decision for request %s refused (%s): %s; webhook-id %s, from %s", request_id,
                       refusal.code, refusal.message, _shown(headers.get("webhook-id", "")), client or "?")
        raise UnauthenticatedError(refusal.message, code=refusal.code) from None
    return Verified(endpoints[index][0], signed.message_id), catalog_id is not None


def message_spend(*, request_id: int, verified: Verified, client: str = "", now: datetime) -> None:
    """Record the message's id in a transaction of its own (the caller holds none: the
    record must outlast whatever refuses the message next). Raises ConflictError
    replayed when it was recorded before."""
    try:
        with transaction.atomic():
            InboundWebhookMessage.objects.create(webhook_id=verified.message_id, endpoint=verified.endpoint,
                                                 request_id=request_id, received_at=now)
    except IntegrityError:
        logger.warning("webhook decision for request %s refused (replayed); webhook-id %s, endpoint %s, from %s",
                       request_id, _shown(verified.message_id), verified.endpoint.pk, client or "?")
        raise conflict(f"webhook-id {verified.message_id!r} was received already; a message is taken once",
                       code="replayed") from None


def _accepting(catalog_id: int | None) -> list[tuple[WebhookEndpoint, str]]:
    """The endpoints whose secret may sign a decision for the catalog (for any catalog
    when None), with their secrets; one that cannot be opened is left out, logged."""
    endpoints = WebhookEndpoint.objects.filter(active=True, accepts_decisions=True).order_by("pk")
    if catalog_id is not None:
        endpoints = endpoints.filter(catalog_id=catalog_id)
    found = []
    for endpoint in endpoints:
        try:
            found.append((endpoint, unseal(endpoint.secret_sealed)))
        except SecretUnreadable as exc:
            logger.error("webhook endpoint %s: %s", endpoint.pk, exc)
    return found


def decision_receive(*, request_id: int, verified: Verified, names_request: int, fingerprint: str, verdict: str,
                     reviewer: str, comment: str = "") -> ApprovalRequest:
    """Decide the request as `reviewer` (a Lectern username) said, when the signed body
    names this request (`names_request`) and the content it is for (`fingerprint`).
    Raises InvalidError invalid_input / request_mismatch, ConflictError fingerprint_mismatch,
    and request_decide's own."""
    try:
        return _receive(request_id=request_id, verified=verified, names_request=names_request,
                        fingerprint=fingerprint, verdict=verdict, reviewer=reviewer, comment=comment)
    except ApplicationError as exc:
        logger.warning("webhook decision for request %s refused (%s): %s; webhook-id %s, endpoint %s", request_id,
                       exc.code, exc.message, _shown(verified.message_id), verified.endpoint.pk)
        raise


def _receive(*, request_id: int, verified: Verified, names_request: int, fingerprint: str, verdict: str,
             reviewer: str, comment: str) -> ApprovalRequest:
    if names_request != request_id:
        raise InvalidError(f"the signed body decides request {names_request}, not request {request_id}",
                          code="request_mismatch",
                          details={"fields": {"request_id": [f"this message is for request {names_request}"]}})
    person = User.objects.filter(username=reviewer, is_active=True).first()
    if person is None:
        raise invalid(f"no active user {reviewer!r}", fields={"reviewer": [f"no active user {reviewer!r}"]})
    with transaction.atomic():
        request = request_decide(request_id=request_id, reviewer=person, verdict=verdict, comment=comment,
                                 channel=Decision.Channel.WEBHOOK, fingerprint=fingerprint)
        audit_append(AuditEvent(
            Action.DECISION_RECEIVED, Actor.channel(f"webhook:{verified.endpoint.pk}"), request_id=request.pk,
            source_id=request.source_id, agent_id=request.agent_id, fingerprint=request.fingerprint,
            payload={"channel": Decision.Channel.WEBHOOK, "endpoint_id": verified.endpoint.pk,
                     "webhook_id": verified.message_id, "reviewer": person.get_username(), "verdict": verdict}))
    return request
