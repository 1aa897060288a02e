"""Webhook events out, to a real HTTP receiver on 127.0.0.1: what is sent and how it is
signed (checked with the standardwebhooks verifier), retries with backoff driven by a
controlled `now` (never a sleep), the attempts' history, and no event lost or sent
for what did not commit."""

from __future__ import annotations

import json
import logging
import random
import socket
import urllib.error
import urllib.request
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from approvals.channels.models import WebhookDelivery, WebhookEndpoint, WebhookEvent
from approvals.channels.webhooks import delivery as delivery_module
from approvals.channels.webhooks.delivery import claim_duration, deliveries_send_due, delivery_attempt
from approvals.channels.webhooks.endpoints import endpoint_create, endpoint_update
from approvals.models import ApprovalRequest
from approvals.services.decisions import request_decide
from approvals.services.expiry import approvals_expire
from approvals.services.policies import policy_create
from approvals.services.revocation import approval_revoke
from catalog.models import AuditEntry
from tests.approvals.builders import approved, document, raised
from tests.approvals.receiver import Receiver
from tests.factories import import_documents

# Every receiver here listens on 127.0.0.1 (tests/approvals/test_webhook_outbound.py tests the refusal).
pytestmark = pytest.mark.usefixtures("outbound_to_loopback")


@pytest.fixture
def receiver():
    with Receiver() as running:
        yield running


@pytest.fixture
def hook(kb, cora, receiver):
    """An endpoint of catalog kb pointing at the receiver, which verifies with its secret."""
    issued = endpoint_create(catalog=kb.catalog, url=receiver.url, by=cora)
    receiver.secret = issued.secret
    return issued


def attempt(*, delivery_id: int, now=None) -> WebhookDelivery:
    """An attempt the test expects to be made (delivery_attempt answers None when not)."""
    made = delivery_attempt(delivery_id=delivery_id, now=now)
    assert made is not None, "the delivery was not claimed"
    return made


def _only_delivery() -> WebhookDelivery:
    (delivery,) = WebhookDelivery.objects.select_related("event")
    return delivery


def test_a_raised_request_is_delivered_signed_with_its_payload_and_no_content(kb, agent, hook, receiver):
    request_id = raised(agent, kb.vault, via="enrichment")
    delivery = _only_delivery()

    sent = attempt(delivery_id=delivery.pk)

    (received,) = receiver.wait_for(1)
    assert received.verified is True
    assert received.headers["webhook-id"] == delivery.event.message_id
    assert received.headers["content-type"] == "application/json"
    body = Webhook(hook.secret).verify(received.body, received.headers)
    assert body["type"] == "approval.requested"
    data = body["data"]
    assert data["request_id"] == request_id and data["state"] == "pending"
    assert (data["catalog"], data["source"], data["agent"]) == ("kb", "vault", "bot")
    assert data["fingerprint"] == kb.vault.fingerprint and data["raised_via"] == "enrichment"
    assert data["decision_path"] == f"/api/v1/approvals/{request_id}/decision"
    assert "Rotate the vault keys" not in received.body.decode()  # the source's text never travels
    assert sent.status == "delivered" and sent.attempts == 1 and sent.last_status_code == 200
    assert sent.delivered_at is not None and sent.next_attempt_at is None
    assert len(sent.last_response) == delivery_module.RESPONSE_KEPT_CHARS  # the answer's start, no more


def test_decisions_revocations_and_their_reviewers_are_events_too(kb, agent, hook, receiver, rita):
    request_id = raised(agent, kb.vault)
    request_decide(request_id=request_id, reviewer=rita, verdict="approve", comment="fine by me")
    approval_revoke(request_id=request_id, by=rita, reason="keys leaked")

    assert deliveries_send_due() == 3
    bodies = [Webhook(hook.secret).verify(r.body, r.headers) for r in receiver.wait_for(3)]
    assert [b["type"] for b in bodies] == ["approval.requested", "approval.decided", "approval.revoked"]
    decided, revoked = bodies[1]["data"], bodies[2]["data"]
    assert decided["state"] == "approved" and decided["decision"] == {
        "verdict": "approve", "reviewer": "rita", "comment": "fine by me", "channel": "web", "required": 1}
    assert revoked["state"] == "revoked" and revoked["revocation"] == {"by": "rita", "reason": "keys leaked"}


def test_a_content_change_and_an_expiry_are_events_without_the_text_or_the_diff(kb, agent, hook, receiver, cora,
                                                                               rita):
    policy_create(by=cora, source=kb.vault, lifetime=timedelta(days=1))
    first = approved(agent, kb.vault, rita)
    import_documents(catalog=kb.catalog, slug="vault", documents=[document("rotation.md", "Rotate monthly.\n")])
    second = ApprovalRequest.objects.get(state="pending")
    request_decide(request_id=second.pk, reviewer=rita, verdict="approve")
    approvals_expire(now=timezone.now() + timedelta(days=2))

    assert deliveries_send_due() == 6
    bodies = [Webhook(hook.secret).verify(r.body, r.headers) for r in receiver.wait_for(6)]
    assert [(b["type"], b["data"]["request_id"]) for b in bodies] == [
        ("approval.requested", first.pk), ("approval.decided", first.pk), ("approval.lapsed", first.pk),
        ("approval.requested", second.pk), ("approval.decided", second.pk), ("approval.expired", second.pk)]
    lapsed, raised_again = bodies[2]["data"], bodies[3]["data"]
    assert lapsed["lapse"] == {"was": "approved", "new_fingerprint": second.fingerprint}
    assert raised_again["raised_via"] == "reindex" and raised_again["previous_request_id"] == first.pk
    assert all("Rotate" not in r.body.decode() for r in receiver.received)  # neither text nor diff


