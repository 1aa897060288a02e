"""The channels in the admin: endpoints changed through their services (audited; made
by `manage.py webhook_endpoint create` or the API, which show the secret once, so not
here), the secret only as its hint, a URL leading inside refused with the reason shown;
deliveries and events read-only, the history."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db.models import QuerySet, URLField
from django.http import HttpRequest

from approvals.admin import ReadOnly
from approvals.channels.models import WebhookDelivery, WebhookEndpoint, WebhookEvent
from approvals.channels.webhooks.endpoints import FIELDS, endpoint_delete, endpoint_update, endpoint_url_check
from catalog.outbound.client import url_refusal
from catalog.web import person_or_none


class WebhookEndpointForm(forms.ModelForm[WebhookEndpoint]):
    def clean(self) -> dict[str, object]:
        """A new URL passes the service's check here, where the form can show why not."""
        cleaned = super().clean() or {}
        if "url" in self.changed_data and "url" in cleaned:
            try:
                endpoint_url_check(str(cleaned["url"]))
            except ValidationError as exc:
                self.add_error(None, exc)
        return cleaned


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin[WebhookEndpoint]):
    form = WebhookEndpointForm
    list_display = ["pk", "catalog", "url", "active", "accepts_decisions", "secret_hint", "updated_at"]
    list_filter = ["catalog", "active", "accepts_decisions"]
    fields = ["catalog", "url", "outbound", "description", "event_types", "active", "accepts_decisions", "secret",
              "created_by", "created_at", "updated_at"]
    readonly_fields = ["catalog", "outbound", "secret", "created_by", "created_at", "updated_at"]
    formfield_overrides = {URLField: {"assume_scheme": "https"}}

    @admin.display(description="deliveries")
    def outbound(self, obj: WebhookEndpoint) -> str:
        """Why deliveries to the stored URL are refused (one stored before the rule, or a
        name that resolves inside now), checked as each delivery checks it."""
        reason = url_refusal(obj.url)
        if reason is not None:
            return f"Deliveries are refused: {reason}. Change the URL, or disable the endpoint."
        return "Allowed (the URL is checked again, resolved, before each delivery)."

    @admin.display(description="secret")
    def secret(self, obj: WebhookEndpoint) -> str:
        return f"{obj.secret_hint} (shown once when made; `manage.py webhook_endpoint rotate` issues another)"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: WebhookEndpoint, form: forms.ModelForm[WebhookEndpoint],
                   change: bool) -> None:
        changed = {name: form.cleaned_data[name] for name in form.changed_data if name in FIELDS}
        if changed:
            endpoint_update(endpoint_id=obj.pk, by=person_or_none(request.user), **changed)

    def delete_model(self, request: HttpRequest, obj: WebhookEndpoint) -> None:
        endpoint_delete(endpoint_id=obj.pk, by=person_or_none(request.user))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]) -> None:
        for pk in queryset.values_list("pk", flat=True):
            endpoint_delete(endpoint_id=pk, by=person_or_none(request.user))


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnly):
    list_display = ["pk", "event_type", "request_id", "endpoint", "status", "attempts", "last_status_code",
                    "next_attempt_at", "delivered_at", "created_at"]
    list_filter = ["status", "endpoint__catalog", "event__type"]
    list_select_related = ["event", "endpoint"]
    search_fields = ["event__message_id"]

    @admin.display(description="event")
    def event_type(self, obj: WebhookDelivery) -> str:
        return obj.event.type

    @admin.display(description="request")
    def request_id(self, obj: WebhookDelivery) -> int:
        return obj.event.request_id


@admin.register(WebhookEvent)
class WebhookEventAdmin(ReadOnly):
    list_display = ["pk", "type", "request_id", "message_id", "created_at"]
    list_filter = ["type"]
    search_fields = ["message_id"]
