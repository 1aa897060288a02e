"""The gate (approvals.selectors.gate): a governed source reaches an agent only under a live
approval for its current content; the first read that withholds it raises one request."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.selectors.gate import injection_decisions, withheld_sources
from approvals.services.decisions import request_decide
from approvals.services.revocation import approval_revoke
from tests.approvals.builders import gate_raise, raised

pytestmark = pytest.mark.django_db


def decide_for(agent, source, raised_via=None):
    return gate_raise(agent=agent, sources=[source], via=raised_via)[source.pk]


def test_a_governed_source_is_withheld_and_one_request_is_raised_the_first_time(kb, agent):
    listed = decide_for(agent, kb.vault)  # a listing raises nothing
    assert (listed.allowed, listed.state, listed.request_id) == (False, "missing", None)
    assert not ApprovalRequest.objects.exists()

    first = decide_for(agent, kb.vault, raised_via="enrichment")
    again = decide_for(agent, kb.vault, raised_via="select")

    request = ApprovalRequest.objects.get()
    assert (first.state, first.request_id) == ("pending", request.pk)
    assert (again.state, again.request_id) == ("pending", request.pk)
    assert "requires approval" in first.reason and f"request {request.pk}" in first.reason
    assert (request.agent, request.source, request.fingerprint, request.raised_via) == (
        agent, kb.vault, kb.vault.fingerprint, "enrichment")
    assert decide_for(agent, kb.notes, raised_via="enrichment").state == "not_required"


def test_an_approval_lets_the_source_through_for_that_agent_only(kb, agent, other_agent, rita):
    request_id = raised(agent, kb.vault)

    request_decide(request_id=request_id, reviewer=rita, verdict="approve")

    assert decide_for(agent, kb.vault).as_dict() == {"allowed": True, "state": "approved", "reason": "",
                                                     "request_id": request_id}
    assert not decide_for(other_agent, kb.vault).allowed
    assert withheld_sources(agent=agent, catalog_ids=[kb.catalog.pk]) == {}
    assert set(withheld_sources(agent=other_agent, catalog_ids=[kb.catalog.pk])) == {kb.vault.pk}
    assert not decide_for(None, kb.vault).allowed  # people are never approved


def test_a_rejection_stands_and_raises_nothing_new(kb, agent, rita):
    request_id = raised(agent, kb.vault)
    request_decide(request_id=request_id, reviewer=rita, verdict="reject", comment="not for bots")

    decision = decide_for(agent, kb.vault, raised_via="enrichment")

    assert (decision.allowed, decision.state, decision.request_id) == (False, "rejected", request_id)
    assert ApprovalRequest.objects.count() == 1


def test_a_revoked_approval_stops_at_once(kb, agent, rita):
    request_id = raised(agent, kb.vault)
    request_decide(request_id=request_id, reviewer=rita, verdict="approve")

    approval_revoke(request_id=request_id, by=rita, reason="leaked")

    decision = decide_for(agent, kb.vault, raised_via="enrichment")
    assert (decision.allowed, decision.state, decision.request_id) == (False, "revoked", request_id)


def test_an_expired_approval_is_refused_by_its_timestamp_and_a_new_request_follows(kb, agent, rita):
    request_id = raised(agent, kb.vault)
    request_decide(request_id=request_id, reviewer=rita, verdict="approve")
    ApprovalRequest.objects.filter(pk=request_id).update(expires_at=timezone.now() - timedelta(seconds=1))

    decision = decide_for(agent, kb.vault, raised_via="enrichment")

    new = ApprovalRequest.objects.get(state="pending")
    assert (decision.allowed, decision.state, decision.request_id) == (False, "pending", new.pk)
    assert f"the approval of request {request_id} expired" in decision.reason
    assert new.raised_via == "enrichment"


@pytest.mark.parametrize("count", [1, 20])
def test_the_gate_asks_the_database_once_whatever_the_number_of_sources(kb, agent, count):
    sources = [kb.vault, kb.notes] * count
    with CaptureQueriesContext(connection) as queries:
        injection_decisions(agent=agent, sources=sources)
    assert len(queries) == 1
