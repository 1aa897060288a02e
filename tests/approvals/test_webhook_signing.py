"""Standard Webhooks signatures (pure): the spec's published example, interoperation with
the standardwebhooks verifier, and every way a received message is refused."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from approvals.channels.webhooks.delivery import backoff
from approvals.channels.webhooks.signing import (
    Refusal,
    matching_secret,
    new_secret,
    signature,
    signed_headers,
    signed_parts,
)

# The example of the Standard Webhooks specification and its reference libraries.
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SPEC_AT = datetime.fromtimestamp(1614265330, tz=UTC)
SPEC_BODY = '{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def test_the_specification_example_signs_to_its_published_signature():
    assert signature(secret=SPEC_SECRET, message_id=SPEC_ID, at=SPEC_AT, body=SPEC_BODY) == SPEC_SIGNATURE
    headers = signed_headers(secret=SPEC_SECRET, message_id=SPEC_ID, at=SPEC_AT, body=SPEC_BODY)
    assert headers == {"webhook-id": SPEC_ID, "webhook-timestamp": "1614265330", "webhook-signature": SPEC_SIGNATURE}


def test_the_specification_example_is_accepted_and_a_tampered_body_is_not():
    headers = signed_headers(secret=SPEC_SECRET, message_id=SPEC_ID, at=SPEC_AT, body=SPEC_BODY)
    signed = signed_parts(headers, now=SPEC_AT + timedelta(minutes=4))
    assert matching_secret(secrets_=[new_secret(), SPEC_SECRET], headers=headers, signed=signed,
                           body=SPEC_BODY.encode()) == 1
    with pytest.raises(Refusal) as refused:
        matching_secret(secrets_=[SPEC_SECRET], headers=headers, signed=signed, body=b'{"test": 2432232315}')
    assert refused.value.code == "bad_signature"


def test_what_lectern_signs_the_standardwebhooks_verifier_accepts():
    secret, now = new_secret(), datetime.now(tz=UTC)
    body = '{"type": "approval.requested", "data": {"excerpt": "naïve ✓"}}'
    headers = signed_headers(secret=secret, message_id="msg_1", at=now, body=body)
    assert Webhook(secret).verify(body.encode(), headers) == {"type": "approval.requested",
                                                              "data": {"excerpt": "naïve ✓"}}
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body.replace("requested", "decided").encode(), headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(body.encode(), headers)


def test_secrets_are_whsec_base64_of_32_random_bytes():
    first, second = new_secret(), new_secret()
    assert first.startswith("whsec_") and first != second
    assert len(base64.b64decode(first.removeprefix("whsec_"), validate=True)) == 32


@pytest.mark.parametrize(("offset", "accepted"), [(timedelta(0), True), (timedelta(minutes=5), True),
                                                  (timedelta(minutes=-5), True),
                                                  (timedelta(minutes=5, seconds=1), False),
                                                  (timedelta(minutes=-5, seconds=-1), False)])
def test_a_timestamp_more_than_five_minutes_off_either_way_is_stale(offset, accepted):
    headers = signed_headers(secret=SPEC_SECRET, message_id="m", at=NOW + offset, body="{}")
    if accepted:
        assert signed_parts(headers, now=NOW).at == NOW + offset
    else:
        with pytest.raises(Refusal) as refused:
            signed_parts(headers, now=NOW)
        assert refused.value.code == "stale_timestamp"


@pytest.mark.parametrize(("headers", "code"), [
    ({}, "missing_signature"),
    ({"webhook-id": "m", "webhook-timestamp": "1"}, "missing_signature"),
    ({"webhook-id": "m", "webhook-timestamp": "soon", "webhook-signature": "v1,x"}, "stale_timestamp"),
    ({"webhook-id": "m", "webhook-timestamp": "1e9", "webhook-signature": "v1,x"}, "stale_timestamp"),
    ({"webhook-id": "m" * 256, "webhook-timestamp": "1", "webhook-signature": "v1,x"}, "bad_signature"),
])
def test_headers_missing_or_malformed_are_refused(headers, code):
    with pytest.raises(Refusal) as refused:
        signed_parts(headers, now=NOW)
    assert refused.value.code == code


@pytest.mark.parametrize("offered", ["v1", "v1,", "v2,{sig}", "V1,{sig}", "v1a,{sig}", "garbage without comma",
                                     "v1,!!!not base64!!!", "{sig}"])
def test_signature_headers_that_match_nothing_are_refused_as_bad_signatures(offered):
    good = signature(secret=SPEC_SECRET, message_id="m", at=NOW, body="{}").partition(",")[2]
    headers = {"webhook-id": "m", "webhook-timestamp": str(int(NOW.timestamp())),
               "webhook-signature": offered.format(sig=good)}
    with pytest.raises(Refusal) as refused:
        matching_secret(secrets_=[SPEC_SECRET], headers=headers, signed=signed_parts(headers, now=NOW), body=b"{}")
    assert refused.value.code == "bad_signature"


def test_any_one_of_several_signatures_may_match_and_a_body_not_utf8_never_does():
    headers = signed_headers(secret=SPEC_SECRET, message_id="m", at=NOW, body="{}")
    headers["webhook-signature"] = "v1,bm9wZQ== " + headers["webhook-signature"]
    signed = signed_parts(headers, now=NOW)
    assert matching_secret(secrets_=[SPEC_SECRET], headers=headers, signed=signed, body=b"{}") == 0
    with pytest.raises(Refusal):
        matching_secret(secrets_=[SPEC_SECRET], headers=headers, signed=signed, body=b"\xff{}")


def test_backoff_doubles_up_to_the_cap_with_half_of_each_step_random():
    low = [backoff(n, base=30, cap=3600, rand=lambda: 0.0).total_seconds() for n in range(1, 10)]
    high = [backoff(n, base=30, cap=3600, rand=lambda: 1.0).total_seconds() for n in range(1, 10)]
    assert high == [30, 60, 120, 240, 480, 960, 1920, 3600, 3600]
    assert low == [h / 2 for h in high]
    assert backoff(3, base=30, cap=3600, rand=lambda: 0.5).total_seconds() == 90
