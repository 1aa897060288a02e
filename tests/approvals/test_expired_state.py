"""The state shown for a request is the gate's: an approval whose time is up (its own
expiry, or a lifetime a policy shortened since) is `expired` in GET /api/v1/approvals,
its `?state=expired` filter, the web queue and its filters, the moment the gate refuses
it, not once the periodic task has marked the row; and an approval that expired before
its content changed stays expired rather than lapsed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from approvals.selectors.gate import injection_decisions
from approvals.serializers import approval_requests_response
from approvals.services.expiry import approvals_expire
from approvals.services.policies import policy_create
from approvals.services.revocation import approval_revoke
from catalog.errors import ApplicationError
from catalog.models import AuditEntry
from catalog.tags import tags_ensure
from tests.approvals.builders import approved, document
from tests.factories import agent_with_token, import_documents

pytestmark = pytest.mark.django_db


@pytest.fixture
def bot(kb):
    agent, token = agent_with_token(name="bot", catalogs=[kb.catalog])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    client.agent = agent  # type: ignore[attr-defined]
    return client


def gate_state(agent, source) -> str:
    return injection_decisions(agent=agent, sources=[source])[source.pk].state


def listed(client, state="") -> dict[int, dict]:
    body = client.get(f"/api/v1/approvals?state={state}").json()
    return {r["id"]: r for r in body["results"]}


def ended(approval: ApprovalRequest, seconds_ago: int) -> ApprovalRequest:
    """The approval as it is `seconds_ago` after its expiry (what the clock would do)."""
    ApprovalRequest.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=seconds_ago))
    approval.refresh_from_db()
    return approval


def test_an_approval_past_its_expiry_is_listed_expired_before_the_task_marks_it(kb, bot, cora, rita):
    # given: an approval for an hour, 86 seconds past its end; the periodic task has not run
    policy_create(by=cora, source=kb.vault, lifetime=timedelta(hours=1))
    approval = ended(approved(bot.agent, kb.vault, rita), seconds_ago=86)
    assert gate_state(bot.agent, kb.vault) == "expired"
    assert ApprovalRequest.objects.get(pk=approval.pk).state == "approved"  # the row, not yet marked

    # then: every listing says what the gate says
    shown = listed(bot)[approval.pk]
    assert (shown["state"], shown["current"]) == ("expired", True)
    assert approval.expires_at is not None
    assert shown["ended_at"] == approval.expires_at.isoformat().replace("+00:00", "Z")
    assert list(listed(bot, "expired")) == [approval.pk]
    assert listed(bot, "approved") == {}
    tool = approval_requests_response(bot.agent, {"state": "expired", "limit": 50, "offset": 0})  # MCP's body
    assert [r["id"] for r in tool["results"]] == [approval.pk] and tool["results"][0]["state"] == "expired"


def test_the_web_queue_shows_and_filters_an_approval_past_its_expiry_as_expired(kb, agent, cora, rita, client_for):
    policy_create(by=cora, source=kb.vault, lifetime=timedelta(hours=1))
    approval = ended(approved(agent, kb.vault, rita), seconds_ago=86)
    browser = client_for(rita)
    queue = reverse("approvals-queue")

    expired = browser.get(queue, {"state": "expired"}, headers={"HX-Request": "true"}).content.decode()
    still_approved = browser.get(queue, {"state": "approved"}, headers={"HX-Request": "true"}).content.decode()
    page = browser.get(reverse("approvals-request", args=[approval.pk])).content.decode()

    row = f'href="{reverse("approvals-request", args=[approval.pk])}"'
    assert row in expired and '<span class="state state-expired">expired</span>' in expired
    assert row not in still_approved
    assert '<span class="state state-expired">expired</span>' in page
    assert "Revoke approval" not in page


def test_an_approval_whose_lifetime_a_policy_shortened_since_is_listed_expired(kb, bot, cora, rita):
    # given: approved forever two hours ago, then a policy gives approvals of the source one hour
    approval = approved(bot.agent, kb.vault, rita)
    ApprovalRequest.objects.filter(pk=approval.pk).update(decided_at=timezone.now() - timedelta(hours=2))
    policy_create(by=cora, source=kb.vault, lifetime=timedelta(hours=1))
    assert gate_state(bot.agent, kb.vault) == "expired"

    assert listed(bot)[approval.pk]["state"] == "expired"
    assert list(listed(bot, "expired")) == [approval.pk]
    assert listed(bot, "approved") == {}

    # and the task marks it, with the moment it ended
    assert approvals_expire() == 1
    approval.refresh_from_db()
    assert approval.decided_at is not None
    assert approval.state == "expired" and approval.ended_at == approval.decided_at + timedelta(hours=1)
    assert listed(bot)[approval.pk]["state"] == "expired"


def test_the_task_records_when_an_approval_ended_not_when_it_noticed(kb, agent, cora, rita):
    policy_create(by=cora, source=kb.vault, lifetime=timedelta(hours=1))
    approval = ended(approved(agent, kb.vault, rita), seconds_ago=86)

    assert approvals_expire() == 1

    approval.refresh_from_db()
    assert (approval.state, approval.ended_at) == ("expired", approval.expires_at)


def test_an_approval_that_expired_and_then_lapsed_stays_expired(kb, bot, cora, rita):
    # given: an approval past its expiry, not yet marked; then the content changes
    policy_create(by=cora, source=kb.vault, lifetime=timedelta(hours=1))
    approval = ended(approved(bot.agent, kb.vault, rita), seconds_ago=86)
    import_documents(catalog=kb.catalog, slug="vault", documents=[document("rotation.md", "Rotate weekly.\n")])

    # then: it expired (when it did), and the request for the new content follows it with the diff
    approval.refresh_from_db()
    assert (approval.state, approval.ended_at) == ("expired", approval.expires_at)
    shown = listed(bot)[approval.pk]
    assert (shown["state"], shown["current"]) == ("expired", False)
    assert list(listed(bot, "expired")) == [approval.pk]
    follower = ApprovalRequest.objects.get(previous=approval)
    assert (follower.state, follower.raised_via) == ("pending", "reindex") and "Rotate weekly" in follower.diff
    actions = list(AuditEntry.objects.filter(request_id=approval.pk).values_list("action", flat=True))
    assert actions[-1] == "request.expired" and "request.lapsed" not in actions


def test_an_unexpired_approval_that_lapses_is_lapsed(kb, bot, cora, rita):
    policy_create(by=cora, source=kb.vault, lifetime=timedelta(hours=1))
    approval = approved(bot.agent, kb.vault, rita)
    import_documents(catalog=kb.catalog, slug="vault", documents=[document("rotation.md", "Rotate weekly.\n")])

    approval.refresh_from_db()
    assert approval.state == "lapsed" and listed(bot)[approval.pk]["state"] == "lapsed"


def test_the_listing_agrees_with_the_gate_whichever_policies_set_the_lifetime(kb, agent, other_agent, cora, rita):
    # given: both agents approved 2 hours ago; a tag policy of 1 hour for `agent` only, a
    # catalog policy of 3 hours for everyone
    (secret,) = tags_ensure(names=["secret"])
    kb.vault.tags.add(secret)
    mine, theirs = approved(agent, kb.vault, rita), approved(other_agent, kb.vault, rita)
    ApprovalRequest.objects.filter(pk__in=[mine.pk, theirs.pk]).update(decided_at=timezone.now() - timedelta(hours=2))
    policy_create(by=cora, tag=secret, agents=[agent], lifetime=timedelta(hours=1))
    policy_create(by=cora, catalog=kb.catalog, lifetime=timedelta(hours=3))

    for who, request in ((agent, mine), (other_agent, theirs)):
        shown = approval_requests_response(who, {"state": "", "limit": 50, "offset": 0})["results"]
        assert [r["state"] for r in shown if r["id"] == request.pk] == [gate_state(who, kb.vault)]
    assert (gate_state(agent, kb.vault), gate_state(other_agent, kb.vault)) == ("expired", "approved")


def test_an_approval_whose_time_is_up_is_not_revoked_but_said_expired(kb, agent, cora, rita):
    policy_create(by=cora, source=kb.vault, lifetime=timedelta(hours=1))
    approval = ended(approved(agent, kb.vault, rita), seconds_ago=86)

    with pytest.raises(ApplicationError) as refused:
        approval_revoke(request_id=approval.pk, by=rita, reason="too late")

    assert refused.value.code == "not_approved" and "expired" in refused.value.message
    assert ApprovalRequest.objects.get(pk=approval.pk).state == "approved"  # the task marks it, not a revocation