def test_an_endpoint_gets_only_the_events_it_subscribes_to_and_only_its_catalogs(kb, agent, cora, receiver,
                                                                                   make_catalog, rita):
    other = make_catalog("elsewhere")
    endpoint_create(catalog=other, url=receiver.url, by=cora)
    decided_only = endpoint_create(catalog=kb.catalog, url=receiver.url, by=cora, event_types=["approval.decided"])

    request_decide(request_id=raised(agent, kb.vault), reviewer=rita, verdict="reject")

    (delivery,) = WebhookDelivery.objects.select_related("event")
    assert delivery.endpoint_id == decided_only.endpoint.pk and delivery.event.type == "approval.decided"
    assert json.loads(delivery.event.body)["data"]["state"] == "rejected"


def test_a_failed_attempt_is_retried_with_backoff_until_it_is_delivered(kb, agent, hook, receiver, settings,
                                                                         monkeypatch):
    settings.LECTERN_WEBHOOK_BACKOFF_SECONDS = 30
    monkeypatch.setattr(random, "random", lambda: 1.0)  # the jitter at its top: exact times
    receiver.answers.extend([500, 503])
    raised(agent, kb.vault)
    delivery, t0 = _only_delivery(), timezone.now()

    first = attempt(delivery_id=delivery.pk, now=t0)
    assert first.status == "pending" and first.last_status_code == 500 and first.last_error == "HTTP 500"
    assert first.next_attempt_at == t0 + timedelta(seconds=30)

    assert delivery_attempt(delivery_id=delivery.pk, now=t0 + timedelta(seconds=29)) is None  # not due yet
    second = attempt(delivery_id=delivery.pk, now=t0 + timedelta(seconds=30))
    assert second.last_status_code == 503 and second.next_attempt_at == t0 + timedelta(seconds=90)

    third = attempt(delivery_id=delivery.pk, now=t0 + timedelta(seconds=90))
    assert third.status == "delivered" and third.attempts == 3
    assert [(a["attempt"], a["status_code"]) for a in third.history] == [(1, 500), (2, 503), (3, 200)]

    sent = receiver.wait_for(3)
    assert len({r.headers["webhook-id"] for r in sent}) == 1  # one message, however many attempts
    assert [int(r.headers["webhook-timestamp"]) for r in sent] == [
        int((t0 + timedelta(seconds=s)).timestamp()) for s in (0, 30, 90)]  # each attempt signed anew
    assert all(r.verified for r in sent)
    assert delivery_attempt(delivery_id=delivery.pk, now=t0 + timedelta(hours=1)) is None  # settled: never again


def test_the_jitter_keeps_each_wait_between_half_and_all_of_its_step(kb, agent, hook, receiver, settings):
    settings.LECTERN_WEBHOOK_BACKOFF_SECONDS = 100
    receiver.answers.append(500)
    raised(agent, kb.vault)
    t0 = timezone.now()

    failed = attempt(delivery_id=_only_delivery().pk, now=t0)

    assert failed.next_attempt_at is not None
    assert t0 + timedelta(seconds=50) <= failed.next_attempt_at <= t0 + timedelta(seconds=100)


def test_after_the_attempts_allowed_the_delivery_fails_for_good(kb, agent, hook, receiver, settings, caplog):
    settings.LECTERN_WEBHOOK_MAX_ATTEMPTS, settings.LECTERN_WEBHOOK_BACKOFF_SECONDS = 3, 1
    receiver.answers.extend([500, 500, 500, 200])
    raised(agent, kb.vault)
    delivery, now = _only_delivery(), timezone.now()

    for _ in range(3):
        delivery = attempt(delivery_id=delivery.pk, now=now)
        now = delivery.next_attempt_at or now

    assert delivery.status == "failed" and delivery.attempts == 3 and delivery.next_attempt_at is None
    assert deliveries_send_due(now=now + timedelta(days=1)) == 0
    assert len(receiver.received) == 3
    assert "failed for good after 3 attempts" in caplog.text


def test_a_redirect_is_not_followed(kb, agent, cora):
    with Receiver() as target, Receiver(redirect_to="") as redirecting:
        redirecting.redirect_to = target.url
        endpoint_create(catalog=kb.catalog, url=redirecting.url, by=cora)
        raised(agent, kb.vault)

        attempted = attempt(delivery_id=_only_delivery().pk)

        assert attempted.last_status_code == 307 and "redirects are not followed" in attempted.last_error
        assert attempted.status == "pending" and target.received == []


