"""Raising requests is idempotent: never two pending for the same source, agent and
content, even when read paths raise one at the same moment; by hand, a curator or the
agent itself may ask again after a rejection."""

from __future__ import annotations

import pytest

from approvals.models import CONTEXT_MAX_CHARS, ApprovalRequest
from approvals.selectors.gate import injection_decisions
from approvals.services.decisions import request_decide
from approvals.services.requests import RaiseItem, request_raise, requests_raise
from catalog.errors import ApplicationError
from catalog.models import AuditEntry
from tests.approvals.builders import raised
from tests.approvals.concurrency import Holder, Session, waiting_on_a_lock

pytestmark = pytest.mark.django_db


def item(source) -> RaiseItem:
    return RaiseItem(source_id=source.pk, fingerprint=source.fingerprint)


def test_raising_twice_gives_the_same_pending_request_and_audits_it_once(kb, agent):
    first = requests_raise(agent=agent, items=[item(kb.vault)], via="search", context="q")
    second = requests_raise(agent=agent, items=[item(kb.vault)], via="enrichment", context="other")

    assert first == second == {kb.vault.pk: ApprovalRequest.objects.get().pk}
    assert AuditEntry.objects.filter(action="request.raised").count() == 1
    entry = AuditEntry.objects.get(action="request.raised")
    assert (entry.actor_kind, entry.actor_name, entry.agent_id) == ("agent", "bot", agent.pk)


def test_the_context_is_bounded(kb, agent):
    requests_raise(agent=agent, items=[item(kb.vault)], via="search", context="x" * 5000)

    context = ApprovalRequest.objects.get().context
    assert len(context) == CONTEXT_MAX_CHARS and context.endswith("…")


def test_one_request_per_agent(kb, agent, other_agent):
    raised(agent, kb.vault)
    raised(other_agent, kb.vault)

    assert sorted(ApprovalRequest.objects.values_list("agent__name", flat=True)) == ["bot", "other-bot"]


@pytest.mark.django_db(transaction=True)
def test_two_read_paths_raising_at_once_raise_one_request(kb, agent):
    # given one read path's request inserted, its transaction still open
    first = Holder(lambda: requests_raise(agent=agent, items=[item(kb.vault)], via="enrichment")).hold()
    # when another raises the same meanwhile, it waits on that row
    second = Session(lambda: requests_raise(agent=agent, items=[item(kb.vault)], via="search"))
    second.start()
    waiting_on_a_lock(second)

    ids = first.release()

    # then both name the one request
    assert second.outcome() == ids
    assert ApprovalRequest.objects.count() == 1
    assert ApprovalRequest.objects.get().raised_via == "enrichment"
    assert AuditEntry.objects.filter(action="request.raised").count() == 1


def test_by_hand_the_agent_may_ask_again_after_a_rejection(kb, agent, rita):
    rejected = raised(agent, kb.vault)
    request_decide(request_id=rejected, reviewer=rita, verdict="reject")

    again = request_raise(source=kb.vault, agent=agent, by=agent, context="please: the rotation runbook")

    assert again.pk != rejected and (again.state, again.raised_via) == ("pending", "manual")
    decision = injection_decisions(agent=agent, sources=[kb.vault])[kb.vault.pk]
    assert (decision.state, decision.request_id) == ("pending", again.pk)


def test_by_hand_only_a_curator_asks_for_another_agent(kb, agent, other_agent, cora, rita):
    with pytest.raises(ApplicationError) as refused:
        request_raise(source=kb.vault, agent=agent, by=other_agent)
    assert refused.value.code == "not_curator"
    with pytest.raises(ApplicationError):
        request_raise(source=kb.vault, agent=agent, by=rita)
    assert not ApprovalRequest.objects.exists()

    request = request_raise(source=kb.vault, agent=agent, by=cora)

    assert AuditEntry.objects.get(request_id=request.pk).actor_name == "cora"
