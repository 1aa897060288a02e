"""Bulk decisions from the queue: the chosen requests, one verdict, one comment; a report
per request of what was decided and what was refused, and why."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from approvals.models import ApprovalRequest, Decision
from approvals.services.decisions import request_decide
from catalog.models import ReferenceSource
from tests.approvals.builders import document, raised
from tests.factories import import_documents

pytestmark = pytest.mark.django_db

BULK = reverse("approvals-bulk")


@pytest.fixture
def three(kb, agent, other_agent) -> list[int]:
    keys = import_documents(catalog=kb.catalog, slug="keys", documents=[document("keys.md", "Keys.\n")])
    ReferenceSource.objects.filter(pk=keys.pk).update(requires_approval=True)
    return [raised(agent, kb.vault), raised(other_agent, kb.vault), raised(agent, keys)]


def test_bulk_approval_reports_each_request(client_for, three, rita, rob):
    request_decide(request_id=three[2], reviewer=rob, verdict="reject")

    response = client_for(rita).post(BULK, {"ids": three, "verdict": "approve", "comment": "reviewed together"},
                                     headers={"HX-Request": "true"})

    html = response.content.decode()
    assert response.status_code == 200 and json.loads(response["HX-Trigger"]) == {"queue-changed": {}}
    assert "<strong>2</strong> approvals recorded, <strong>1</strong> refused" in html
    assert f"#{three[2]}</a>:\n        refused — request {three[2]} is already rejected" in html
    assert "request_decided" in html
    assert dict(ApprovalRequest.objects.values_list("pk", "state")) == {
        three[0]: "approved", three[1]: "approved", three[2]: "rejected"}
    assert Decision.objects.filter(comment="reviewed together").count() == 2


def test_bulk_rejection_without_htmx_renders_the_report_page(client_for, three, rita):
    response = client_for(rita).post(BULK, {"ids": three[:2], "verdict": "reject", "comment": "no"})

    assert response.status_code == 200 and b"<h1>Bulk decision</h1>" in response.content
    assert b"<strong>2</strong> rejections recorded" in response.content
    assert set(ApprovalRequest.objects.filter(pk__in=three[:2]).values_list("state", flat=True)) == {"rejected"}


@pytest.mark.parametrize("data", [{"verdict": "approve"}, {"ids": ["x"], "verdict": "approve"},
                                  {"ids": ["1"], "verdict": "perhaps"}])
def test_a_bad_bulk_form_is_a_400_and_decides_nothing(client_for, three, rita, data):
    response = client_for(rita).post(BULK, data, headers={"HX-Request": "true"})

    assert response.status_code == 400 and b'class="alert"' in response.content
    assert not Decision.objects.exists()


def test_too_many_requests_at_once_are_refused(client_for, three, rita):
    response = client_for(rita).post(BULK, {"ids": list(range(1, 102)), "verdict": "approve"})

    assert response.status_code == 400 and b"At most 100 requests" in response.content
    assert not Decision.objects.exists()
