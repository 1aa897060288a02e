"""The playground (curators): a search, a prompt or a tool result run as an agent or as a
person over the demo catalog, where `secrets-management` and `incident-response` need
an approval the demo agent lacks. What it shows is what the agent's own call gets; it
writes nothing in anyone's name (no request, no trace, no grant); refusals are shown
beside their fields with the input kept; a run's link runs it again."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from approvals.services.policies import policy_create
from catalog.models import Agent, AuditEntry, Catalog, ReferenceSource
from retrieval.models import Selection, Trace
from retrieval.search.forms import SHARE_MAX, TEXT_MAX
from tests.factories import agent_with_token, person

pytestmark = pytest.mark.django_db

PLAYGROUND = "/playground/"
QUERY = "secrets rotation vault credentials"
PROMPT = "Our redis cache keeps stale entries; see @caching and rotate the vault credentials"


@pytest.fixture
def cora(demo, cora, client_for) -> Client:
    """The curator (tests/conftest.py) signed in, over the demo catalog."""
    return client_for(cora)


@pytest.fixture
def agent_api(demo) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {demo.token}")
    return client


def footprint() -> tuple[int, int, int, int]:
    """What a run must not add to: requests, traces, grants, audit entries."""
    return (ApprovalRequest.objects.count(), Trace.objects.count(), Selection.objects.count(),
            AuditEntry.objects.count())


def run(client: Client, **fields) -> tuple[int, str]:
    response = client.post(PLAYGROUND, fields, HTTP_HX_REQUEST="true")
    return response.status_code, response.content.decode()


def test_the_empty_playground_is_the_form_with_search_chosen(cora):
    response = cora.get(PLAYGROUND)

    page = response.content.decode()
    assert response.status_code == 200
    assert 'aria-current="page">Playground' in page
    assert 'name="kind" value="search"' in page and "checked" in page.split('value="search"')[1].split(">")[0]
    assert 'id="run"' not in page


def test_home_sends_a_curator_to_the_playground_and_a_reviewer_to_the_queue(demo):
    curator, reviewer = Client(), Client()
    curator.force_login(person("cora", "curator"))
    reviewer.force_login(person("rita", "reviewer"))

    assert curator.get("/")["Location"] == reverse("playground")
    assert reviewer.get("/")["Location"] == reverse("approvals-queue")


def test_a_search_as_the_agent_shows_what_its_own_search_gets_and_raises_nothing(cora, agent_api):
    secrets = ReferenceSource.objects.get(slug="secrets-management")
    policy_create(by=User.objects.get(username="cora"), source=secrets,
                  disclose_matches=True)  # else its search raises none (issue 20)
    before = footprint()

    status, page = run(cora, kind="search", agent="demo-agent", catalog="demo", text=QUERY, mode="bm25",
                       top_k="5")

    assert status == 200
    assert footprint() == before, "a dry run: no request, trace, grant or audit entry"
    api = agent_api.post("/api/v1/search", {"catalog": "demo", "query": QUERY, "mode": "bm25", "top_k": 5},
                         format="json").json()
    assert re.findall(r'data-chunk="([^"]+)"', page) == [hit["chunk_id"] for hit in api["results"]]
    assert "secrets-management" in page and "A search by this agent would raise an approval request now" in page
    assert ApprovalRequest.objects.count() > before[0], "while the agent's own search raised its requests"


def test_a_search_shows_every_component_score_and_rank_and_marks_the_query_terms(cora):
    status, page = run(cora, kind="search", catalog="demo", text="How do retries back off?", mode="hybrid")

    assert status == 200
    assert page.count('class="play-hit"') == 10  # a person's default
    assert "<dt>Fused</dt>" in page and "<dt>BM25</dt>" in page and "<dt>Vector</dt>" in page
    assert "<mark>retries</mark>" in page.lower() or "<mark>retry</mark>" in page.lower()
    assert "<code>retri</code>" in page, "the stemmed terms BM25 looked for"


def test_a_person_sees_nothing_governed_and_the_reason(cora):
    status, page = run(cora, kind="search", catalog="demo", text=QUERY, mode="bm25", top_k="5")

    assert status == 200
    assert "approvals are granted to agents, not to people signed in" in page
    assert "secrets-management/" not in page, "no hit of a withheld reference"


def test_text_is_escaped_before_terms_are_marked(cora, demo):
    catalog = Catalog.objects.get(slug="demo")
    from catalog.sources.documents import DocumentInput
    from tests.factories import import_documents

    text = "The <script>alert('x')</script> quartzite lantern escapes."
    import_documents(catalog=catalog, slug="markup", documents=[DocumentInput("markup.md", "Markup", text, len(text))])

    status, page = run(cora, kind="search", catalog="demo", text="quartzite <b>lantern</b>", mode="bm25")

    assert status == 200
    assert "<script>alert" not in page and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "<mark>quartzite</mark> <mark>lantern</mark>" in page
    assert "<b>lantern</b>" not in page


def test_a_prompt_as_the_agent_is_enriched_as_its_own_call_would_be_and_writes_nothing(cora, agent_api):
    before = footprint()

    status, page = run(cora, kind="prompt", agent="demo-agent", text=PROMPT)

    assert status == 200 and footprint() == before
    api = agent_api.post("/api/v1/enrich", {"text": PROMPT, "surface": "prompt"}, format="json").json()
    sent = [hint["ref"] for hint in api["hints"] if not hint["withheld"]]
    withheld = [hint["ref"] for hint in api["hints"] if hint["withheld"]]
    assert sent and withheld == ["secrets-management"]
    for ref in sent + withheld:
        assert f"<code>{ref}</code>" in page
    assert "The agent's own call would raise an approval request now" in page
    assert '<mark title="tag redis">redis<span class="sr-only"> (tag redis)</span></mark>' in page
    assert "Asked the approval gate about each of the" in page
    assert Trace.objects.count() == before[1] + 1, "the agent's own call left its trace"


def test_a_tool_result_as_a_person_reads_content_words_and_withholds_what_needs_approval(cora):
    status, page = run(cora, kind="tool_result", text="$ cat notes.txt\nrotate the vault credentials and secrets")

    assert status == 200
    assert "read its content words" in page
    assert "approvals are granted to agents, not to people signed in" in page and "secrets-management" in page


@pytest.mark.parametrize(("fields", "field", "message"), [
    ({"kind": "search", "catalog": "demo", "text": "   "}, "text", "Type a query, a prompt or a tool result"),
    ({"kind": "search", "text": "retries"}, "catalog", "Choose the catalog to search."),
    ({"kind": "search", "catalog": "demo", "text": "retries", "top_k": "0"}, "top_k", "greater than or equal to 1"),
    ({"kind": "search", "catalog": "demo", "text": "retries", "mode": "fastest"}, "mode", "Select a valid choice"),
    ({"kind": "prompt", "agent": "nobody-bot", "text": "retries"}, "agent", "Select a valid choice"),
    ({"kind": "poem", "text": "retries"}, "kind", "Select a valid choice"),
])
def test_a_refused_run_says_why_beside_the_field_and_keeps_the_input(cora, fields, field, message):
    before = footprint()

    status, page = run(cora, **fields)

    assert status == 400 and footprint() == before
    assert 'id="form-errors"' in page and f'id="id_{field}_error"' in page and message in page
    assert 'id="run"' not in page
    if fields["text"].strip():
        assert f"{fields['text']}</textarea>" in page


def test_an_agent_cannot_be_run_over_a_catalog_outside_its_scope(cora, demo):
    Catalog.objects.create(slug="hr", name="HR")

    status, page = run(cora, kind="search", agent="demo-agent", catalog="hr", text="leave")

    assert status == 400
    assert "demo-agent may not read this catalog (its catalogs: demo)" in page


def test_a_run_has_a_link_that_runs_it_again(cora):
    response = cora.post(PLAYGROUND, {"kind": "search", "agent": "demo-agent", "catalog": "demo", "text": "retries",
                                      "mode": "bm25", "top_k": "3"}, HTTP_HX_REQUEST="true")

    link = response["HX-Push-Url"]
    assert link.startswith("/playground/?") and parse_qs(urlsplit(link).query) == {
        "kind": ["search"], "text": ["retries"], "agent": ["demo-agent"], "catalog": ["demo"], "mode": ["bm25"],
        "top_k": ["3"]}
    again = cora.get(link)
    page = again.content.decode()
    assert again.status_code == 200 and page.count('class="play-hit"') == 3
    assert "<h1>Playground</h1>" in page, "the whole page, the form filled in"
    assert "\nretries</textarea>" in page


def test_a_prompt_link_holds_only_what_a_prompt_uses(cora):
    response = cora.post(PLAYGROUND, {"kind": "prompt", "text": "retries", "mode": "bm25", "top_k": "3"},
                         HTTP_HX_REQUEST="true")

    assert parse_qs(urlsplit(response["HX-Push-Url"]).query) == {"kind": ["prompt"], "text": ["retries"]}


def test_a_run_too_long_for_a_link_says_so_and_still_runs(cora):
    text = "retries " * (SHARE_MAX // 8 + 10)

    response = cora.post(PLAYGROUND, {"kind": "prompt", "text": text}, HTTP_HX_REQUEST="true")

    page = response.content.decode()
    assert response.status_code == 200 and "HX-Push-Url" not in response
    assert "too long to share as a link" in page and 'id="run"' in page


def test_the_text_is_bounded(cora):
    status, page = run(cora, kind="prompt", text="x" * (TEXT_MAX + 1))

    assert status == 400 and "Ensure this value has at most" in page


def test_a_revoked_agent_is_not_offered(cora, demo):
    agent_with_token(name="gone-bot", catalogs=[Catalog.objects.get(slug="demo")])
    Agent.objects.filter(name="gone-bot").update(is_active=False)

    page = cora.get(PLAYGROUND).content.decode()

    assert 'value="demo-agent"' in page and 'value="gone-bot"' not in page
