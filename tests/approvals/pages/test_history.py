"""History per source and per agent: every request over time, newest first, with the
decisions taken on it and how it ended."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from approvals.services.decisions import request_decide
from approvals.services.revocation import approval_revoke
from tests.approvals.builders import approved, raised
from tests.factories import agent_with_token

pytestmark = pytest.mark.django_db


def test_a_sources_history_lists_every_agents_requests_and_decisions(client_for, kb, agent, other_agent, rita,
                                                                    cora):
    revoked = approved(agent, kb.vault, rita)
    approval_revoke(request_id=revoked.pk, by=rita, reason="leaked")
    rejected = raised(other_agent, kb.vault)
    request_decide(request_id=rejected, reviewer=rita, verdict="reject", comment="not this one")

    response = client_for(cora).get(reverse("approvals-source-history", args=["kb", "vault"]))

    html = response.content.decode()
    assert response.status_code == 200
    assert [r.pk for r, _ in response.context["rows"]] == [rejected, revoked.pk]  # newest first
    assert "History of" in html and "kb/vault" in html
    assert "state-revoked" in html and "state-rejected" in html
    assert "not this one" in html and "other-bot" in html
    assert "by <strong>rita</strong>: “leaked”" in html  # who revoked and why, from the audit log
    assert f"{reverse('audit-log')}?source={kb.vault.pk}" in html


def test_an_agents_history_lists_its_requests_across_sources(client_for, kb, agent, other_agent, rita):
    mine = raised(agent, kb.vault)
    raised(other_agent, kb.vault)

    response = client_for(rita).get(reverse("approvals-agent-history", args=[agent.pk]))

    assert [r.pk for r, _ in response.context["rows"]] == [mine]
    assert "History of agent" in response.content.decode()


def test_history_of_something_unknown_is_404(client_for, kb, rita):
    client = client_for(rita)
    assert client.get(reverse("approvals-source-history", args=["kb", "nope"])).status_code == 404
    assert client.get(reverse("approvals-agent-history", args=[999999])).status_code == 404


def test_history_costs_the_same_queries_however_many_requests(client_for, kb, agent, rita):
    client = client_for(rita)
    url = reverse("approvals-source-history", args=["kb", "vault"])

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        return len(queries)

    request_decide(request_id=raised(agent, kb.vault), reviewer=rita, verdict="reject")
    few = count()
    for n in range(3):
        request_decide(request_id=raised(agent_with_token(name=f"bot{n}", catalogs=[kb.catalog])[0], kb.vault),
                       reviewer=rita, verdict="reject")
    # one governance statement per distinct agent on the page: 3 more agents, 3 more statements
    assert count() == few + 3
