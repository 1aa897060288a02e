"""Webhook endpoints, managed by curators (or an operator's `manage.py webhook_endpoint`,
who acts as no one person) and audited. The secret is made here, returned once by
endpoint_create and endpoint_rotate_secret, and stored only sealed; no audit entry,
log line or listing ever holds it (the hint, its last characters, tells secrets apart).
A URL that leads inside (loopback, private, link-local, metadata: catalog.outbound) is
refused when set; delivery checks it again, since names move and rules tighten."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from approvals.channels.models import WebhookEndpoint, all_event_types
from approvals.channels.webhooks import sealing
from approvals.channels.webhooks.signing import new_secret
from approvals.services.errors import forbidden, not_found
from catalog.audit.log import Action, Actor, AuditEvent, audit_append
from catalog.auth import is_curator
from catalog.models import Catalog
from catalog.outbound.client import url_refusal

FIELDS = ("url", "description", "event_types", "active", "accepts_decisions")


@dataclass(frozen=True)
class Issued:
    """An endpoint and its secret, which is shown this once."""

    endpoint: WebhookEndpoint
    secret: str


def endpoint_as_dict(endpoint: WebhookEndpoint) -> dict[str, Any]:
    """The endpoint as the audit log records it: never the secret."""
    return {"catalog": endpoint.catalog.slug, "url": endpoint.url, "description": endpoint.description,
            "event_types": list(endpoint.event_types), "active": endpoint.active,
            "accepts_decisions": endpoint.accepts_decisions, "secret_hint": endpoint.secret_hint}


def _check_curator(by: User | None) -> Actor:
    """None: an operator at the command line, trusted as Lectern itself."""
    if by is not None and not is_curator(by):
        raise forbidden("only a member of the curator group manages webhook endpoints", code="not_curator")
    return Actor.of(by, system="command")


def endpoint_url_check(url: str) -> None:
    """Raises ValidationError (on `url`) when deliveries could not reach `url`: an
    address inside, or a name resolving to one (the form, the API and the command show it)."""
    reason = url_refusal(url)
    if reason is not None:
        raise ValidationError({"url": [reason]})


def _set_secret(endpoint: WebhookEndpoint) -> str:
    secret = new_secret()
    endpoint.secret_sealed, endpoint.secret_hint = sealing.seal(secret), sealing.hint(secret)
    return secret


def endpoint_create(*, catalog: Catalog, url: str, by: User | None, event_types: Iterable[str] | None = None,
                    description: str = "", accepts_decisions: bool = True) -> Issued:
    """A new active endpoint with a new secret. Raises ForbiddenError not_curator,
    ValidationError on a bad URL or event type."""
    actor = _check_curator(by)
    endpoint = WebhookEndpoint(catalog=catalog, url=url, description=description,
                               event_types=sorted(set(event_types)) if event_types is not None else all_event_types(),
                               accepts_decisions=accepts_decisions, created_by=by)
    secret = _set_secret(endpoint)
    endpoint.full_clean()
    endpoint_url_check(endpoint.url)
    with transaction.atomic():
        endpoint.save()
        audit_append(AuditEvent(Action.WEBHOOK_ENDPOINT_CREATED, actor,
                                payload={"endpoint_id": endpoint.pk, **endpoint_as_dict(endpoint)}))
    return Issued(endpoint, secret)


def _locked(endpoint_id: int) -> WebhookEndpoint:
    endpoint = WebhookEndpoint.objects.select_for_update().select_related("catalog").filter(pk=endpoint_id).first()
    if endpoint is None:
        raise not_found(f"webhook endpoint {endpoint_id}")
    return endpoint


def endpoint_update(*, endpoint_id: int, by: User | None, **fields: Any) -> WebhookEndpoint:
    """Change `fields` (url, description, event_types, active, accepts_decisions); the
    audit entry holds the endpoint before and after. A new URL is checked; an endpoint
    whose stored URL is now refused can still be disabled, described or deleted."""
    actor = _check_curator(by)
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise TypeError(f"endpoint_update() cannot change {', '.join(sorted(unknown))}")
    if "url" in fields:
        endpoint_url_check(fields["url"])  # before the row is locked: it may wait on a resolver
    with transaction.atomic():
        endpoint = _locked(endpoint_id)
        before = endpoint_as_dict(endpoint)
        for name, value in fields.items():
            setattr(endpoint, name, sorted(set(value)) if name == "event_types" else value)
        endpoint.full_clean()
        endpoint.save()
        audit_append(AuditEvent(Action.WEBHOOK_ENDPOINT_UPDATED, actor, payload={
            "endpoint_id": endpoint.pk, "before": before, "after": endpoint_as_dict(endpoint)}))
    return endpoint


def endpoint_rotate_secret(*, endpoint_id: int, by: User | None) -> Issued:
    """A new secret, at once: deliveries from now on are signed with it, and decisions
    signed with the old one are refused."""
    actor = _check_curator(by)
    with transaction.atomic():
        endpoint = _locked(endpoint_id)
        old_hint = endpoint.secret_hint
        secret = _set_secret(endpoint)
        endpoint.save(update_fields=["secret_sealed", "secret_hint", "updated_at"])
        audit_append(AuditEvent(Action.WEBHOOK_SECRET_ROTATED, actor, payload={
            "endpoint_id": endpoint.pk, "catalog": endpoint.catalog.slug, "old_hint": old_hint,
            "new_hint": endpoint.secret_hint}))
    return Issued(endpoint, secret)


def endpoint_delete(*, endpoint_id: int, by: User | None) -> None:
    """The endpoint and its delivery history (deactivate it to keep the history)."""
    actor = _check_curator(by)
    with transaction.atomic():
        endpoint = _locked(endpoint_id)
        before = endpoint_as_dict(endpoint)
        endpoint.delete()
        audit_append(AuditEvent(Action.WEBHOOK_ENDPOINT_DELETED, actor,
                                payload={"endpoint_id": endpoint_id, "before": before}))
