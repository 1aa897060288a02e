"""Managing webhook endpoints: curators only, audited without the secret, the secret
shown once (command, API) and masked everywhere after; delivery history for curators."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError

from approvals.channels.models import WebhookDelivery, WebhookEndpoint
from approvals.channels.webhooks.delivery import delivery_attempt
from approvals.channels.webhooks.endpoints import endpoint_create
from catalog.errors import ApplicationError
from catalog.models import AuditEntry
from tests.approvals.builders import raised
from tests.approvals.receiver import Receiver
from tests.factories import person


def test_only_a_curator_or_the_command_line_makes_an_endpoint(kb, rita, cora):
    with pytest.raises(ApplicationError) as refused:
        endpoint_create(catalog=kb.catalog, url="https://a.example.com", by=rita)
    assert refused.value.code == "not_curator" and not WebhookEndpoint.objects.exists()

    by_curator = endpoint_create(catalog=kb.catalog, url="https://a.example.com", by=cora)
    by_command = endpoint_create(catalog=kb.catalog, url="https://b.example.com", by=None)

    entries = AuditEntry.objects.filter(action="webhook.endpoint_created").order_by("seq")
    assert [(e.actor_kind, e.actor_name) for e in entries] == [("user", "cora"), ("system", "command")]
    for issued, entry in zip((by_curator, by_command), entries, strict=True):
        assert issued.secret.startswith("whsec_") and issued.secret not in json.dumps(entry.payload)
        assert entry.payload["secret_hint"] == issued.endpoint.secret_hint


@pytest.mark.parametrize("url", ["ftp://a.example.com/x", "not a url", "file:///etc/passwd"])
def test_an_endpoint_url_is_http_or_https(kb, cora, url):
    with pytest.raises(ValidationError):
        endpoint_create(catalog=kb.catalog, url=url, by=cora)


def test_the_command_prints_the_secret_once_and_lists_only_its_hint(kb, capsys):
    call_command("webhook_endpoint", "create", "--catalog", "kb", "--url", "https://hooks.example.com/in",
                 "--events", "approval.requested,approval.decided")
    secret = capsys.readouterr().out.strip()
    call_command("webhook_endpoint", "list")
    listed = capsys.readouterr().out

    endpoint = WebhookEndpoint.objects.get()
    assert secret.startswith("whsec_") and secret not in listed and secret[-4:] in listed
    assert endpoint.event_types == ["approval.decided", "approval.requested"]

    call_command("webhook_endpoint", "rotate", "--id", str(endpoint.pk))
    rotated = capsys.readouterr().out.strip()
    call_command("webhook_endpoint", "disable", "--id", str(endpoint.pk))
    endpoint.refresh_from_db()
    assert rotated != secret and endpoint.secret_hint.endswith(rotated[-4:]) and not endpoint.active
    assert list(AuditEntry.objects.filter(action__startswith="webhook.").values_list("action", flat=True)) == [
        "webhook.endpoint_created", "webhook.secret_rotated", "webhook.endpoint_updated"]
    with pytest.raises(CommandError, match="event_types"):
        call_command("webhook_endpoint", "create", "--catalog", "kb", "--url", "https://x.example.com",
                     "--events", "approval.whatever")


def test_curators_make_endpoints_and_read_deliveries_over_the_api(kb, agent, client, cora, rita,
                                                                  outbound_to_loopback):
    client.force_login(cora)
    with Receiver() as receiver:
        made = client.post("/api/v1/catalogs/kb/webhooks", {"url": receiver.url, "event_types": [
            "approval.requested"]}, content_type="application/json")
        assert made.status_code == 201, made.content
        receiver.secret = made.json()["secret"]
        receiver.answers.append(500)
        raised(agent, kb.vault)
        delivery_attempt(delivery_id=WebhookDelivery.objects.get().pk)

    listed = client.get("/api/v1/catalogs/kb/webhooks").json()
    deliveries = client.get("/api/v1/catalogs/kb/webhooks/deliveries", {"status": "pending"}).json()

    assert "secret" not in listed[0] and listed[0]["secret_hint"] == "whsec_…" + made.json()["secret"][-4:]
    (delivery,) = deliveries
    assert (delivery["event_type"], delivery["status"], delivery["attempts"]) == ("approval.requested", "pending", 1)
    assert delivery["history"][0]["status_code"] == 500 and delivery["last_error"] == "HTTP 500"

    refused = client.post("/api/v1/catalogs/kb/webhooks", {"url": "ftp://files.example.com/in"},
                          content_type="application/json")
    assert refused.status_code == 400 and "url" in refused.json()["error"]["details"]["fields"]

    client.force_login(rita)
    assert client.get("/api/v1/catalogs/kb/webhooks").status_code == 403
    assert client.post("/api/v1/catalogs/kb/webhooks", {"url": "https://x.example.com"},
                       content_type="application/json").status_code == 403
    assert WebhookEndpoint.objects.count() == 1


def test_the_admin_masks_the_secret_and_changes_endpoints_through_the_service(kb, client, cora):
    issued = endpoint_create(catalog=kb.catalog, url="https://a.example.com", by=cora)
    admin = person("ada", "curator", is_staff=True, is_superuser=True)
    client.force_login(admin)

    page = client.get(f"/admin/approvals/webhookendpoint/{issued.endpoint.pk}/change/").content.decode()
    assert issued.secret not in page and issued.secret[-4:] in page
    assert client.get("/admin/approvals/webhookendpoint/add/").status_code == 403

    changed = client.post(f"/admin/approvals/webhookendpoint/{issued.endpoint.pk}/change/", {
        "url": "https://b.example.com", "description": "", "event_types": "approval.decided",
        "active": "on", "accepts_decisions": "on"})
    assert changed.status_code == 302
    update = AuditEntry.objects.get(action="webhook.endpoint_updated")
    assert (update.actor_name, update.payload["after"]["url"]) == ("ada", "https://b.example.com")
    assert client.get("/admin/approvals/webhookdelivery/").status_code == 200
