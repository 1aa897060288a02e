"""The admin writes through the services: a curator's policy is audited, a reviewer's
action decides through request_decide, and the audit log cannot be edited there."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalPolicy, ApprovalRequest, AuditEntry, Decision
from tests.approvals.builders import raised
from tests.factories import person

pytestmark = pytest.mark.django_db


def test_a_curator_adds_a_policy_in_the_admin_and_it_is_audited(kb, agent, client):
    client.force_login(person("cora", "curator", is_staff=True))

    response = client.post("/admin/approvals/approvalpolicy/add/", {
        "scope": "source", "source": kb.notes.pk, "all_agents": "", "agents": [agent.pk],
        "required_approvals": 2, "lifetime": "", "description": "named"})

    assert response.status_code == 302, response.content.decode()[-2000:]
    policy = ApprovalPolicy.objects.get()
    assert (policy.all_agents, list(policy.agents.all()), policy.required_approvals) == (False, [agent], 2)
    entry = AuditEntry.objects.get(action="policy.created")
    assert (entry.actor_name, entry.policy_id, entry.payload["agent_ids"]) == ("cora", policy.pk, [agent.pk])


def test_a_reviewer_approves_from_the_admin_through_the_service(kb, agent, client):
    client.force_login(person("rita", "reviewer", is_staff=True))
    request_id = raised(agent, kb.vault)

    response = client.post("/admin/approvals/approvalrequest/",
                           {"action": "approve", "_selected_action": [request_id]})

    assert response.status_code == 302
    assert ApprovalRequest.objects.get(pk=request_id).state == "approved"
    assert Decision.objects.get().channel == "admin"


def test_the_audit_log_is_read_only_in_the_admin(agent, client):
    client.force_login(person("root", is_staff=True, is_superuser=True))
    entry = AuditEntry.objects.get(action="token.issued")

    assert client.get("/admin/approvals/auditentry/").status_code == 200
    assert client.get(f"/admin/approvals/auditentry/{entry.pk}/delete/").status_code == 403
    assert client.post(f"/admin/approvals/auditentry/{entry.pk}/change/", {"action": "x"}).status_code == 403
