"""What an agent sees of approvals: the enrich, select, search and file answers name the
request of anything withheld from it, GET /api/v1/approvals lists its own requests and
their states (never content or diffs), and an approval opens every read path."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from approvals.services.decisions import request_decide
from approvals.services.policies import policy_create
from approvals.services.revocation import approval_revoke
from tests.approvals.builders import VAULT_TEXT, raised
from tests.factories import agent_with_token, person

pytestmark = pytest.mark.django_db


@pytest.fixture
def bot(kb):
    agent, token = agent_with_token(name="bot", catalogs=[kb.catalog])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    client.agent = agent  # type: ignore[attr-defined]
    return client


def enrich(client, text: str) -> dict:
    response = client.post("/api/v1/enrich", {"text": text, "surface": "prompt"}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_enrich_names_the_request_of_a_withheld_reference_and_injects_it_once_approved(kb, bot, rita):
    body = enrich(bot, "Follow @vault for the keys.")

    (hint,) = [h for h in body["hints"] if h["source_id"] == "vault"]
    request = ApprovalRequest.objects.get()
    assert (hint["withheld"], hint["injected"], hint["request_id"]) == (True, "none", request.pk)
    assert (request.raised_via, request.agent_id) == ("enrichment", bot.agent.pk)
    assert request.context.startswith("enrich (prompt): Follow @vault")
    assert "ninety days" not in body["text"]
    assert enrich(bot, "Follow @vault again.")["hints"][0]["request_id"] == request.pk  # no second request
    assert ApprovalRequest.objects.count() == 1

    request_decide(request_id=request.pk, reviewer=rita, verdict="approve")

    body = enrich(bot, "Follow @vault for the keys.")
    assert body["hints"][0]["injected"] == "expand" and body["hints"][0]["request_id"] is None
    assert "rotation.md" in body["text"]


def test_select_names_the_request_and_its_state(kb, bot, rita):
    body = bot.post("/api/v1/references/select", {"ids": ["vault", "notes"]}, format="json").json()

    request = ApprovalRequest.objects.get()
    assert [s["source_id"] for s in body["selected"]] == ["notes"]
    assert body["withheld"] == [{"source_id": "vault", "catalog": "kb", "name": "vault",
                                 "reason": f"requires approval; request {request.pk} awaits a reviewer",
                                 "state": "pending", "request_id": request.pk}]
    assert request.raised_via == "select"

    request_decide(request_id=request.pk, reviewer=rita, verdict="reject", comment="not for bots")
    body = bot.post("/api/v1/references/select", {"ids": ["vault"]}, format="json").json()
    assert (body["withheld"][0]["state"], body["withheld"][0]["request_id"]) == ("rejected", request.pk)


def test_a_file_read_refused_names_the_request(kb, bot, rita):
    response = bot.get("/api/v1/references/kb/vault/file?path=rotation.md")

    request = ApprovalRequest.objects.get()
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "withheld"
    assert response.json()["error"]["details"] == {"state": "pending", "request_id": request.pk}

    request_decide(request_id=request.pk, reviewer=rita, verdict="approve")
    bot.post("/api/v1/references/select", {"ids": ["vault"]}, format="json")
    assert bot.get("/api/v1/references/kb/vault/file?path=rotation.md").json()["text"] == VAULT_TEXT


def test_search_names_the_request_of_each_withheld_source_that_matched_where_disclosed(kb, bot, rita, cora):
    policy_create(by=cora, source=kb.vault, disclose_matches=True)  # else search raises nothing (issue 20)

    body = bot.post("/api/v1/search", {"catalog": "kb", "query": "vault keys", "mode": "bm25"}, format="json").json()

    request = ApprovalRequest.objects.get()
    assert body["results"] == []
    assert body["withheld"]["sources"] == [{"source": "vault", "count": 1, "state": "pending",
                                            "reason": f"requires approval; request {request.pk} awaits a reviewer",
                                            "request_id": request.pk}]
    assert (request.raised_via, request.context) == ("search", "search: vault keys")
    bot.post("/api/v1/search", {"catalog": "kb", "query": "plain notes", "mode": "bm25"}, format="json")
    assert ApprovalRequest.objects.count() == 1  # nothing raised for what the query did not reach

    request_decide(request_id=request.pk, reviewer=rita, verdict="approve")
    body = bot.post("/api/v1/search", {"catalog": "kb", "query": "vault keys", "mode": "bm25"}, format="json").json()
    assert [hit["source"] for hit in body["results"]] == ["vault"] and body["withheld"]["count"] == 0


def test_the_agent_lists_its_own_requests_and_their_states(kb, bot, other_agent, rita):
    approved = raised(bot.agent, kb.vault)
    request_decide(request_id=approved, reviewer=rita, verdict="approve", comment="fine")
    approval_revoke(request_id=approved, by=rita)
    assert raised(bot.agent, kb.vault) == approved  # revoked: a new request only by hand
    ApprovalRequest.objects.filter(pk=approved).update(state="expired")
    pending = raised(bot.agent, kb.vault)
    raised(other_agent, kb.vault)

    body = bot.get("/api/v1/approvals").json()

    assert body["count"] == 2 and [r["id"] for r in body["results"]] == [pending, approved]
    newest = body["results"][0]
    assert {k: newest[k] for k in ("catalog", "source_id", "state", "current", "raised_via", "approvals",
                                   "required_approvals", "previous_id")} == {
        "catalog": "kb", "source_id": "vault", "state": "pending", "current": True, "raised_via": "select",
        "approvals": 0, "required_approvals": 1, "previous_id": approved}
    assert body["results"][1]["comment"] == "fine"
    assert "diff" not in newest and "documents" not in newest
    assert [r["id"] for r in bot.get("/api/v1/approvals?state=expired").json()["results"]] == [approved]
    page = bot.get("/api/v1/approvals?limit=1&offset=1").json()
    assert page["count"] == 2 and [r["id"] for r in page["results"]] == [approved]


def test_only_agents_list_approval_requests(kb, client):
    client.force_login(person("rita", "reviewer"))

    response = client.get("/api/v1/approvals")

    assert response.status_code == 403 and response.json()["error"]["code"] == "forbidden"
    assert APIClient().get("/api/v1/approvals").status_code in (401, 403)


def test_a_bad_state_filter_is_a_400(bot):
    response = bot.get("/api/v1/approvals?state=maybe")

    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_input"


def test_the_reviewers_queue_holds_pending_requests_for_current_content_oldest_first(kb, agent, other_agent):
    from approvals.selectors.requests import request_detail, requests_queue, rules_for

    first, second = raised(agent, kb.vault), raised(other_agent, kb.vault)
    ApprovalRequest.objects.create(source=kb.vault, agent=agent, fingerprint="old-content", raised_via="search")

    queue = list(requests_queue())

    assert [r.pk for r in queue] == [first, second]
    assert {pk: rule.required for pk, rule in rules_for(queue).items()} == {first: 1, second: 1}
    detail = request_detail(request_id=first)
    assert detail is not None and detail.documents is not None
    assert [d["text"] for d in detail.documents] == [VAULT_TEXT]
