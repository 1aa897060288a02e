"""Who may open each reviewer page and use each form: anyone not signed in is sent to
sign in, a person without a role (staff status included) gets 403, curators and
reviewers see every page, only reviewers decide and revoke. An agent's token signs no
one in. A refused request changes nothing."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from approvals.models import ApprovalRequest, Decision
from approvals.services.decisions import request_decide
from catalog.models import AuditEntry
from tests.factories import agent_with_token

pytestmark = pytest.mark.django_db

VIEWERS = ("cora", "rita", "bea", "sue")
DECIDERS = ("rita", "bea", "sue")
NO_ROLE = ("nobody", "staff")


def pages(kb, agent, request_id) -> list[str]:
    return [
        reverse("approvals-queue"),
        reverse("approvals-queue") + "?state=&q=vault",
        reverse("approvals-pending-count"),
        reverse("approvals-request", args=[request_id]),
        reverse("approvals-source-history", args=[kb.catalog.slug, kb.vault.slug]),
        reverse("approvals-agent-history", args=[agent.pk]),
        reverse("audit-log"),
        reverse("audit-export", args=["csv"]),
        reverse("audit-export", args=["json"]),
    ]


def forms(request_id) -> list[tuple[str, dict]]:
    return [
        (reverse("approvals-decide", args=[request_id]), {"verdict": "approve", "comment": "ok"}),
        (reverse("approvals-revoke", args=[request_id]), {"reason": "leaked"}),
        (reverse("approvals-bulk"), {"ids": [request_id], "verdict": "reject", "comment": "no"}),
    ]


def snapshot():
    return (list(ApprovalRequest.objects.order_by("pk").values_list("pk", "state", "approvals")),
            Decision.objects.count(), AuditEntry.objects.count())


def test_anyone_not_signed_in_is_sent_to_sign_in_and_comes_back(kb, agent, pending):
    client = Client()
    for url in pages(kb, agent, pending):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("login") + "?next="), url
    before = snapshot()
    for url, data in forms(pending):
        response = client.post(url, data)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login")), url
    assert snapshot() == before


def test_an_agent_token_signs_no_one_in(kb, agent, pending):
    _, token = agent_with_token(name="curator-bot", catalogs=[kb.catalog], is_curator=True)
    client = Client(headers={"Authorization": f"Bearer {token}"})
    for url in pages(kb, agent, pending):
        assert client.get(url).status_code == 302, url
    before = snapshot()
    for url, data in forms(pending):
        assert client.post(url, data).status_code == 302, url
    assert snapshot() == before


@pytest.mark.parametrize("who", NO_ROLE)
def test_a_person_without_a_role_gets_403_everywhere(request, client_for, kb, agent, pending, who):
    client = client_for(request.getfixturevalue(who))
    for url in pages(kb, agent, pending):
        response = client.get(url)
        assert response.status_code == 403, url
    page = client.get(reverse("approvals-queue"))
    assert b"Not allowed" in page.content and b"no role" in page.content
    before = snapshot()
    for url, data in forms(pending):
        assert client.post(url, data).status_code == 403, url
    assert snapshot() == before


@pytest.mark.parametrize("who", VIEWERS)
def test_curators_and_reviewers_see_every_page(request, client_for, kb, agent, pending, who):
    client = client_for(request.getfixturevalue(who))
    for url in pages(kb, agent, pending):
        assert client.get(url).status_code == 200, url


def test_a_curator_without_the_reviewer_role_may_not_decide_nor_revoke(client_for, kb, agent, pending, cora, rita):
    client = client_for(cora)
    page = client.get(reverse("approvals-request", args=[pending]))
    assert b"Only reviewers decide" in page.content and b'value="approve"' not in page.content
    before = snapshot()
    for url, data in forms(pending):
        assert client.post(url, data).status_code == 403, url
    assert snapshot() == before
    request_decide(request_id=pending, reviewer=rita, verdict="approve")
    before = snapshot()
    assert client.post(reverse("approvals-revoke", args=[pending]), {"reason": "x"}).status_code == 403
    assert snapshot() == before


@pytest.mark.parametrize("who", DECIDERS)
def test_reviewers_both_roles_and_superusers_decide(request, client_for, pending, who):
    client = client_for(request.getfixturevalue(who))

    response = client.post(reverse("approvals-decide", args=[pending]), {"verdict": "approve"})

    assert response.status_code == 302
    assert ApprovalRequest.objects.get(pk=pending).state == "approved"


@pytest.mark.parametrize("method", ["get", "put", "delete"])
def test_forms_take_posts_only(client_for, pending, rita, method):
    response = getattr(client_for(rita), method)(reverse("approvals-decide", args=[pending]))
    assert response.status_code == 405
    assert ApprovalRequest.objects.get(pk=pending).state == "pending"


def test_every_form_needs_its_csrf_token(client_for, pending, rita):
    client = client_for(rita, csrf=True)
    before = snapshot()
    for url, data in forms(pending):
        response = client.post(url, data)
        assert response.status_code == 403, url
        assert b"CSRF" in response.content
    assert snapshot() == before

    # the page's own token lets the same post through
    page = client.get(reverse("approvals-request", args=[pending]))
    token = page.context["csrf_token"]
    response = client.post(reverse("approvals-decide", args=[pending]), {"verdict": "approve",
                                                                          "csrfmiddlewaretoken": str(token)})
    assert response.status_code == 302
    assert ApprovalRequest.objects.get(pk=pending).state == "approved"


def test_htmx_posts_carry_the_token_in_a_header(client_for, pending, rita):
    client = client_for(rita, csrf=True)
    client.get(reverse("approvals-request", args=[pending]))
    token = client.cookies["csrftoken"].value

    response = client.post(reverse("approvals-decide", args=[pending]), {"verdict": "reject", "comment": "no"},
                           headers={"HX-Request": "true", "X-CSRFToken": token})

    assert response.status_code == 200
    assert ApprovalRequest.objects.get(pk=pending).state == "rejected"


def test_an_unknown_request_is_404_for_viewers_and_deciders(client_for, cora, rita):
    assert client_for(cora).get(reverse("approvals-request", args=[999999])).status_code == 404
    assert client_for(rita).post(reverse("approvals-decide", args=[999999]), {"verdict": "approve"}).status_code == 404
    assert client_for(rita).post(reverse("approvals-revoke", args=[999999]), {"reason": "x"}).status_code == 404
