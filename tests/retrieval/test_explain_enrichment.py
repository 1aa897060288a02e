"""POST /api/v1/explain/enrichment: why enrichment of a text did or did not hint a
reference, pass by pass, over the real detection index and embedder. The readings are
enrich's own: the semantic pass's threshold and the reference's similarity are the ones
the trace of the same enrich call records."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from catalog.models import Catalog, ReferenceSource
from catalog.sources.documents import DocumentInput
from catalog.tags import tags_ensure
from retrieval.models import Selection, Trace
from tests.factories import agent_with_token, import_documents, person

pytestmark = pytest.mark.django_db

URL = "/api/v1/explain/enrichment"
RETRY_PROMPT = "Our calls to the billing service fail now and then: how should transient failures be retried?"
TEXTS = {
    "retries": ("Retries", "Retry transient failures with exponential backoff and jitter. Cap the number of "
                           "attempts and the total time spent; never retry a request that is not idempotent."),
    "caching": ("Caching", "Cache responses with a time to live. Invalidate the cache on every write to the "
                           "underlying record; refresh early to avoid a stampede of misses."),
    "logging": ("Logging", "Log in JSON with a request id on every line. Never log secrets or tokens."),
}


@pytest.fixture
def lib(make_catalog) -> Catalog:
    """Three selectable references, one document each, `retries` tagged `backoff`."""
    catalog = make_catalog("lib")
    for slug, (title, text) in TEXTS.items():
        source = import_documents(catalog=catalog, slug=slug,
                                  documents=[DocumentInput(f"{slug}.md", title, text, len(text.encode()))])
        ReferenceSource.objects.filter(pk=source.pk).update(name=title, description=f"How we do {slug}.")
    ReferenceSource.objects.get(slug="retries").tags.add(*tags_ensure(names=["backoff"]))
    return catalog


@pytest.fixture
def bot(lib) -> APIClient:
    """An agent whose semantic floor is 0, so that the margin below the best match decides."""
    _, token = agent_with_token(name="lib-bot", catalogs=[lib], semantic_threshold=0.0, semantic_margin=0.05)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def explain(client: APIClient, **body) -> dict:
    response = client.post(URL, body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def passes(body: dict) -> dict[str, dict]:
    return {stage["name"]: stage for stage in body["passes"]}


def test_a_reference_below_the_semantic_margin_is_told_its_score_the_threshold_and_the_margin(bot):
    body = explain(bot, prompt=RETRY_PROMPT, reference="caching")

    assert body["outcome"] == "not_hinted" and body["verdict"] == "not hinted: no pass found it"
    semantic = passes(body)["semantic"]
    assert semantic["ran"] and not semantic["matched"]
    assert (semantic["floor"], semantic["margin"]) == (0.0, 0.05)
    assert semantic["threshold"] == pytest.approx(semantic["best"] - 0.05, abs=1e-4)
    assert semantic["score"] < semantic["threshold"]
    assert (f"The semantic pass did not find it: similarity {semantic['score']:.4f} is below the threshold "
            f"{semantic['threshold']:.4f}: more than the margin 0.05 below the best match, "
            f"{semantic['best']:.4f}.") in body["sentences"]
    assert body["sentences"][-1] == "Verdict: not hinted: no pass found it."
    assert passes(body)["tag"]["note"] == "it has no tags"
    assert passes(body)["path"] == {**passes(body)["path"], "ran": False, "note": "runs on tool results only"}
    assert (Trace.objects.count(), ApprovalRequest.objects.count(), Selection.objects.count()) == (0, 0, 0)


def test_the_readings_are_those_of_enrichs_own_semantic_pass(bot):
    body = explain(bot, prompt=RETRY_PROMPT, reference="caching")
    enriched = bot.post("/api/v1/enrich", {"text": RETRY_PROMPT, "surface": "prompt"}, format="json")

    assert enriched.status_code == 200
    step = next(step for step in Trace.objects.get().steps if step["pass"] == "semantic")
    semantic = passes(body)["semantic"]
    assert step["threshold"] == semantic["threshold"]
    assert step["nearest_below_threshold"]["lib/caching"] == round(semantic["score"], 4)
    assert "caching" not in [hint["source_id"] for hint in enriched.json()["hints"]]


def test_a_hinted_reference_says_which_passes_found_it(bot):
    body = explain(bot, prompt=RETRY_PROMPT + " We use exponential backoff.", reference="@retries")

    assert body["outcome"] == "hinted" and body["verdict"] == "hinted (the tag pass)"
    found = passes(body)
    assert found["tag"]["matched"] and found["tag"]["found"] == ["backoff"]
    assert found["semantic"]["matched"] and found["semantic"]["score"] >= found["semantic"]["threshold"]
    assert "The tag pass found it: backoff." in body["sentences"]
    assert body["sentences"][-1] == "Verdict: hinted (the tag pass)."
    assert (body["catalog"], body["source_id"], body["governance"]["withheld"]) == ("lib", "retries", False)


def test_a_mention_expands_and_the_max_hints_cut_is_named(lib, bot):
    _, token = agent_with_token(name="one-hint", catalogs=[lib], semantic_threshold=0.0, semantic_margin=1.0,
                                max_hints=1)
    one = APIClient()
    one.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")

    expanded = explain(bot, prompt="See @logging for the format.", reference="logging")
    cut = explain(one, prompt=RETRY_PROMPT, reference="logging")  # every reference close enough; one hint kept

    assert expanded["outcome"] == "expanded" and passes(expanded)["mention"]["found"] == ["@logging"]
    assert cut["outcome"] == "cut" and cut["max_hints"] == 1
    assert cut["verdict"] == "found by the semantic pass, but beyond the agent's max_hints (1)"
    assert passes(cut)["semantic"]["matched"]


@pytest.fixture
def vault(lib) -> ReferenceSource:
    text = "Rotate the vault credentials every ninety days. Keep the root token offline."
    source = import_documents(catalog=lib, slug="vault",
                              documents=[DocumentInput("vault.md", "Vault", text, len(text))])
    ReferenceSource.objects.filter(pk=source.pk).update(requires_approval=True, name="Vault")
    source.tags.add(*tags_ensure(names=["credentials"]))
    return source


def test_a_withheld_reference_is_told_only_what_enrich_would_tell(bot, vault):
    tagged = explain(bot, prompt="Rotate the credentials before Friday.", reference="vault")
    unrelated = explain(bot, prompt=RETRY_PROMPT, reference="vault")

    assert tagged["outcome"] == "withheld" and tagged["governance"]["withheld"] is True
    assert [stage["name"] for stage in tagged["passes"]] == ["tag"]  # as its hint names it
    assert tagged["passes"][0]["found"] == ["credentials"] and tagged["passes"][0]["score"] is None
    assert unrelated["passes"] == [] and unrelated["verdict"].endswith("; this text did not surface it")
    for body in (tagged, unrelated):
        text = json.dumps(body).lower()
        for revealing in ("ninety", "offline", "root", "threshold\": 0", "similarity"):
            assert revealing not in text, revealing
    assert ApprovalRequest.objects.count() == 0  # explain raises nothing


def test_an_unknown_or_ambiguous_reference_is_an_answer(lib, make_catalog, bot):
    other = make_catalog("other")
    import_documents(catalog=other, slug="caching", documents=[DocumentInput("c.md", "C", "Cache it.", 9)])
    _, token = agent_with_token(name="two-bot", catalogs=[lib, other])
    both = APIClient()
    both.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")

    unknown = explain(bot, prompt=RETRY_PROMPT, reference="nowhere")
    ambiguous = explain(both, prompt=RETRY_PROMPT, reference="caching")
    named = explain(both, prompt=RETRY_PROMPT, reference="other/caching")

    assert unknown["outcome"] == "no_reference" and unknown["passes"] == []
    assert ambiguous["outcome"] == "ambiguous" and ambiguous["verdict"].endswith("write catalog/id")
    assert named["outcome"] == "not_hinted" and named["catalog"] == "other"


@pytest.mark.parametrize(("body", "field"), [
    ({"reference": "caching"}, "prompt"),
    ({"prompt": "retry"}, "reference"),
    ({"prompt": "retry", "reference": "no such id!"}, "reference"),
    ({"prompt": "retry", "reference": "caching", "surface": "email"}, "surface"),
])
def test_bad_input_is_a_400_naming_the_field(bot, body, field):
    response = bot.post(URL, body, format="json")

    assert response.status_code == 400
    assert field in response.json()["error"]["details"]["fields"]


def test_a_signed_in_curator_is_explained_with_the_default_profile(lib, client_for):
    response = client_for(person("cora", "curator")).post(
        URL, {"prompt": RETRY_PROMPT, "reference": "retries"}, content_type="application/json")

    assert response.status_code == 200, response.content
    semantic = passes(response.json())["semantic"]
    assert (semantic["floor"], semantic["margin"]) == (0.3, 0.1)  # Agent's defaults


def test_a_catalogs_own_semantic_floor_and_margin_win_over_the_agents(lib, bot):
    from catalog.catalogs import catalog_ranking_update

    before = passes(explain(bot, prompt=RETRY_PROMPT, reference="retries"))["semantic"]
    assert before["matched"] and (before["floor"], before["margin"]) == (0.0, 0.05)

    catalog_ranking_update(catalog=lib, values={"semantic_threshold": 0.99, "semantic_margin": 0.5}, by=None)
    body = explain(bot, prompt=RETRY_PROMPT, reference="retries")
    semantic = passes(body)["semantic"]
    assert not semantic["matched"] and (semantic["floor"], semantic["margin"]) == (0.99, 0.5)
    assert semantic["threshold"] == 0.99 and semantic["score"] == pytest.approx(before["score"])
    assert "the floor (semantic_threshold)" in semantic["note"]
    enriched = bot.post("/api/v1/enrich", {"text": RETRY_PROMPT, "surface": "prompt"}, format="json").json()
    assert enriched["hints"] == []
    step = next(step for step in Trace.objects.get().steps if step["pass"] == "semantic")
    assert step["by_catalog"] == {"lib": {"threshold": 0.99, "floor": 0.99, "margin": 0.5}}
    assert (step["floor"], step["margin"]) == (0.0, 0.05)  # the agent's, for catalogs without their own
