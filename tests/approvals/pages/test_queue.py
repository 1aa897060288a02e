"""The queue: pending requests oldest first by default, filtered by catalog, source,
agent, state, how they were raised and the context's text; paginated; a constant
number of queries whatever its length; the header's count for reviewers."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from approvals.models import ApprovalRequest
from approvals.services.decisions import request_decide
from approvals.views import QUEUE_PAGE
from catalog.models import ReferenceSource
from tests.approvals.builders import document, raised
from tests.factories import import_documents

pytestmark = pytest.mark.django_db

QUEUE = reverse("approvals-queue")


def governed(kb, slug: str) -> ReferenceSource:
    source = import_documents(catalog=kb.catalog, slug=slug, documents=[document(f"{slug}.md", f"About {slug}.\n")])
    ReferenceSource.objects.filter(pk=source.pk).update(requires_approval=True)
    source.refresh_from_db()
    return source


def listed(response) -> list[int]:
    return [request.pk for request, _ in response.context["rows"]]


def test_the_queue_lists_pending_requests_oldest_first(client_for, kb, agent, other_agent, rita):
    first = raised(agent, kb.vault)
    second = raised(other_agent, kb.vault)
    decided = raised(agent, governed(kb, "keys"))
    request_decide(request_id=decided, reviewer=rita, verdict="reject")

    response = client_for(rita).get(QUEUE)

    assert response.status_code == 200
    assert listed(response) == [first, second]
    html = response.content.decode()
    assert f'href="{reverse("approvals-request", args=[first])}"' in html
    assert "Approve selected" in html and 'name="ids"' in html


def test_curators_see_the_queue_without_the_bulk_controls(client_for, pending, cora):
    html = client_for(cora).get(QUEUE).content.decode()

    assert f"#{pending}" in html
    assert "Approve selected" not in html and 'name="ids"' not in html


def test_filters_narrow_the_queue(client_for, kb, agent, other_agent, rita, make_catalog):
    keys = governed(kb, "keys")
    vault_bot = raised(agent, kb.vault, via="enrichment")
    vault_other = raised(other_agent, kb.vault, via="search")
    keys_bot = raised(agent, keys, via="select")
    ApprovalRequest.objects.filter(pk=keys_bot).update(context="select: the signing keys, please")
    request_decide(request_id=vault_other, reviewer=rita, verdict="reject")
    make_catalog("empty")
    client = client_for(rita)

    def query(**params):
        response = client.get(QUEUE, params)
        assert response.status_code == 200, response.content
        return set(listed(response))

    assert query() == {vault_bot, keys_bot}
    assert query(state="") == {vault_bot, vault_other, keys_bot}
    assert query(state="rejected") == {vault_other}
    assert query(state="", agent=other_agent.pk) == {vault_other}
    assert query(source=keys.pk) == {keys_bot}
    assert query(state="", via="enrichment") == {vault_bot}
    assert query(q="SIGNING keys") == {keys_bot}
    assert query(catalog="kb") == {vault_bot, keys_bot}
    assert query(catalog="empty") == set()


def test_a_filter_naming_nothing_known_is_a_400_with_the_form(client_for, pending, rita):
    response = client_for(rita).get(QUEUE, {"state": "sleeping"})

    assert response.status_code == 400
    assert b"state" in response.content and b"Select a valid choice" in response.content


def test_htmx_gets_the_table_alone(client_for, pending, rita):
    response = client_for(rita).get(QUEUE, {"state": "pending"}, headers={"HX-Request": "true"})

    html = response.content.decode()
    assert html.lstrip().startswith('<section id="queue-table"') and "<html" not in html
    assert f"#{pending}" in html


def test_the_queue_is_paginated(client_for, kb, agent, rita, monkeypatch):
    monkeypatch.setattr("approvals.views.QUEUE_PAGE", 2)
    ids = [raised(agent, governed(kb, f"s{n}")) for n in range(3)]
    client = client_for(rita)

    first, second = client.get(QUEUE), client.get(QUEUE, {"page": 2})

    assert listed(first) == ids[:2] and listed(second) == ids[2:]
    assert "Page 1 of 2" in first.content.decode() and "page=2" in first.content.decode()


def test_the_queue_costs_the_same_queries_for_one_request_or_many(client_for, kb, agent, other_agent, rita):
    sources = [governed(kb, f"s{n}") for n in range(6)]
    client = client_for(rita)

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(QUEUE).status_code == 200
        return len(queries)

    raised(agent, sources[0])
    raised(other_agent, sources[0])
    few = count()
    for source in sources[1:]:
        raised(agent, source)
        raised(other_agent, source)
    assert count() == few
    # session, user, the role check; the filters' catalogs, sources and agents; count, page,
    # decisions; one rule statement per agent (2); the header's roles and count; is_reviewer
    assert few == 14
    assert QUEUE_PAGE >= 12


def test_reviewers_see_the_pending_count_in_the_header_curators_do_not(client_for, kb, agent, other_agent,
                                                                       rita, cora):
    raised(agent, kb.vault)
    raised(other_agent, kb.vault)

    html = client_for(rita).get(reverse("audit-log")).content.decode()
    assert 'id="pending-badge"' in html and 'aria-label="2 pending"' in html
    assert 'id="pending-badge"' not in client_for(cora).get(QUEUE).content.decode()

    badge = client_for(rita).get(reverse("approvals-pending-count"))
    assert badge.content.decode().strip().startswith('<span id="pending-badge"') and b">2</span>" in badge.content


def test_the_header_names_the_person_and_their_roles_and_signs_out_by_post(client_for, bea, nobody):
    html = client_for(bea).get(QUEUE).content.decode()

    assert '<span class="who"' in html and ">bea</span>" in html
    assert '<span class="role role-curator">curator</span>' in html
    assert '<span class="role role-reviewer">reviewer</span>' in html
    assert f'<form method="post" action="{reverse("logout")}"' in html and "csrfmiddlewaretoken" in html
    assert 'aria-current="page">Approvals' in html

    home = client_for(nobody).get(reverse("home"))
    assert home.status_code == 403
    assert "no role" in home.content.decode() and "Approvals" not in home.content.decode()


def test_a_pending_request_for_content_since_replaced_leaves_the_queue_not_the_history(client_for, kb, agent,
                                                                                       other_agent, rita):
    current = raised(agent, kb.vault)
    stale = raised(other_agent, kb.vault)  # as a read path racing a reindex can leave one
    ApprovalRequest.objects.filter(pk=stale).update(fingerprint="0" * 64)
    client = client_for(rita)

    assert listed(client.get(QUEUE)) == [current]
    assert 'aria-label="1 pending"' in client.get(QUEUE).content.decode()
    assert set(listed(client.get(QUEUE, {"state": ""}))) == {current, stale}
