"""The traces pages (curators): recent enrichments filtered by caller, reference, withheld,
kind of text and date, and one trace told pass by pass, over the demo catalog, where
`secrets-management` needs an approval the demo agent lacks. Traces come from real calls:
the demo agent's token and a person's session."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.models import Agent
from retrieval.enrichment.formatting import append_blocks, injection_signer
from retrieval.models import Trace
from retrieval.traces.services import insert_trace
from tests.factories import person
from tests.pages import filter_slots

pytestmark = pytest.mark.django_db

TRACES = "/traces/"
SECRETS = "Rotate the vault credentials; our redis cache is stale"
CACHE = "Our redis cache is stale, see @caching"


@pytest.fixture
def cora(demo, cora, client_for) -> Client:
    """The curator (tests/conftest.py) signed in, over the demo catalog."""
    return client_for(cora)


def agent_enrich(demo, text: str, surface: str = "prompt") -> str:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {demo.token}")
    response = client.post("/api/v1/enrich", {"text": text, "surface": surface}, format="json")
    assert response.status_code == 200, response.content
    return str(response.json()["trace_id"])


def person_enrich(text: str) -> str:
    client = APIClient()
    pia = User.objects.filter(username="pia").first() or person("pia", "curator")
    client.force_authenticate(pia)
    return str(client.post("/api/v1/enrich", {"text": text, "surface": "tool_result"}, format="json")
               .json()["trace_id"])


def listed(client: Client, **filters) -> tuple[int, str]:
    response = client.get(TRACES, filters)
    return response.status_code, response.content.decode()


def test_the_list_shows_each_enrichment_with_what_it_sent_and_withheld(cora, demo):
    secrets = agent_enrich(demo, SECRETS)
    cache = agent_enrich(demo, CACHE)

    status, page = listed(cora)

    assert status == 200 and 'aria-current="page">Traces' in page
    assert page.index(f"/traces/{cache}/") < page.index(f"/traces/{secrets}/"), "newest first"
    assert "Rotate the vault credentials; our redis cache is stale" in page
    assert '<code class="withheld-ref">secrets-management</code>' in page
    assert "<code>caching</code>" in page


@pytest.mark.parametrize(("filters", "shown", "hidden"), [
    ({"agent": "demo-agent"}, ["secrets", "cache"], ["person"]),
    ({"agent": "people"}, ["person"], ["secrets", "cache"]),
    ({"withheld": "yes"}, ["secrets", "person"], ["cache"]),
    ({"withheld": "no"}, ["cache"], ["secrets", "person"]),
    ({"source": "demo/secrets-management"}, ["secrets", "person"], ["cache"]),
    ({"source": "demo/caching", "agent": "demo-agent"}, ["secrets", "cache"], ["person"]),
    ({"surface": "tool_result"}, ["person"], ["secrets", "cache"]),
])
def test_the_filters_narrow_the_list(cora, demo, filters, shown, hidden):
    ids = {"secrets": agent_enrich(demo, SECRETS), "cache": agent_enrich(demo, CACHE),
           "person": person_enrich(SECRETS)}

    status, page = listed(cora, **filters)

    assert status == 200
    assert [name for name in ids if f"/traces/{ids[name]}/" in page] == shown
    assert not [name for name in hidden if f"/traces/{ids[name]}/" in page]
    assert f"{len(shown)}</strong> trace" in page and "match" in page


def test_the_date_range_is_in_utc_days_both_ends_included(cora, demo):
    old = agent_enrich(demo, CACHE)
    Trace.objects.filter(pk=old).update(created_at=timezone.now() - timedelta(days=3))
    new = agent_enrich(demo, SECRETS)
    today = timezone.now().date()

    _, page = listed(cora, since=str(today))
    assert f"/traces/{new}/" in page and f"/traces/{old}/" not in page
    _, page = listed(cora, until=str(today - timedelta(days=3)))
    assert f"/traces/{old}/" in page and f"/traces/{new}/" not in page


@pytest.mark.parametrize(("filters", "field", "message"), [
    ({"since": "2026-05-02", "until": "2026-05-01"}, "until", "The end of the range comes before its start."),
    ({"since": "yesterday"}, "since", "Enter a valid date."),
    ({"agent": "nobody-bot"}, "agent", "Select a valid choice."),
])
def test_bad_filters_are_refused_in_place(cora, demo, filters, field, message):
    """Beside the field each is about (tests/test_filter_errors.py has every list page,
    and their htmx answers)."""
    agent_enrich(demo, CACHE)

    status, page = listed(cora, **filters)

    assert status == 400 and "0</strong> traces" in page
    assert message in filter_slots(page)[f"id_{field}"]


def test_the_list_and_a_trace_take_the_same_statements_for_2_traces_as_for_8(cora, demo):
    def statements(path: str) -> int:
        with CaptureQueriesContext(connection) as queries:
            assert cora.get(path).status_code == 200
        return len(queries)

    first = agent_enrich(demo, SECRETS)
    person_enrich(CACHE)
    two = (statements(TRACES), statements(f"{TRACES}?withheld=yes&agent=demo-agent"), statements(f"/traces/{first}/"))
    for text in ("alpha redis", "beta secrets vault", "gamma circuit breaker"):
        agent_enrich(demo, text)
        person_enrich(text)

    eight = (statements(TRACES), statements(f"{TRACES}?withheld=yes&agent=demo-agent"),
             statements(f"/traces/{first}/"))

    assert Trace.objects.count() == 8 and eight == two, (two, eight)


def test_a_trace_tells_each_pass_in_plain_words(cora, demo):
    trace = agent_enrich(demo, SECRETS)

    page = cora.get(f"/traces/{trace}/").content.decode()

    assert "A prompt enriched for demo-agent" in page
    for title in ("@mentions", "Tags", "Meaning", "Ranking", "Approval gate", "Text sent back"):
        assert f"<h3>{title}</h3>" in page
    assert "The text names no reference by @id." in page
    assert '<mark title="tag redis">redis<span class="sr-only"> (tag redis)</span></mark>' in page
    request = Trace.objects.get(pk=trace).hints
    secrets = next(h for h in request if h["source_id"] == "secrets-management")
    assert f'href="/approvals/{secrets["request_id"]}/">Request #{secrets["request_id"]}</a>' in page
    assert "Run it again in the playground" in page and "kind=prompt" in page and "agent=demo-agent" in page


def test_a_trace_shows_the_text_as_read_with_earlier_injections_removed(cora, demo):
    signer = injection_signer(agent=Agent.objects.get(name="demo-agent"))  # as enrich signs for the demo agent
    injected = append_blocks("Our redis cache is stale again.", ["**Reference sources available** — ..."],
                             signer=signer)
    trace = agent_enrich(demo, injected)  # the agent sends back what it got

    page = cora.get(f"/traces/{trace}/").content.decode()

    assert "Reference sources available" not in page.split('id="text-title"')[1].split("</pre>")[0]
    assert "characters of Lectern&#x27;s earlier injections were removed" in page \
        or "characters of Lectern's earlier injections were removed" in page


def test_a_trace_without_its_text_or_places_still_reads(cora, demo):
    trace = Trace(caller="old-bot", surface="tool_result", text=None, hints=[], took_ms=1.0, steps=[
        {"pass": "tag", "ms": 0.1, "candidates": 0, "tags": {}}, {"pass": "format", "ms": 0.0, "blocks": 0}])
    insert_trace(trace)

    response = cora.get(f"/traces/{trace.pk}/")

    page = response.content.decode()
    assert response.status_code == 200 and "Not kept: this server stores no text" in page
    assert "No tag of the caller&#x27;s references occurs in the text." in page or \
        "No tag of the caller's references occurs in the text." in page
    assert "Run it again" not in page


def test_an_unknown_trace_is_404(cora):
    assert cora.get("/traces/00000000-0000-0000-0000-000000000000/").status_code == 404
