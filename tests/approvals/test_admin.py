"""The admin writes through the services: a curator's policy is audited, a reviewer's
action decides through request_decide, and the audit log cannot be edited there. It
shows requests in the state the gate concludes, as the queue and the API do."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import ApprovalPolicy, ApprovalRequest, Decision
from catalog.models import AuditEntry
from tests.approvals.builders import approved, raised
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

    assert client.get("/admin/catalog/auditentry/").status_code == 200
    assert client.get(f"/admin/catalog/auditentry/{entry.pk}/delete/").status_code == 403
    assert client.post(f"/admin/catalog/auditentry/{entry.pk}/change/", {"action": "x"}).status_code == 403


def listed(client, query: str = "") -> dict[int, str]:
    """request id -> the state its row in the admin's request list shows."""
    response = client.get(f"/admin/approvals/approvalrequest/{query}")
    assert response.status_code == 200, response.status_code
    rows = re.findall(r'name="_selected_action" value="(\d+)".*?<td class="field-state_now">(\w+)</td>',
                      response.content.decode(), re.S)
    return {int(pk): state for pk, state in rows}


def test_the_request_list_shows_and_filters_an_approval_whose_time_is_up_as_expired(kb, agent, other_agent, rita,
                                                                                    client):
    # given: two approvals; the time of one is up, and the expiry task has not marked it yet
    live = approved(agent, kb.vault, rita)
    over = approved(other_agent, kb.vault, rita)
    ApprovalRequest.objects.filter(pk=over.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    client.force_login(person("root", is_staff=True, is_superuser=True))

    # then: the list shows it expired, and the state filter agrees
    assert listed(client) == {live.pk: "approved", over.pk: "expired"}
    assert listed(client, "?state_now=expired") == {over.pk: "expired"}
    assert listed(client, "?state_now=approved") == {live.pk: "approved"}
    assert ApprovalRequest.objects.get(pk=over.pk).state == "approved"  # the row itself is the task's to mark
    page = client.get(f"/admin/approvals/approvalrequest/{over.pk}/change/").content.decode()
    assert re.search(r"State now:</label>\s*<div class=\"readonly\">expired</div>", page)