def test_an_unreachable_endpoint_is_a_failed_attempt(kb, agent, cora):
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint_create(catalog=kb.catalog, url=f"http://127.0.0.1:{port}/hooks", by=cora)
    raised(agent, kb.vault)

    attempted = attempt(delivery_id=_only_delivery().pk)

    assert attempted.status == "pending" and attempted.last_status_code is None
    assert "ConnectionRefusedError" in attempted.last_error and attempted.history[0]["status_code"] is None


def test_a_tampered_body_is_refused_by_the_receivers_verification(kb, agent, hook, receiver):
    raised(agent, kb.vault)
    delivery_attempt(delivery_id=_only_delivery().pk)
    (genuine,) = receiver.wait_for(1)
    tampered = genuine.body.replace(b'"pending"', b'"approved"')

    with pytest.raises(WebhookVerificationError):
        Webhook(hook.secret).verify(tampered, genuine.headers)
    # the same, sent over HTTP to the receiver, as something in between would
    forged = urllib.request.Request(receiver.url, data=tampered, method="POST", headers=genuine.headers)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(forged, timeout=10)
    assert refused.value.code == 401 and receiver.wait_for(2)[1].verified is False


def test_a_worker_that_dies_mid_attempt_loses_nothing(kb, agent, hook, receiver, monkeypatch):
    raised(agent, kb.vault)
    delivery, t0 = _only_delivery(), timezone.now()

    def dies(*args, **kwargs):
        raise SystemExit("worker killed")

    with monkeypatch.context() as patch:
        patch.setattr(delivery_module, "post", dies)
        with pytest.raises(SystemExit):
            delivery_attempt(delivery_id=delivery.pk, now=t0)

    assert delivery_attempt(delivery_id=delivery.pk, now=t0 + timedelta(seconds=1)) is None  # still claimed
    retried = attempt(delivery_id=delivery.pk, now=t0 + claim_duration())
    assert retried.status == "delivered" and retried.attempts == 2
    assert receiver.wait_for(1)[0].verified is True


def test_an_attempt_is_claimed_once_however_many_workers_try(kb, agent, hook, receiver):
    raised(agent, kb.vault)
    delivery, now = _only_delivery(), timezone.now()

    results = [delivery_attempt(delivery_id=delivery.pk, now=now) for _ in range(3)]

    assert [r is not None for r in results] == [True, False, False]
    assert len(receiver.received) == 1


def test_an_inactive_endpoint_is_not_sent_to_nor_given_new_events(kb, agent, hook, receiver, cora, rita):
    request_id = raised(agent, kb.vault)
    endpoint_update(endpoint_id=hook.endpoint.pk, by=cora, active=False)

    settled = attempt(delivery_id=_only_delivery().pk)
    request_decide(request_id=request_id, reviewer=rita, verdict="approve")

    assert settled.status == "failed" and "inactive" in settled.last_error and receiver.received == []
    assert WebhookEvent.objects.count() == 1


def test_events_exist_only_for_what_commits_and_are_queued_after_commit(kb, agent, hook, receiver,
                                                                       django_capture_on_commit_callbacks):
    with pytest.raises(RuntimeError), transaction.atomic():
        raised(agent, kb.vault)
        assert WebhookDelivery.objects.count() == 1  # written beside the request, in its transaction
        raise RuntimeError("the read path fails after raising")
    assert not WebhookEvent.objects.exists() and not WebhookDelivery.objects.exists()

    with django_capture_on_commit_callbacks(execute=True):
        raised(agent, kb.vault)
        assert receiver.received == []  # nothing is sent before the commit
    assert receiver.wait_for(1)[0].verified is True  # the queued task (synchronous in tests) sent it
    assert _only_delivery().status == "delivered"


def test_no_endpoint_no_event(kb, agent):
    raised(agent, kb.vault)
    assert not WebhookEvent.objects.exists()


def test_the_secret_is_sealed_at_rest_and_never_audited_or_logged(kb, agent, hook, receiver, caplog):
    caplog.set_level(logging.DEBUG)
    receiver.answers.append(500)
    raised(agent, kb.vault)
    delivery_attempt(delivery_id=_only_delivery().pk)

    stored = WebhookEndpoint.objects.get()
    key = hook.secret.removeprefix("whsec_")
    assert key not in stored.secret_sealed and stored.secret_hint == "whsec_…" + hook.secret[-4:]
    assert not any(key in json.dumps(e.payload) for e in AuditEntry.objects.all())
    assert key not in caplog.text


def test_a_secret_sealed_under_another_secret_key_opens_with_it_among_the_fallbacks(kb, agent, hook, receiver,
                                                                                    settings):
    raised(agent, kb.vault)
    delivery, old_key = _only_delivery(), settings.SECRET_KEY
    settings.SECRET_KEY = "another-" + "k" * 50

    refused = attempt(delivery_id=delivery.pk)
    assert refused.status == "pending" and "SECRET_KEY_FALLBACKS" in refused.last_error and not receiver.received

    settings.SECRET_KEY_FALLBACKS = [old_key]
    assert attempt(delivery_id=delivery.pk, now=refused.next_attempt_at).status == "delivered"
    assert receiver.wait_for(1)[0].verified is True
