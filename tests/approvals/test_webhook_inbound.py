"""Signed decisions coming back: POST /api/v1/approvals/{id}/decision, accepted only with
a Standard Webhooks signature made with the secret of an endpoint of the request's
catalog, its body naming the request and the content it decides; refused (and logged,
without secrets) when unsigned, badly signed, stale, replayed (a message id is taken
once, whatever became of it), naming another request or other content, or sent with a
session or a token instead. On a refusal nothing changes but the message id spent."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.channels.models import InboundWebhookMessage
from approvals.channels.webhooks.delivery import INBOUND_IDS_KEPT, deliveries_send_due
from approvals.channels.webhooks.endpoints import endpoint_create, endpoint_rotate_secret, endpoint_update
from approvals.channels.webhooks.signing import new_message_id, new_secret, signed_headers
from approvals.models import ApprovalRequest, Decision
from approvals.selectors.gate import injection_decisions
from approvals.services.policies import policy_create
from catalog.audit.log import audit_verify
from catalog.models import AuditEntry
from tests.approvals.builders import document, raised
from tests.approvals.receiver import Receiver
from tests.factories import agent_with_token, import_documents, person


@pytest.fixture
def secret(kb, cora):
    return endpoint_create(catalog=kb.catalog, url="https://reviews.example.com/hooks", by=cora).secret


@pytest.fixture
def post(client):
    """post(request_id, body, secret=..., at=..., message_id=..., headers=...) -> response."""

    def send(request_id, body, *, secret=None, at=None, message_id=None, headers=None, **extra):
        text = body if isinstance(body, str) else json.dumps(body)
        signed = {} if secret is None else signed_headers(
            secret=secret, message_id=message_id or new_message_id(), at=at or timezone.now(), body=text)
        return client.post(f"/api/v1/approvals/{request_id}/decision", data=text, content_type="application/json",
                           headers={**signed, **(headers or {})}, **extra)

    return send


def _state(request_id):
    return ApprovalRequest.objects.get(pk=request_id).state


def bound(request_id, verdict="approve", reviewer="rita", **extra):
    """A decision body naming its request and the content that request is for."""
    fingerprint = ApprovalRequest.objects.values_list("fingerprint", flat=True).get(pk=request_id)
    return {"request_id": request_id, "fingerprint": fingerprint, "verdict": verdict, "reviewer": reviewer, **extra}


def test_a_signed_decision_decides_the_request_as_the_reviewer_named(kb, agent, secret, rita, post):
    request_id = raised(agent, kb.vault)

    answer = post(request_id, bound(request_id, comment="checked"), secret=secret,
                  message_id="msg_decision_1")

    assert answer.status_code == 200, answer.content
    assert answer.json() == {"request_id": request_id, "state": "approved", "approvals": 1}
    decision = Decision.objects.get(request_id=request_id)
    assert (decision.reviewer, decision.channel, decision.comment) == (rita, "webhook", "checked")
    approved, received = AuditEntry.objects.filter(request_id=request_id).order_by("seq")[1:3]
    assert (approved.action, approved.actor_name, approved.payload["channel"]) == ("request.approved", "rita",
                                                                                  "webhook")
    assert (received.action, received.actor_kind) == ("decision.received", "channel")
    assert received.actor_name.startswith("webhook:") and received.payload["webhook_id"] == "msg_decision_1"
    assert received.payload["reviewer"] == "rita"
    assert audit_verify().broken is None
    assert injection_decisions(agent=agent, sources=[kb.vault])[kb.vault.pk].allowed  # the gate lets it through


@pytest.mark.parametrize(("tamper", "code"), [
    ("unsigned", "missing_signature"),
    ("wrong_secret", "bad_signature"),
    ("tampered_body", "bad_signature"),
    ("stale", "stale_timestamp"),
    ("future", "stale_timestamp"),
])
def test_a_message_not_signed_as_it_should_be_is_refused_and_logged(kb, agent, secret, rita, post, caplog, tamper,
                                                                     code):
    request_id = raised(agent, kb.vault)
    body = bound(request_id)
    kwargs = {
        "unsigned": {},
        "wrong_secret": {"secret": new_secret()},
        "tampered_body": {"secret": secret},
        "stale": {"secret": secret, "at": timezone.now() - timedelta(minutes=5, seconds=30)},
        "future": {"secret": secret, "at": timezone.now() + timedelta(minutes=6)},
    }[tamper]
    if tamper == "tampered_body":  # signed for a rejection, sent as an approval
        signed = signed_headers(secret=secret, message_id="m1", at=timezone.now(),
                                body=json.dumps(bound(request_id, "reject")))
        kwargs = {"headers": signed}

    answer = post(request_id, body, **kwargs)

    assert answer.status_code == 401 and answer.json()["error"]["code"] == code
    assert _state(request_id) == "pending" and not Decision.objects.exists()
    assert not InboundWebhookMessage.objects.exists()
    assert f"refused ({code})" in caplog.text
    assert secret.removeprefix("whsec_") not in caplog.text and "v1," not in caplog.text


def test_a_replayed_message_is_refused_however_valid_its_signature(kb, agent, secret, cora, rita, rob, post,
                                                                   caplog):
    policy_create(by=cora, source=kb.vault, required_approvals=2)
    request_id = raised(agent, kb.vault)
    at = timezone.now()
    body = bound(request_id)
    assert post(request_id, body, secret=secret, at=at, message_id="msg_once").status_code == 200

    again = post(request_id, body, secret=secret, at=at, message_id="msg_once")
    other_reviewer = post(request_id, bound(request_id, reviewer="rob"), secret=secret, message_id="msg_once")

    for answer in (again, other_reviewer):
        assert answer.status_code == 409 and answer.json()["error"]["code"] == "replayed"
    request = ApprovalRequest.objects.get(pk=request_id)
    assert (request.state, request.approvals) == ("pending", 1)  # rob's approval, replayed under rita's id, counted not
    assert "refused (replayed)" in caplog.text


def test_a_message_refused_by_the_service_has_spent_its_id(kb, agent, secret, rita, post):
    request_id = raised(agent, kb.vault)
    person("ned")  # no reviewer
    refused = post(request_id, bound(request_id, reviewer="ned"), secret=secret, message_id="msg_retry")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "not_reviewer"

    again = post(request_id, bound(request_id), secret=secret, message_id="msg_retry")

    assert again.status_code == 409 and again.json()["error"]["code"] == "replayed"
    assert _state(request_id) == "pending" and not Decision.objects.exists()
    assert post(request_id, bound(request_id), secret=secret, message_id="msg_new").status_code == 200


def test_a_decided_request_answers_409_from_the_service(kb, agent, secret, rita, rob, post):
    request_id = raised(agent, kb.vault)
    assert post(request_id, bound(request_id, "reject"), secret=secret).status_code == 200

    late = post(request_id, bound(request_id, reviewer="rob"), secret=secret)

    assert late.status_code == 409 and late.json()["error"]["code"] == "request_decided"
    assert _state(request_id) == "rejected"


def test_an_unknown_request_is_404_to_a_signed_caller_only(kb, secret, post):
    body = {"request_id": 999999, "fingerprint": "0" * 64, "verdict": "approve", "reviewer": "rita"}
    signed = post(999999, body, secret=secret)
    unsigned = post(999999, body, secret=new_secret())

    assert signed.status_code == 404 and signed.json()["error"]["code"] == "not_found"
    assert unsigned.status_code == 401 and unsigned.json()["error"]["code"] == "bad_signature"


def test_only_the_secret_of_an_endpoint_of_the_requests_catalog_that_accepts_decisions_signs(
        kb, agent, cora, rita, post, make_catalog):
    request_id = raised(agent, kb.vault)
    foreign = endpoint_create(catalog=make_catalog("other"), url="https://x.example.com", by=cora).secret
    events_only = endpoint_create(catalog=kb.catalog, url="https://y.example.com", by=cora, accepts_decisions=False)
    inactive = endpoint_create(catalog=kb.catalog, url="https://z.example.com", by=cora)
    endpoint_update(endpoint_id=inactive.endpoint.pk, by=cora, active=False)
    rotated = endpoint_create(catalog=kb.catalog, url="https://w.example.com", by=cora)
    fresh = endpoint_rotate_secret(endpoint_id=rotated.endpoint.pk, by=cora).secret

    body = bound(request_id)
    for refused in (foreign, events_only.secret, inactive.secret, rotated.secret):
        assert post(request_id, body, secret=refused).status_code == 401
    assert post(request_id, body, secret=fresh).status_code == 200


def test_a_session_or_an_agent_token_is_no_credential_here(kb, agent, secret, rita, post, client):
    request_id = raised(agent, kb.vault)
    _, token = agent_with_token(name="curious", catalogs=[kb.catalog], is_curator=True)
    client.force_login(rita)

    with_session = post(request_id, bound(request_id))
    with_token = post(request_id, bound(request_id),
                      headers={"Authorization": f"Bearer {token}"})

    for answer in (with_session, with_token):
        assert answer.status_code == 401 and answer.json()["error"]["code"] == "missing_signature"
    assert _state(request_id) == "pending"


@pytest.mark.parametrize(("change", "field"), [
    ({"verdict": "maybe"}, "verdict"),
    ({"reviewer": None}, "reviewer"),
    ({"reviewer": "nobody"}, "reviewer"),
    ({"comment": "x" * 4001}, "comment"),
    ({"request_id": None}, "request_id"),
    ({"fingerprint": None}, "fingerprint"),
    ({"request_id": "x"}, "request_id"),
])
def test_a_signed_but_invalid_body_is_400_decides_nothing_and_spends_its_id(kb, agent, secret, rita, post, change,
                                                                            field):
    request_id = raised(agent, kb.vault)
    body = {name: value for name, value in {**bound(request_id), **change}.items() if value is not None}

    answer = post(request_id, body, secret=secret, message_id="msg_invalid")

    assert answer.status_code == 400 and field in answer.json()["error"]["details"]["fields"]
    assert _state(request_id) == "pending" and not Decision.objects.exists()
    assert InboundWebhookMessage.objects.get().webhook_id == "msg_invalid"


def test_four_eyes_holds_on_this_channel_too(kb, agent, secret, cora, post):
    reviewer = person("carl", "curator", "reviewer")
    policy_create(by=reviewer, source=kb.vault, four_eyes=True)
    request_id = raised(agent, kb.vault)

    answer = post(request_id, bound(request_id, reviewer="carl"), secret=secret)

    assert answer.status_code == 403 and answer.json()["error"]["code"] == "four_eyes"


def test_message_ids_are_forgotten_a_day_after_they_were_received(kb, agent, secret, rita, post):
    request_id = raised(agent, kb.vault)
    post(request_id, bound(request_id), secret=secret)
    received = InboundWebhookMessage.objects.get().received_at

    deliveries_send_due(now=received + INBOUND_IDS_KEPT - timedelta(seconds=1))
    assert InboundWebhookMessage.objects.exists()
    deliveries_send_due(now=received + INBOUND_IDS_KEPT + timedelta(seconds=1))
    assert not InboundWebhookMessage.objects.exists()


def test_refusals_are_warnings_in_the_log(kb, agent, secret, post, caplog):
    caplog.set_level(logging.WARNING, logger="approvals.channels.webhooks.inbound")
    request_id = raised(agent, kb.vault)
    post(request_id, bound(request_id), secret=new_secret(), message_id="msg_forged\nfake")

    (record,) = [r for r in caplog.records if r.name == "approvals.channels.webhooks.inbound"]
    assert record.levelno == logging.WARNING and "'msg_forged\\nfake'" in record.getMessage()


def test_a_signed_decision_refused_on_its_request_cannot_be_replayed_on_another(kb, agent, other_agent, secret,
                                                                                rita, rob, post):
    # given: request 1 already rejected, and a signed rejection of it that the service refuses
    first, second = raised(agent, kb.vault), raised(other_agent, kb.vault)
    assert post(first, {"request_id": first, "fingerprint": kb.vault.fingerprint, "verdict": "reject",
                        "reviewer": "rita"}, secret=secret).status_code == 200
    at = timezone.now()
    body = {"request_id": first, "fingerprint": kb.vault.fingerprint, "verdict": "reject", "reviewer": "rob"}
    refused = post(first, body, secret=secret, at=at, message_id="msg_for_first")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "request_decided"

    # when: the same message, byte for byte, is sent to the other request
    replayed = post(second, body, secret=secret, at=at, message_id="msg_for_first")

    # then: refused, and the other request is untouched
    assert replayed.status_code == 409 and replayed.json()["error"]["code"] == "replayed"
    assert _state(second) == "pending" and not Decision.objects.filter(request_id=second).exists()


def test_a_body_naming_another_request_is_refused_and_spends_its_id(kb, agent, other_agent, secret, rita, post):
    mine, other = raised(agent, kb.vault), raised(other_agent, kb.vault)

    answer = post(other, bound(mine), secret=secret, message_id="msg_elsewhere")

    assert answer.status_code == 400 and answer.json()["error"]["code"] == "request_mismatch"
    assert "request_id" in answer.json()["error"]["details"]["fields"]
    assert _state(mine) == _state(other) == "pending" and not Decision.objects.exists()
    where_it_belongs = post(mine, bound(mine), secret=secret, message_id="msg_elsewhere")
    assert where_it_belongs.status_code == 409 and where_it_belongs.json()["error"]["code"] == "replayed"


def test_a_body_naming_other_content_is_refused(kb, agent, secret, rita, post):
    request_id = raised(agent, kb.vault)

    answer = post(request_id, bound(request_id, fingerprint="f" * 64), secret=secret)

    assert answer.status_code == 409 and answer.json()["error"]["code"] == "fingerprint_mismatch"
    assert answer.json()["error"]["details"]["fingerprint"] == kb.vault.fingerprint
    assert _state(request_id) == "pending" and not Decision.objects.exists()


def test_a_decision_on_content_that_changed_is_refused_even_when_signed_for_the_new_content(kb, agent, secret, rita,
                                                                                           post):
    old = raised(agent, kb.vault)
    import_documents(catalog=kb.catalog, slug="vault", documents=[document("rotation.md", "Rotate weekly.\n")])
    new = ApprovalRequest.objects.get(previous_id=old).pk

    signed_for_new = post(old, {**bound(new), "request_id": old}, secret=secret)
    signed_for_old = post(old, bound(old), secret=secret)

    assert signed_for_new.status_code == 409 and signed_for_new.json()["error"]["code"] == "fingerprint_mismatch"
    assert signed_for_old.status_code == 409 and signed_for_old.json()["error"]["code"] == "request_decided"
    assert (_state(old), _state(new)) == ("lapsed", "pending")


def test_the_receiver_answers_the_requested_event_with_a_decision_lectern_accepts(kb, agent, cora, rita, client,
                                                                                 outbound_to_loopback):
    with Receiver() as receiver:
        issued = endpoint_create(catalog=kb.catalog, url=receiver.url, by=cora, event_types=["approval.requested"])
        receiver.secret = issued.secret
        request_id = raised(agent, kb.vault, via="enrichment")
        deliveries_send_due()
        (event,) = receiver.wait_for(1)

    path, body, headers = receiver.decision_for(event, verdict="approve", reviewer="rita", message_id="msg_rt")
    answer = client.post(path, data=body, content_type="application/json", headers=headers)

    assert answer.status_code == 200, answer.content
    assert answer.json() == {"request_id": request_id, "state": "approved", "approvals": 1}
