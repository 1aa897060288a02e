"""Dry runs (the playground's): enrichment and search through their own code paths as an
agent, with the same answer as the agent's own call and nothing written in its name,
over the demo catalog, where `secrets-management` needs an approval the demo agent lacks.
And the tag step's record of where each tag occurs."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest, AuditEntry
from approvals.services.policies import policy_create
from catalog.models import Agent, Catalog
from retrieval.enrichment.caller import Caller
from retrieval.enrichment.pipeline import enrich
from retrieval.models import Selection, Trace
from retrieval.search.selectors import SearchOptions, chunk_search
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

    dry = enrich(caller=caller, text=PROMPT, surface="prompt", dry_run=True)

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
    dry = enrich(caller=caller, text=PROMPT, surface="prompt", dry_run=True)

    decisions = next(step for step in dry.trace.steps if step["pass"] == "governance")["decisions"]
    secrets = next(d for d in decisions if d["source_id"] == "secrets-management")
    assert secrets["allowed"] is False and secrets["request_due"] is True and secrets["request_id"] is None
    assert all("request_due" not in d for d in decisions if d["allowed"])


def test_the_real_call_records_no_request_due(caller):
    real = enrich(caller=caller, text=PROMPT, surface="prompt")

    decisions = next(step for step in real.trace.steps if step["pass"] == "governance")["decisions"]
    assert not any("request_due" in d for d in decisions)


def test_the_tag_step_records_where_each_tag_first_occurs(caller):
    result = enrich(caller=caller, text=PROMPT, surface="prompt", dry_run=True)

    tag = next(step for step in result.trace.steps if step["pass"] == "tag")
    assert set(tag["at"]) == set(tag["tags"])
    for name, (start, end) in tag["at"].items():
        assert PROMPT[start:end].lower().replace("\n", " ") == name
    assert PROMPT[slice(*tag["at"]["circuit breaker"])] == "circuit\nbreaker"


def test_a_dry_run_search_raises_nothing_and_says_a_request_is_due(demo):
    agent = Agent.objects.get(name="demo-agent")
    catalog = Catalog.objects.get(slug="demo")
    # matches disclosed, so the agent's own search raises a request (by default it raises none: issue 20)
    policy_create(by=person("cora", "curator"), source=catalog.sources.get(slug="secrets-management"),
                  disclose_matches=True)
    before = footprint()

    dry = chunk_search(catalog=catalog, query="secrets rotation vault", options=SearchOptions(mode="bm25"),
                       agent=agent, dry_run=True)

    assert footprint() == before
    entry = next(e for e in dry.withheld if e.source == "secrets-management")
    assert entry.request_due and entry.request_id is None
    real = chunk_search(catalog=catalog, query="secrets rotation vault", options=SearchOptions(mode="bm25"),
                        agent=agent)
    assert [h.key for h in real.hits] == [h.key for h in dry.hits]
    raised = next(e for e in real.withheld if e.source == "secrets-management")
    assert raised.request_id is not None and not raised.request_due
