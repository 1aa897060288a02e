"""Policies say which sources need approval for which agents: a catalog, a source or a
tag, for every agent or the ones named; how many distinct reviewers; for how long; and
four eyes. Curators write them, through services that audit each change."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import ApprovalPolicy, ApprovalRequest
from approvals.selectors.gate import injection_decisions, withheld_sources
from approvals.services.decisions import request_decide
from approvals.services.policies import policy_create, policy_delete, policy_update
from catalog.errors import ApplicationError
from catalog.models import AuditEntry, ReferenceSource
from catalog.tags import tags_ensure
from catalog.web import status_of
from tests.approvals.builders import approved, gate_raise, raised
from tests.factories import person

pytestmark = pytest.mark.django_db


def allowed(agent, source) -> bool:
    return injection_decisions(agent=agent, sources=[source])[source.pk].allowed


@pytest.fixture
def open_kb(kb):
    """kb with nothing flagged: only policies govern."""
    ReferenceSource.objects.filter(pk=kb.vault.pk).update(requires_approval=False)
    return kb


def test_a_catalog_policy_governs_every_source_of_the_catalog(open_kb, agent, cora):
    assert allowed(agent, open_kb.notes)

    policy_create(by=cora, catalog=open_kb.catalog)

    assert not allowed(agent, open_kb.notes) and not allowed(agent, open_kb.vault)
    assert set(withheld_sources(agent=agent, catalog_ids=[open_kb.catalog.pk])) == {open_kb.notes.pk,
                                                                                     open_kb.vault.pk}


def test_a_source_policy_governs_that_source(open_kb, agent, cora):
    policy_create(by=cora, source=open_kb.notes)

    assert not allowed(agent, open_kb.notes) and allowed(agent, open_kb.vault)


def test_a_tag_policy_governs_the_sources_carrying_it_as_tags_change(open_kb, agent, cora):
    (secret,) = tags_ensure(names=["secret"])
    policy_create(by=cora, tag=secret)
    assert allowed(agent, open_kb.notes)

    open_kb.notes.tags.add(secret)

    assert not allowed(agent, open_kb.notes) and allowed(agent, open_kb.vault)
    assert set(withheld_sources(agent=agent, catalog_ids=[open_kb.catalog.pk])) == {open_kb.notes.pk}


def test_a_policy_for_named_agents_leaves_the_others_alone(open_kb, agent, other_agent, cora):
    policy_create(by=cora, source=open_kb.notes, agents=[other_agent])

    assert allowed(agent, open_kb.notes) and not allowed(other_agent, open_kb.notes)
    assert not allowed(None, open_kb.notes)  # a person signed in is under every policy


def test_required_approvals_count_distinct_reviewers(open_kb, agent, cora, rita, rob):
    policy_create(by=cora, source=open_kb.notes, required_approvals=2)
    request_id = raised(agent, open_kb.notes)

    request_decide(request_id=request_id, reviewer=rita, verdict="approve")
    decision = injection_decisions(agent=agent, sources=[open_kb.notes])[open_kb.notes.pk]
    assert (decision.allowed, decision.state) == (False, "pending") and "(1 of 2 approvals)" in decision.reason
    with pytest.raises(ApplicationError) as again:
        request_decide(request_id=request_id, reviewer=rita, verdict="approve")
    assert again.value.code == "already_decided"

    request_decide(request_id=request_id, reviewer=rob, verdict="approve")

    assert allowed(agent, open_kb.notes)
    assert ApprovalRequest.objects.get(pk=request_id).approvals == 2


def test_the_strictest_policy_wins(open_kb, agent, cora, rita, rob):
    policy_create(by=cora, catalog=open_kb.catalog, lifetime=timedelta(days=30))
    policy_create(by=cora, source=open_kb.notes, required_approvals=2)
    approval = approved(agent, open_kb.notes, rita, rob)

    assert allowed(agent, open_kb.notes)
    assert approval.decided_at is not None and approval.expires_at == approval.decided_at + timedelta(days=30)


def test_more_required_approvals_apply_to_existing_approvals_and_a_new_request_follows(open_kb, agent, cora, rita):
    policy = policy_create(by=cora, source=open_kb.notes)
    approval = approved(agent, open_kb.notes, rita)

    policy_update(policy_id=policy.pk, by=cora, required_approvals=2)

    decision = gate_raise(agent=agent, sources=[open_kb.notes], via="select")[open_kb.notes.pk]
    assert not decision.allowed and decision.request_id not in (None, approval.pk)
    assert ApprovalRequest.objects.get(pk=decision.request_id or 0).previous_id == approval.pk
    assert f"request {approval.pk} has 1 of the 2 approvals now required" in decision.reason


def test_a_shorter_lifetime_ends_existing_approvals_at_once(open_kb, agent, cora, rita):
    policy = policy_create(by=cora, source=open_kb.notes)
    approval = approved(agent, open_kb.notes, rita)
    ApprovalRequest.objects.filter(pk=approval.pk).update(decided_at=timezone.now() - timedelta(hours=2))

    policy_update(policy_id=policy.pk, by=cora, lifetime=timedelta(hours=1))

    decision = injection_decisions(agent=agent, sources=[open_kb.notes])[open_kb.notes.pk]
    assert (decision.allowed, decision.state, decision.request_id) == (False, "expired", approval.pk)


def test_deleting_the_last_policy_opens_the_source(open_kb, agent, cora):
    policy = policy_create(by=cora, source=open_kb.notes)

    policy_delete(policy_id=policy.pk, by=cora)

    assert allowed(agent, open_kb.notes)


def test_policies_are_written_by_curators_only_and_each_change_is_audited(open_kb, cora, rita):
    with pytest.raises(ApplicationError) as refused:
        policy_create(by=rita, source=open_kb.notes)
    assert (status_of(refused.value), refused.value.code) == (403, "not_curator")
    assert not ApprovalPolicy.objects.exists() and not AuditEntry.objects.filter(action__startswith="policy.")

    policy = policy_create(by=cora, source=open_kb.notes, four_eyes=True)
    policy_update(policy_id=policy.pk, by=cora, required_approvals=3)
    policy_delete(policy_id=policy.pk, by=cora)

    entries = list(AuditEntry.objects.filter(policy_id=policy.pk).order_by("seq"))
    assert [e.action for e in entries] == ["policy.created", "policy.updated", "policy.deleted"]
    assert {e.actor_name for e in entries} == {"cora"}
    assert entries[1].payload["before"]["required_approvals"] == 1
    assert entries[1].payload["after"]["required_approvals"] == 3
    assert entries[0].payload["four_eyes"] is True


def test_a_policy_names_exactly_its_target(open_kb, cora):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        policy_create(by=cora)
    with pytest.raises(ValidationError):
        policy_create(by=cora, source=open_kb.notes, required_approvals=0)
    with pytest.raises(ValidationError):
        policy_create(by=cora, source=open_kb.notes, lifetime=timedelta(0))
    assert not ApprovalPolicy.objects.exists()


# --- four eyes -------------------------------------------------------------------------------


def test_under_four_eyes_who_changed_the_content_may_not_approve_it(open_kb, agent, cora, rob):
    from catalog.sources.editing import source_changed_by

    editor = person("eddie", "curator", "reviewer")
    policy_create(by=cora, source=open_kb.notes, four_eyes=True)
    source_changed_by(source=open_kb.notes, by=editor, fields=["files"])
    request_id = raised(agent, open_kb.notes)

    with pytest.raises(ApplicationError) as refused:
        request_decide(request_id=request_id, reviewer=editor, verdict="approve")

    assert (status_of(refused.value), refused.value.code) == (403, "four_eyes")
    assert ApprovalRequest.objects.get(pk=request_id).state == "pending"
    request_decide(request_id=request_id, reviewer=rob, verdict="approve")
    assert allowed(agent, open_kb.notes)


def test_under_four_eyes_who_changed_a_covering_policy_may_not_approve(open_kb, agent, rob):
    both = person("bea", "curator", "reviewer")
    policy_create(by=both, catalog=open_kb.catalog, four_eyes=True)
    request_id = raised(agent, open_kb.notes)

    with pytest.raises(ApplicationError) as refused:
        request_decide(request_id=request_id, reviewer=both, verdict="approve")

    assert refused.value.code == "four_eyes"
    request_decide(request_id=request_id, reviewer=rob, verdict="approve")


def test_without_four_eyes_the_editor_may_approve(open_kb, agent, cora):
    both = person("bea", "curator", "reviewer")
    policy_create(by=both, source=open_kb.notes)

    request_decide(request_id=raised(agent, open_kb.notes), reviewer=both, verdict="approve")

    assert allowed(agent, open_kb.notes)
