"""Webhook URLs that point inside (server-side request forgery, issue 20 item 7): refused
when registered, by the API, the command and the admin, with nothing stored; refused again
at each delivery, after resolving the name, for endpoints stored before the rule or
resolving elsewhere since; loopback let through only where a setting allows it (the test
receivers listen on 127.0.0.1). Nothing here sends a request anywhere but 127.0.0.1."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError

from approvals.channels.models import WebhookDelivery, WebhookEndpoint
from approvals.channels.webhooks import sealing
from approvals.channels.webhooks.delivery import RESPONSE_KEPT_CHARS, delivery_attempt
from approvals.channels.webhooks.endpoints import endpoint_create, endpoint_update
from approvals.channels.webhooks.signing import new_secret
from approvals.services.decisions import request_decide
from catalog.models import AuditEntry
from tests.approvals.builders import raised
from tests.approvals.receiver import Receiver
from tests.factories import person

INSIDE = [
    "http://127.0.0.1:8199/hook",
    "http://169.254.169.254/latest/meta-data/",
    "http://[::1]:8199/x",
    "http://2130706433/x",  # 127.0.0.1 as one decimal number
    "http://0177.0.0.1/x",  # octal
    "http://0x7f.1/x",  # hex, two parts
    "http://[::ffff:127.0.0.1]/x",  # IPv4-mapped IPv6
    "http://[::ffff:a9fe:a9fe]/x",  # 169.254.169.254, mapped, written in hex
    "http://10.1.2.3/x",
    "http://192.168.0.1/x",
    "http://172.16.0.1/x",
    "http://0.0.0.0/x",
    "http://[::]/x",
    "http://224.0.0.1/x",
    "http://[fe80::1]/x",
    "http://[fd00:ec2::254]/x",
    "http://localhost:8199/x",  # a name resolving to loopback
]
NUMERIC = {"http://2130706433/x", "http://0177.0.0.1/x", "http://0x7f.1/x"}


@pytest.fixture
def curator_client(client, cora):
    client.force_login(cora)
    return client


def _nothing_stored() -> None:
    assert not WebhookEndpoint.objects.exists()
    assert not AuditEntry.objects.filter(action__startswith="webhook.").exists()


@pytest.mark.parametrize("url", INSIDE)
def test_the_api_refuses_an_endpoint_inside_and_stores_nothing(kb, curator_client, url):
    refused = curator_client.post("/api/v1/catalogs/kb/webhooks", {"url": url}, content_type="application/json")

    assert refused.status_code == 400, refused.content
    error = refused.json()["error"]
    assert error["code"] == "invalid_input"
    reason = error["details"]["fields"]["url"][0]
    # numeric spellings of a host are no valid URL to Django's validator, which says so first
    assert ("outbound requests may not reach" in reason and "LECTERN_OUTBOUND_ALLOWED_NETWORKS" in reason
            or reason == "Enter a valid URL." and url in NUMERIC)
    _nothing_stored()


def test_the_api_names_what_a_refused_address_is(kb, curator_client):
    def reason(url: str) -> str:
        answer = curator_client.post("/api/v1/catalogs/kb/webhooks", {"url": url}, content_type="application/json")
        return str(answer.json()["error"]["details"]["fields"]["url"][0])

    assert reason("http://169.254.169.254/latest/meta-data/").startswith("169.254.169.254 is the cloud metadata")
    assert reason("http://[::1]:8199/x").startswith("::1 is a loopback address")
    assert reason("http://[::ffff:10.0.0.1]/x").startswith("::ffff:a00:1 is a private address (it leads to 10.0.0.1)")
    assert reason("http://localhost:8199/x").startswith("localhost resolves to 127.0.0.1: 127.0.0.1 is a loopback")
    assert reason("http://[fd00:ec2::254]/x").startswith("fd00:ec2::254 is the cloud metadata address")


def test_the_command_refuses_an_endpoint_inside_in_one_line_and_stores_nothing(kb):
    with pytest.raises(CommandError) as refused:
        call_command("webhook_endpoint", "create", "--catalog", "kb", "--url", "http://169.254.169.254/latest/")

    message = str(refused.value)
    assert message.startswith("url: 169.254.169.254 is the cloud metadata address") and "\n" not in message
    _nothing_stored()


def test_the_admin_refuses_to_move_an_endpoint_inside_and_changes_nothing(kb, client, cora):
    issued = endpoint_create(catalog=kb.catalog, url="https://hooks.example.com/in", by=cora)
    client.force_login(person("ada", "curator", is_staff=True, is_superuser=True))

    page = client.post(f"/admin/approvals/webhookendpoint/{issued.endpoint.pk}/change/", {
        "url": "http://[::1]:8199/x", "description": "", "event_types": "approval.decided",
        "active": "on", "accepts_decisions": "on"})

    assert page.status_code == 200 and "::1 is a loopback address" in page.content.decode()
    issued.endpoint.refresh_from_db()
    assert issued.endpoint.url == "https://hooks.example.com/in"
    assert not AuditEntry.objects.filter(action="webhook.endpoint_updated").exists()


def test_the_service_refuses_a_change_of_url_inside_but_lets_an_endpoint_inside_be_disabled(kb, cora):
    issued = endpoint_create(catalog=kb.catalog, url="https://hooks.example.com/in", by=cora)
    with pytest.raises(ValidationError) as refused:
        endpoint_update(endpoint_id=issued.endpoint.pk, by=cora, url="http://10.0.0.5/in")
    assert "10.0.0.5 is a private address" in str(refused.value.message_dict["url"])

    stored_before = _stored_inside(kb, "http://10.0.0.5/in")  # registered before the rule
    disabled = endpoint_update(endpoint_id=stored_before.pk, by=cora, active=False)
    assert disabled.active is False


def _stored_inside(kb, url: str) -> WebhookEndpoint:
    """An endpoint stored before URLs were checked (as an older Lectern stored them)."""
    return WebhookEndpoint.objects.create(catalog=kb.catalog, url=url, secret_sealed=_sealed(), secret_hint="whsec_…")


def _sealed() -> str:
    return sealing.seal(new_secret())


@pytest.mark.parametrize("spelling", ["127.0.0.1", "2130706433", "0x7f.1"])
def test_an_endpoint_stored_inside_before_the_rule_is_refused_at_delivery_and_says_why(kb, agent, client, spelling):
    with Receiver() as receiver:
        endpoint = _stored_inside(kb, receiver.url.replace("127.0.0.1", spelling))  # loopback, not allowed here
        raised(agent, kb.vault)

        refused = delivery_attempt(delivery_id=WebhookDelivery.objects.get().pk)

        assert receiver.received == []
    assert refused is not None and refused.status == "failed" and refused.attempts == 1  # no retry can help
    assert refused.last_status_code is None and refused.last_response == ""
    assert refused.last_error.startswith("refused: 127.0.0.1 is a loopback address")
    assert refused.history[0]["error"] == refused.last_error

    client.force_login(person("ada", "curator", is_staff=True, is_superuser=True))
    page = client.get(f"/admin/approvals/webhookendpoint/{endpoint.pk}/change/").content.decode()
    assert "Deliveries are refused: 127.0.0.1 is a loopback address" in page


def test_loopback_is_reached_only_where_the_setting_allows_it_checked_again_at_each_delivery(kb, agent, cora,
                                                                                              rita, settings):
    settings.LECTERN_OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    with Receiver() as receiver:
        named = receiver.url.replace("127.0.0.1", "localhost")  # resolved: to 127.0.0.1 here
        endpoint_create(catalog=kb.catalog, url=named, by=cora)
        request_decide(request_id=raised(agent, kb.vault), reviewer=rita, verdict="approve")
        first, second = WebhookDelivery.objects.order_by("pk")  # requested, decided

        delivered = delivery_attempt(delivery_id=first.pk)
        settings.LECTERN_OUTBOUND_ALLOWED_NETWORKS = []  # the operator takes the allowance back
        refused = delivery_attempt(delivery_id=second.pk)

        (received,) = receiver.wait_for(1)
    assert delivered is not None and delivered.status == "delivered"
    assert received.headers["host"] == named.split("/")[2]  # the name, though the checked address was dialled
    assert refused is not None and refused.status == "failed"
    assert refused.last_error.startswith("refused: localhost resolves to 127.0.0.1: 127.0.0.1 is a loopback")


def test_the_deliveries_api_shows_only_a_short_excerpt_of_an_answer(kb, agent, curator_client, cora, settings):
    settings.LECTERN_OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    with Receiver(answers=(500,)) as receiver:  # it answers with 5,000 characters
        endpoint_create(catalog=kb.catalog, url=receiver.url, by=cora)
        raised(agent, kb.vault)
        delivery_attempt(delivery_id=WebhookDelivery.objects.get().pk)

    (listed,) = curator_client.get("/api/v1/catalogs/kb/webhooks/deliveries").json()
    assert listed["last_status_code"] == 500 and listed["last_response"].startswith("answer 500 xxx")
    assert len(listed["last_response"]) == RESPONSE_KEPT_CHARS <= 200
