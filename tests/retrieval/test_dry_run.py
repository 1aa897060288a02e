"""Reads that write nothing (the playground's): enrichment and search read through the
agent's own code paths, with the same answer as the agent's call and nothing written in
its name, over the demo catalog, where `secrets-management` needs an approval the demo
agent lacks; the agent's call raises what is due afterwards, from the gate's one read.
And the tag step's record of where each tag occurs."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest
from approvals.services.policies import policy_create
from approvals.services.requests import withheld_requests_raise
from catalog.models import Agent, AuditEntry, Catalog
from retrieval.enrichment.caller import Caller
from retrieval.enrichment.pipeline import enrich, enrich_preview
from retrieval.models import Selection, Trace
from retrieval.search.selectors import SearchOptions, chunk_search, requests_due, with_requests
from tests.factories import person

pytestmark = pytest.mark.django_db

PROMPT = "Rotate the vault credentials, use @caching; our Redis cache and the circuit\nbreaker trip."


def footprint() -> tuple[int, int, int, int]:
    return (ApprovalRequest.objects.count(), Trace.objects.count(), Selection.objects.count(),
            AuditEntry.objects.count())


@pytest.fixture
def caller(demo) -> Caller:
    return Caller.of(Agent.objects.get(name="demo-agent"))


def test_a_dry_run_enriches_as_the_real_call_does_and_writes_nothing(caller):
    before = footprint()

    dry = enrich_preview(caller=caller, text=PROMPT, surface="prompt")

    assert footprint() == before
    assert dry.trace._state.adding, "the trace is built, not stored"
    real = enrich(caller=caller, text=PROMPT, surface="prompt")
    assert footprint()[:3] == (before[0] + 1, before[1] + 1, before[2] + 1), "the real call: request, trace, grant"
    # The same text and hints, but for the request the real call raised and names.
    raised = ApprovalRequest.objects.get()
    named, unnamed = f"request {raised.pk} awaits a reviewer", "no reviewer has approved it for this agent"
    assert body(real.text).replace(named, unnamed) == body(dry.text)
    assert dry.hints == [{**hint, "request_id": None, "reason": hint["reason"].replace(named, unnamed)}
                         if hint["withheld"] else hint for hint in real.hints]


def body(text: str) -> str:
    """An enriched text without its signed marker (its MAC covers the text)."""
    return text.rsplit("\n<!-- lectern ", 1)[0]


def test_a_dry_run_says_which_withheld_reference_would_raise_a_request(caller):
    dry = enrich_preview(caller=caller, text=PROMPT, surface="prompt")

    decisions = next(step for step in dry.trace.steps if step["pass"] == "governance")["decisions"]
    secrets = next(d for d in decisions if d["source_id"] == "secrets-management")
    assert secrets["allowed"] is False and secrets["request_due"] is True and secrets["request_id"] is None
    assert all("request_due" not in d for d in decisions if d["allowed"])


def test_the_real_call_records_no_request_due(caller):
    real = enrich(caller=caller, text=PROMPT, surface="prompt")

    decisions = next(step for step in real.trace.steps if step["pass"] == "governance")["decisions"]
    assert not any("request_due" in d for d in decisions)


def test_the_tag_step_records_where_each_tag_first_occurs(caller):
    result = enrich_preview(caller=caller, text=PROMPT, surface="prompt")

    tag = next(step for step in result.trace.steps if step["pass"] == "tag")
    assert set(tag["at"]) == set(tag["tags"])
    for name, (start, end) in tag["at"].items():
        assert PROMPT[start:end].lower().replace("\n", " ") == name
    assert PROMPT[slice(*tag["at"]["circuit breaker"])] == "circuit\nbreaker"


def test_a_search_reads_raising_nothing_and_says_a_request_is_due(demo):
    agent = Agent.objects.get(name="demo-agent")
    catalog = Catalog.objects.get(slug="demo")
    # matches disclosed, so the agent's own search raises a request (by default it raises none)
    policy_create(by=person("cora", "curator"), source=catalog.sources.get(slug="secrets-management"),
                  disclose_matches=True)
    before = footprint()

    dry = chunk_search(catalog=catalog, query="secrets rotation vault", options=SearchOptions(mode="bm25"),
                       agent=agent)

    assert footprint() == before
    entry = next(e for e in dry.withheld if e.source == "secrets-management")
    assert entry.request_due and entry.request_id is None
    real = chunk_search(catalog=catalog, query="secrets rotation vault", options=SearchOptions(mode="bm25"),
                        agent=agent)
    assert [h.key for h in real.hits] == [h.key for h in dry.hits]
    raised_now = withheld_requests_raise(agent=agent, decisions=requests_due(real.withheld, real.gate), via="search",
                                         context="search: secrets rotation vault")
    withheld = with_requests(real.withheld, raised_now)
    raised = next(e for e in withheld if e.source == "secrets-management")
    assert raised.request_id == ApprovalRequest.objects.get().pk and not raised.request_due
    assert raised.state == "pending" and f"request {raised.request_id} awaits a reviewer" in raised.reason


def test_the_agents_search_reads_the_gate_once_and_raises_what_is_due(demo):
    """POST /api/v1/search: the gate's statement runs once over the catalog; the request
    it raises comes from that decision, not from a second read. The one other gate read
    asks only about the hits' own sources, for the approvals that let them through."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    from catalog.agents import agent_token_rotate

    agent, token = agent_token_rotate(name="demo-agent")
    catalog = Catalog.objects.get(slug="demo")
    policy_create(by=person("cora", "curator"), source=catalog.sources.get(slug="secrets-management"),
                  disclose_matches=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")

    with CaptureQueriesContext(connection) as queries:
        response = client.post("/api/v1/search", {"catalog": "demo", "query": "secrets rotation vault",
                                                  "mode": "bm25"}, format="json")

    assert response.status_code == 200, response.content
    gate_reads = [q["sql"] for q in queries.captured_queries if "FROM approvals_approvalpolicy p" in q["sql"]]
    assert len(gate_reads) == 2
    assert "s.catalog_id = ANY" in gate_reads[0] and "s.id = ANY" in gate_reads[1]  # the catalog, then the hits
    (entry,) = [e for e in response.json()["withheld"]["sources"] if e["source"] == "secrets-management"]
    assert entry["request_id"] == ApprovalRequest.objects.get(agent=agent).pk
