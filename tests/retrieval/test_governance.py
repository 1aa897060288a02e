"""The approval gate on the read paths that do not inject: search (REST and the
playground's rule for people) and transitive discovery (startup instructions, file
reads, the enrich trace), over the demo catalog, where `secrets-management` and
`incident-response` need an approval the demo agent does not have."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from django.db import transaction
from django.utils import timezone
from rest_framework.test import APIClient

from approvals.models import ApprovalPolicy, ApprovalRequest
from approvals.services.policies import policy_create
from catalog.models import Agent, Catalog, Chunk, ReferenceSource
from catalog.sources.documents import DocumentInput
from retrieval.models import Trace
from tests.factories import import_documents, person

pytestmark = pytest.mark.django_db

WITHHELD = {"secrets-management", "incident-response"}
QUERY = "secrets rotation vault credentials"
MODES = ("bm25", "vector", "hybrid", "bm25_tiebreak")


def client_for(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def agent(demo) -> APIClient:
    return client_for(demo.token)


def search(client: APIClient, **body) -> dict:
    response = client.post("/api/v1/search", {"catalog": "demo", "query": QUERY, **body}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def ungated(client: APIClient, **body) -> list[dict]:
    """The hits the same search has when nothing needs approval: what the index holds."""
    with transaction.atomic():
        ReferenceSource.objects.filter(slug__in=WITHHELD).update(requires_approval=False)
        ApprovalPolicy.objects.all().delete()
        hits: list[dict] = search(client, **body)["results"]
        transaction.set_rollback(True)
    return hits


def withheld_counts(body: dict) -> dict[str, int]:
    return {entry["source"]: entry["count"] for entry in body["withheld"]["sources"]}


# --- search ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_search_leaves_out_what_needs_approval_and_still_fills_top_k(agent, mode):
    everything = ungated(agent, mode=mode, top_k=500)
    assert {hit["source"] for hit in everything[:5]} & WITHHELD  # the query is about them

    body = search(agent, mode=mode, top_k=5)

    assert not {hit["source"] for hit in body["results"]} & WITHHELD
    allowed = [hit for hit in everything if hit["source"] not in WITHHELD]
    assert len(body["results"]) == 5 <= len(allowed)
    if mode in ("bm25", "vector"):  # one ranked list: the gated one is the full one without the withheld
        assert [hit["chunk_id"] for hit in body["results"]] == [hit["chunk_id"] for hit in allowed[:5]]
    # named whatever the query, uncounted: no policy discloses their matches (issue 20)
    assert withheld_counts(body) == dict.fromkeys(WITHHELD) and body["withheld"]["count"] == 0
    assert not ApprovalRequest.objects.exists()


@pytest.mark.parametrize("mode", MODES)
def test_deduplicated_search_leaves_out_what_needs_approval(agent, mode):
    body = search(agent, mode=mode, top_k=3, dedup=True)

    assert body["results"] and not {hit["source"] for hit in body["results"]} & WITHHELD


@pytest.fixture
def disclosed(demo) -> None:
    """Policies over the withheld sources that let search count their matching chunks."""
    curator = person("cora", "curator")
    for source in ReferenceSource.objects.filter(slug__in=WITHHELD):
        policy_create(by=curator, source=source, disclose_matches=True)


def test_lexical_search_counts_the_withheld_chunks_that_match_where_disclosed_and_shows_none(agent, disclosed):
    body = search(agent, mode="bm25", top_k=3)

    # a bm25 search returns every chunk holding a query term, up to top_k
    matching = Counter(hit["source"] for hit in ungated(agent, mode="bm25", top_k=1000) if hit["source"] in WITHHELD)
    assert withheld_counts(body) == dict(matching) and set(matching) == WITHHELD
    assert body["withheld"]["count"] == sum(matching.values())
    for entry in body["withheld"]["sources"]:  # the agent wanted them: each has a request now
        assert set(entry) == {"source", "count", "state", "reason", "request_id"}
        request = ApprovalRequest.objects.get(pk=entry["request_id"])
        assert (request.source.slug, request.state, request.raised_via) == (entry["source"], "pending", "search")
        assert entry["state"] == "pending" and "requires approval" in entry["reason"]
    served = json.dumps(body)
    for content in Chunk.objects.filter(source__slug__in=WITHHELD).values_list("content", flat=True):
        assert content not in served


def test_vector_search_counts_withheld_chunks_as_similar_as_the_last_hit_shown(agent, disclosed):
    body = search(agent, mode="vector", top_k=3)

    floor = body["results"][-1]["score"]
    similar = Counter(hit["source"] for hit in ungated(agent, mode="vector", top_k=1000)
                      if hit["source"] in WITHHELD and hit["score"] >= floor)
    assert similar and {slug: n for slug, n in withheld_counts(body).items() if n} == dict(similar)


def test_nothing_withheld_is_an_empty_report(agent):
    ReferenceSource.objects.filter(slug__in=WITHHELD).update(requires_approval=False)

    body = search(agent, mode="bm25", query="exponential backoff with jitter")

    assert body["results"] and body["withheld"] == {"count": 0, "sources": []}


def test_a_signed_in_person_searches_under_the_gates_rule_for_people(demo):
    client = APIClient()
    client.force_authenticate(person("curator", "curator"))

    body = search(client, mode="hybrid", top_k=5)

    assert len(body["results"]) == 5 and not {hit["source"] for hit in body["results"]} & WITHHELD
    assert set(withheld_counts(body)) == WITHHELD


def test_the_playground_names_what_it_withheld_and_shows_none_of_it(demo, client):
    client.force_login(person("curator", "curator"))

    page = client.get("/playground/", {"kind": "search", "catalog": "demo", "text": QUERY, "mode": "bm25",
                                       "top_k": 5}, HTTP_HX_REQUEST="true").content.decode()

    assert "Withheld: nothing of these was shown" in page and "<code>secrets-management</code>" in page
    assert not any(f"<code>{slug}/" in page for slug in WITHHELD)  # no hit of theirs


# --- transitive discovery --------------------------------------------------------------------


@pytest.fixture
def chain(demo):
    """w-root (preselected for the demo agent) mentions w-secret (needs approval), which
    mentions w-leaf; nothing else points at w-leaf."""
    catalog = Catalog.objects.get(slug="demo")
    sources = {}
    for slug, text in [("w-root", "Start from here, then read @w-secret."),
                       ("w-secret", "The vault layout. Continue with @w-leaf."),
                       ("w-leaf", "Leaf notes: the quartz lantern procedure.")]:
        sources[slug] = import_documents(catalog=catalog, slug=slug, documents=[
            DocumentInput(f"{slug}.md", slug, text, len(text))])
    ReferenceSource.objects.filter(slug="w-secret").update(requires_approval=True, updated_at=timezone.now())
    Agent.objects.get(name="demo-agent").preselected.add(sources["w-root"])
    return sources


def allow_w_secret() -> None:
    ReferenceSource.objects.filter(slug="w-secret").update(requires_approval=False, updated_at=timezone.now())


def test_instructions_do_not_follow_a_withheld_reference(agent, chain):
    body = agent.get("/api/v1/agent/instructions").json()

    by_id = {s["source_id"]: s for s in body["sources"]}
    assert by_id["w-root"]["via"] == "preselected"
    assert by_id["w-secret"]["included"] == "withheld"
    assert [p["source_id"] for p in by_id["w-secret"]["parents"]] == ["w-root"]
    assert "w-leaf" not in by_id and "quartz lantern" not in body["text"]

    allow_w_secret()  # the control: once it may be read, its mentions count
    by_id = {s["source_id"]: s for s in agent.get("/api/v1/agent/instructions").json()["sources"]}
    assert [p["source_id"] for p in by_id["w-leaf"]["parents"]] == ["w-secret"]


def test_a_file_reached_only_through_a_withheld_reference_is_not_readable(agent, chain):
    response = agent.get("/api/v1/references/demo/w-leaf/file?path=w-leaf.md")

    assert response.status_code == 403 and response.json()["error"]["code"] == "not_selected"
    allow_w_secret()
    assert agent.get("/api/v1/references/demo/w-leaf/file?path=w-leaf.md").status_code == 200


def test_enrich_does_not_discover_past_a_withheld_reference(agent, chain):
    body = agent.post("/api/v1/enrich", {"text": "Set it up as @w-root says", "surface": "prompt"},
                      format="json").json()

    (link,) = [s for s in Trace.objects.get(pk=body["trace_id"]).steps if s["pass"] == "link"]
    assert {d["source_id"] for d in link["discovered"]} == {"w-secret"}
    hints = {h["source_id"]: h for h in body["hints"]}
    assert hints["w-secret"]["withheld"] and "w-leaf" not in hints
    assert "quartz lantern" not in body["text"]


def test_the_link_step_names_the_request_enrich_raised_for_a_withheld_root(agent, chain):
    """@w-root and @w-secret both expand; w-root links to w-secret, which is withheld and
    gets its first request: the trace's link step says so, as the hints do (the step is
    written before the requests are raised, and completed after)."""
    body = agent.post("/api/v1/enrich", {"text": "Set it up as @w-root and @w-secret say", "surface": "prompt"},
                      format="json").json()

    raised = ApprovalRequest.objects.get(source__slug="w-secret")
    (link,) = [s for s in Trace.objects.get(pk=body["trace_id"]).steps if s["pass"] == "link"]
    (secret,) = [c for c in link["candidates"] if c["source_id"] == "w-secret"]
    assert (secret["withheld"], secret["request_id"]) == (True, raised.pk)
    assert f"request {raised.pk} awaits a reviewer" in secret["reason"]
    assert {h["source_id"]: h["request_id"] for h in body["hints"]}["w-secret"] == raised.pk
