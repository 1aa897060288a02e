"""The channels' tables: per-catalog webhook endpoints (their signing secret sealed at
rest), the events sent to them and one delivery per (event, endpoint) with its attempts,
and the ids of the signed messages received, kept to refuse a replay.

approvals.models imports these, so the app's migrations and the admin see them."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.validators import URLValidator
from django.db import models

from catalog.models import Catalog


class EventType(models.TextChoices):
    REQUESTED = "approval.requested"
    DECIDED = "approval.decided"  # approved or rejected
    REVOKED = "approval.revoked"
    LAPSED = "approval.lapsed"
    EXPIRED = "approval.expired"


def all_event_types() -> list[str]:
    return list(EventType.values)


class WebhookEndpoint(models.Model):
    """Where a catalog's approval events go. The secret (`whsec_...`) signs what is sent
    and, when `accepts_decisions`, verifies decisions sent back; it is stored sealed
    (approvals.channels.webhooks.sealing), shown once when made or rotated, never again."""

    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="webhook_endpoints")
    url = models.URLField(max_length=2000, validators=[URLValidator(schemes=["http", "https"])])
    description = models.CharField(max_length=200, blank=True)
    event_types = ArrayField(models.CharField(max_length=24, choices=EventType.choices), default=all_event_types,
                             help_text="The events sent here.")
    active = models.BooleanField(default=True, help_text="Inactive: nothing is sent, no decision accepted.")
    accepts_decisions = models.BooleanField(
        default=True, help_text="Decisions signed with this endpoint's secret are accepted for the catalog.")
    secret_sealed = models.TextField(editable=False)
    secret_hint = models.CharField(max_length=16, editable=False, help_text="The secret's last characters.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"webhook {self.pk} of {self.catalog_id}: {self.url}"


class WebhookEvent(models.Model):
    """One approval event, as the exact JSON body every endpoint receives for it.
    `message_id` is its `webhook-id`, the same on every attempt and every endpoint."""

    message_id = models.CharField(max_length=64, unique=True)
    type = models.CharField(max_length=24, choices=EventType.choices)
    request_id = models.BigIntegerField(help_text="The approval request (a plain id, as in the audit log).")
    audit_seq = models.BigIntegerField(help_text="The audit entry it was made from.")
    body = models.TextField(help_text="The JSON sent, byte for byte as signed.")
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-pk"]
        indexes = [models.Index(fields=["request_id"], name="webhook_event_request")]

    def __str__(self) -> str:
        return f"{self.type} {self.message_id}"


class WebhookDelivery(models.Model):
    """An event's delivery to one endpoint: attempted until the endpoint answers 2xx,
    with backoff between attempts, until the attempts allowed are spent. Written in the
    same transaction as the event it delivers, so no event is lost to a crash."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"  # every attempt allowed failed

    event = models.ForeignKey(WebhookEvent, on_delete=models.CASCADE, related_name="deliveries")
    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True,
                                           help_text="When it is due (or its claim ends); empty once settled.")
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    last_response = models.CharField(max_length=1000, blank=True, help_text="The start of the last answer's body.")
    history = models.JSONField(default=list, help_text="Each attempt: at, status_code, error, ms.")
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-pk"]
        verbose_name_plural = "webhook deliveries"
        constraints = [models.UniqueConstraint(fields=["event", "endpoint"], name="one_delivery_per_endpoint")]
        indexes = [models.Index(fields=["next_attempt_at"], condition=models.Q(status="pending"),
                                name="webhook_delivery_due"),
                   models.Index(fields=["endpoint", "-created_at"], name="webhook_delivery_history")]

    def __str__(self) -> str:
        return f"delivery {self.pk} ({self.status})"


class InboundWebhookMessage(models.Model):
    """A signed decision message received (its signature verified), whatever its outcome:
    its `webhook-id` is never taken again (kept well past the timestamp tolerance, after
    which a replay is refused as stale)."""

    webhook_id = models.CharField(max_length=255, unique=True)
    endpoint = models.ForeignKey(WebhookEndpoint, null=True, on_delete=models.SET_NULL, related_name="+")
    request_id = models.BigIntegerField()
    received_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return self.webhook_id
