"""The audit log's page: newest first, filtered by action, actor, request, policy and
dates; its exports: the same filters as CSV and JSON downloads, streamed, every column
with the hashes, in chain order."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from approvals.services.decisions import request_decide
from approvals.services.policies import policy_create
from catalog.audit.export import COLUMNS
from catalog.audit.log import audit_verify
from catalog.models import AuditEntry
from tests.approvals.builders import raised
from tests.factories import agent_with_token, person

pytestmark = pytest.mark.django_db

AUDIT = reverse("audit-log")


@pytest.fixture
def history(kb, agent, other_agent, rita, cora):
    """A policy, two requests raised, one approved and one rejected."""
    policy = policy_create(by=cora, source=kb.vault, description="vault needs review")
    first, second = raised(agent, kb.vault), raised(other_agent, kb.vault)
    request_decide(request_id=first, reviewer=rita, verdict="approve", comment="ok")
    request_decide(request_id=second, reviewer=rita, verdict="reject", comment="no")
    return {"policy": policy.pk, "first": first, "second": second}


def seqs(response) -> list[int]:
    return [entry.seq for entry in response.context["page"].object_list]


def test_the_log_lists_entries_newest_first(client_for, history, cora):
    response = client_for(cora).get(AUDIT)

    assert response.status_code == 200
    assert seqs(response) == sorted(AuditEntry.objects.values_list("seq", flat=True), reverse=True)
    html = response.content.decode()
    assert "request.rejected" in html and "policy.created" in html and "vault needs review" in html


def test_filters(client_for, history, rita):
    client = client_for(rita)

    def actions(**params):
        response = client.get(AUDIT, params)
        assert response.status_code == 200, response.content
        return [entry.action for entry in response.context["page"].object_list]

    assert actions(action="request.approved") == ["request.approved"]
    assert set(actions(action="request.")) == {"request.raised", "request.approved", "request.rejected"}
    assert actions(actor="cora") == ["policy.created"]
    assert actions(request=history["second"]) == ["request.rejected", "request.raised"]
    assert actions(policy=history["policy"]) == ["policy.created"]
    today = timezone.now().date()
    assert len(actions(since=today.isoformat(), until=today.isoformat())) == AuditEntry.objects.count()
    assert actions(until=(today - timedelta(days=1)).isoformat()) == []


def test_entries_name_sources_and_agents_and_a_source_filter_can_be_dropped(client_for, kb, agent, history,
                                                                             rita):
    response = client_for(rita).get(AUDIT, {"source": kb.vault.pk, "action": "request."})

    html = response.content.decode()
    assert {entry.source_id for entry in response.context["page"].object_list} == {kb.vault.pk}
    assert "<code>kb/vault</code>" in html and ">bot</a>" in html
    assert "Only entries naming" in html and "source kb/vault" in html
    assert 'href="?action=request."' in html  # the chip's link drops the source, keeps the rest
    assert f'<input type="hidden" name="source" value="{kb.vault.pk}">' in html


def test_payload_values_read_as_json(client_for, history, rita):
    html = client_for(rita).get(AUDIT, {"action": "policy.created"}).content.decode()
    assert '<span class="k">four_eyes</span> false' in html and '<span class="k">lifetime_seconds</span> —' in html


def test_a_range_that_ends_before_it_starts_is_a_400(client_for, history, rita):
    response = client_for(rita).get(AUDIT, {"since": "2026-02-02", "until": "2026-02-01"})

    assert response.status_code == 400 and b"starts after it ends" in response.content


def test_the_log_is_paginated(client_for, history, rita, monkeypatch):
    monkeypatch.setattr("approvals.views.AUDIT_PAGE", 2)
    client = client_for(rita)
    total = AuditEntry.objects.count()

    first = client.get(AUDIT, {"action": "request."})
    last = client.get(AUDIT, {"action": "request.", "page": 3})

    assert len(seqs(first)) == 2 and "page=2" in first.content.decode()
    assert "action=request." in first.content.decode()  # the filter rides along
    assert seqs(last) and total >= 5


def download(response) -> str:
    assert response.streaming
    return b"".join(response.streaming_content).decode()


def test_the_csv_export_holds_every_column_in_chain_order(client_for, history, cora):
    response = client_for(cora).get(reverse("audit-export", args=["csv"]), {"action": "request."})

    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="lectern-audit-')
    assert response["Content-Disposition"].endswith('.csv"')
    rows = list(csv.DictReader(io.StringIO(download(response))))
    expected = AuditEntry.objects.filter(action__startswith="request.").order_by("seq")
    assert [int(row["seq"]) for row in rows] == [entry.seq for entry in expected]
    assert tuple(rows[0]) == COLUMNS
    approval = next(row for row in rows if row["action"] == "request.approved")
    assert json.loads(approval["payload"])["comment"] == "ok"
    assert approval["hash"] == expected.get(action="request.approved").hash


def test_the_json_export_holds_the_filtered_entries(client_for, history, rita):
    response = client_for(rita).get(reverse("audit-export", args=["json"]), {"request": history["first"]})

    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"].endswith('.json"')
    entries = json.loads(download(response))
    assert [e["action"] for e in entries] == ["request.raised", "request.approved"]
    assert set(entries[0]) == set(COLUMNS)
    assert audit_verify().broken is None


def test_an_empty_export_is_still_valid(client_for, history, rita):
    response = client_for(rita).get(reverse("audit-export", args=["json"]), {"actor": "nobody-at-all"})
    assert json.loads(download(response)) == []
    response = client_for(rita).get(reverse("audit-export", args=["csv"]), {"actor": "nobody-at-all"})
    assert download(response).splitlines() == [",".join(COLUMNS)]


def test_an_unknown_export_format_is_404(client_for, rita):
    assert client_for(rita).get(reverse("audit-export", args=["xml"])).status_code == 404


def test_the_log_costs_the_same_queries_however_many_entries(client_for, kb, agent, rita):
    client = client_for(rita)

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(AUDIT).status_code == 200
        return len(queries)

    raised(agent, kb.vault)
    few = count()
    for n in range(3):
        bot = agent_with_token(name=f"bot{n}", catalogs=[kb.catalog])[0]
        request_decide(request_id=raised(bot, kb.vault), reviewer=person(f"r{n}", "reviewer"), verdict="reject")
    assert count() == few
    # session, user, the role check; count, page; the names of its sources, of its agents; the header's roles, count
    assert few == 9
