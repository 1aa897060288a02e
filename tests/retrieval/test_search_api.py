"""POST /api/v1/search: the rag_search endpoint, over the real index and embedder.

Callers: an agent scoped to the "ops" catalog (bearer token), a staff user, a curator
and a plain user (session). Every refused request leaves the index and agents unchanged.
"""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from rest_framework.test import APIClient

from catalog.models import Agent, Catalog, Chunk, Document, Term
from catalog.sources.documents import DocumentInput
from retrieval.search import fusion
from tests.factories import agent_with_token, import_documents, person

URL = "/api/v1/search"
MODES = ("bm25", "vector", "hybrid", "bm25_tiebreak")
HIT_KEYS = {"rank", "chunk_id", "document_id", "title", "source", "byte_offset", "content",
            "locator", "citation", "cite", "fingerprint", "byte_start", "byte_end", "approval_id", "score", "scores",
            "ranks"}


@pytest.fixture
def ops_token(indexed_catalog, agent_token):
    return agent_token("ops-agent", [indexed_catalog])


@pytest.fixture
def client():
    return APIClient()


def search(client: APIClient, token: str | None = None, **body):
    if token:
        return client.post(URL, body, format="json", HTTP_AUTHORIZATION=f"Bearer {token}")
    return client.post(URL, body, format="json")


def index_state() -> tuple:
    catalogs = Catalog.objects.order_by("slug").values_list("slug", "chunk_count", "token_total", "term_count")
    return Chunk.objects.count(), Document.objects.count(), Term.objects.count(), list(catalogs)


def agents_state() -> list:
    return list(Agent.objects.order_by("name").values_list("name", "last_used_at", "is_active"))


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    return body["error"]


# --- happy paths -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_returns_the_documented_shape_with_the_relevant_document_first(client, ops_token, mode):
    response = search(client, ops_token, catalog="ops", query="circuit breaker for a failing dependency",
                      mode=mode, top_k=3)

    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"results", "mode", "took_ms", "degraded", "withheld", "query_truncated", "vector_query_chars"}
    assert body["withheld"] == {"count": 0, "sources": []}
    assert body["mode"] == mode and body["degraded"] is None
    assert body["query_truncated"] is False  # the model read the whole query, or none was embedded
    assert body["vector_query_chars"] == (None if mode == "bm25" else len("circuit breaker for a failing dependency"))
    assert isinstance(body["took_ms"], float) and body["took_ms"] >= 0
    results = body["results"]
    assert 1 <= len(results) <= 3
    assert [hit["rank"] for hit in results] == list(range(1, len(results) + 1))
    for hit in results:
        assert set(hit) == HIT_KEYS
        assert set(hit["scores"]) == {"bm25", "vector", "fused"}
        assert set(hit["ranks"]) == {"bm25", "vector"}
        assert hit["score"] == hit["scores"]["fused"]
        assert hit["source"] == "handbook"
        assert hit["chunk_id"] == f"ops:handbook:{hit['document_id']}:{hit['byte_offset']}"
    top = results[0]
    assert top["document_id"] == "circuit-breaker.md"
    assert top["content"].startswith("A circuit breaker stops calls")
    assert top["scores"]["bm25"] > 0
    scores = [hit["score"] for hit in results]
    assert scores == sorted(scores, reverse=True) or mode == "bm25_tiebreak"


def test_component_scores_and_ranks_follow_the_mode(client, ops_token):
    query = "circuit breaker"
    bm25 = search(client, ops_token, catalog="ops", query=query, mode="bm25").json()["results"][0]
    vector = search(client, ops_token, catalog="ops", query=query, mode="vector").json()["results"][0]
    hybrid = search(client, ops_token, catalog="ops", query=query, mode="hybrid").json()["results"][0]

    assert bm25["scores"]["vector"] is None and bm25["ranks"] == {"bm25": 1, "vector": None}
    assert bm25["score"] == bm25["scores"]["bm25"]
    assert vector["ranks"] == {"bm25": None, "vector": 1}
    assert vector["score"] == vector["scores"]["vector"]
    assert vector["scores"]["bm25"] == pytest.approx(bm25["scores"]["bm25"])  # filled in for the hit
    assert hybrid["ranks"] == {"bm25": 1, "vector": 1}
    assert hybrid["score"] == pytest.approx(2 / 61)  # RRF, k = 60, rank 1 in both lists


def test_a_successful_call_records_when_the_agent_was_last_used(client, ops_token):
    assert Agent.objects.get(name="ops-agent").last_used_at is None

    search(client, ops_token, catalog="ops", query="retry", mode="bm25")

    assert Agent.objects.get(name="ops-agent").last_used_at is not None


def test_last_use_is_written_at_most_once_a_minute(client, ops_token):
    from datetime import timedelta

    from django.utils import timezone

    recent = timezone.now() - timedelta(seconds=10)
    Agent.objects.filter(name="ops-agent").update(last_used_at=recent)
    search(client, ops_token, catalog="ops", query="retry", mode="bm25")
    assert Agent.objects.get(name="ops-agent").last_used_at == recent

    stale = timezone.now() - timedelta(minutes=5)
    Agent.objects.filter(name="ops-agent").update(last_used_at=stale)
    search(client, ops_token, catalog="ops", query="retry", mode="bm25")
    last_used = Agent.objects.get(name="ops-agent").last_used_at
    assert last_used is not None and last_used > stale


def test_convex_fusion_applies_the_weights_to_zscore_normalised_lists(client, ops_token):
    weights = {"bm25": 0.8, "vector": 0.2}

    response = search(client, ops_token, catalog="ops", query="cache invalidation on write", mode="hybrid",
                      fusion="convex", normalization="zscore", weights=weights, top_k=10)

    # then: the fused scores are the convex combination of the component lists shown
    results = response.json()["results"]
    lists = {
        name: [(h["chunk_id"], h["scores"][name]) for h in sorted(
            (h for h in results if h["ranks"][name] is not None), key=lambda h: h["ranks"][name])]
        for name in ("bm25", "vector")
    }
    assert lists["bm25"] and len(lists["vector"]) == 4, "every chunk is a vector hit in this tiny catalog"
    expected = fusion.convex(lists, weights=weights, normalise="zscore")
    assert [h["chunk_id"] for h in results] == [key for key, _ in expected]
    assert [h["score"] for h in results] == pytest.approx([score for _, score in expected])
    assert results[0]["document_id"] == "caching.md"


def test_convex_weights_decide_which_component_leads(client, ops_token):
    # given: a query the two components disagree on
    query = "log failures"
    lexical = search(client, ops_token, catalog="ops", query=query, mode="bm25").json()["results"]
    semantic = search(client, ops_token, catalog="ops", query=query, mode="vector").json()["results"]
    assert lexical[0]["document_id"] == "logging.md" and semantic[0]["document_id"] == "retries.md"

    def order(weights: dict) -> list[str]:
        results = search(client, ops_token, catalog="ops", query=query, mode="hybrid", fusion="convex",
                         weights=weights).json()["results"]
        return [h["document_id"] for h in results]

    assert order({"bm25": 1, "vector": 0})[0] == "logging.md"
    assert order({"bm25": 0, "vector": 1}) == [h["document_id"] for h in semantic]


def test_bm25_tiebreak_returns_only_hits_with_lexical_evidence(client, ops_token):
    # given: "failures" is in 2 of the 4 chunks, so its idf is ln(2.5 / 2.5) = 0, and
    # "jitter" only in retries.md: circuit-breaker.md holds a query term yet scores 0
    query = "failures jitter"
    lexical = search(client, ops_token, catalog="ops", query=query, mode="bm25", top_k=10).json()["results"]
    assert {h["document_id"]: h["scores"]["bm25"] for h in lexical}.get("circuit-breaker.md") == 0

    # when
    response = search(client, ops_token, catalog="ops", query=query, mode="bm25_tiebreak", top_k=10)

    # then: seed 004 keeps only documents with a non-zero BM25 score
    results = response.json()["results"]
    assert [h["document_id"] for h in results] == ["retries.md"]
    assert all(h["scores"]["bm25"] > 0 for h in results)


def test_bm25_tiebreak_answers_nothing_when_no_term_is_evidence(client, ops_token):
    response = search(client, ops_token, catalog="ops", query="failures", mode="bm25_tiebreak")

    assert response.status_code == 200, response.content
    assert response.json()["results"] == []


def test_without_top_k_an_agent_gets_its_own_default_top_k(client, indexed_catalog):
    # given: an agent whose instructions promise "up to 3 results"
    out = StringIO()
    call_command("create_agent", "--name", "terse", "--catalogs", "ops", "--top-k", "3", stdout=out)
    token = out.getvalue().strip()

    # when: it searches without top_k, in a mode that ranks every one of the 4 chunks
    default = search(client, token, catalog="ops", query="failures", mode="vector")
    asked = search(client, token, catalog="ops", query="failures", mode="vector", top_k=4)

    # then: the profile's default applies (MCP's rag_search applies the same one)
    assert len(default.json()["results"]) == 3
    assert len(asked.json()["results"]) == 4


def long_passage(chars: int, tail: str) -> str:
    """Exactly `chars` characters: words (or their heads) found in no chunk of the ops
    catalog, then `tail`."""
    filler = "the quarterly report lists revenue by region and the board approved the budget "
    passage = (filler * (chars // len(filler) + 1))[: chars - len(tail) - 1] + " " + tail
    assert len(passage) == chars
    return passage


def test_a_whole_passage_is_a_query_bm25_reading_every_term_and_the_model_its_head(client, ops_token):
    # given: a 20,000-character passage (a pasted tool result) whose only catalog terms
    # come at its end, far past what the embedding model reads
    passage = long_passage(20_000, "jitter backoff")

    lexical = search(client, ops_token, catalog="ops", query=passage, mode="bm25", top_k=3)
    hybrid = search(client, ops_token, catalog="ops", query=passage, mode="hybrid", top_k=4)

    # then: BM25 scored the terms at the end; the response says the vector side read a head
    assert lexical.status_code == 200, lexical.content
    assert [h["document_id"] for h in lexical.json()["results"]] == ["retries.md"]
    assert (lexical.json()["query_truncated"], lexical.json()["vector_query_chars"]) == (False, None)
    body = hybrid.json()
    assert body["query_truncated"] is True
    assert 0 < body["vector_query_chars"] < 2_000 < len(passage)
    assert body["results"][0]["document_id"] == "retries.md" and body["results"][0]["ranks"]["bm25"] == 1


def test_the_head_the_model_read_gives_the_same_vector_and_fits_whole(client, ops_token):
    passage = long_passage(20_000, "jitter backoff")
    read = search(client, ops_token, catalog="ops", query=passage, mode="vector").json()

    head = passage[: read["vector_query_chars"]]
    head_read = search(client, ops_token, catalog="ops", query=head, mode="vector").json()

    assert (head_read["query_truncated"], head_read["vector_query_chars"]) == (False, len(head))
    assert [h["chunk_id"] for h in head_read["results"]] == [h["chunk_id"] for h in read["results"]]
    assert [h["scores"]["vector"] for h in head_read["results"]] == pytest.approx(
        [h["scores"]["vector"] for h in read["results"]], abs=1e-5)


def test_a_query_may_be_as_long_as_an_enrich_text_and_no_longer(client, ops_token, settings):
    limit = settings.LECTERN_MAX_ENRICH_CHARS
    before = index_state()

    at_limit = search(client, ops_token, catalog="ops", query=long_passage(limit, "retry"), mode="hybrid")
    over = search(client, ops_token, catalog="ops", query=long_passage(limit + 1, "retry"), mode="hybrid")

    assert at_limit.status_code == 200, at_limit.content
    assert at_limit.json()["results"][0]["document_id"] == "retries.md"
    error = assert_error(over, 400, "invalid_input")
    assert list(error["details"]["fields"]) == ["query"]
    assert index_state() == before


@pytest.fixture
def multi_chunk_token(make_catalog, agent_token):
    """A catalog whose documents span several chunks each."""
    catalog = make_catalog("guides", chunk_size=100, chunk_overlap=0)
    texts = {
        "retry-guide.md": "Retry idempotent calls. Retry with exponential backoff. Retry at most five times. "
                          "Log each retry with its attempt number. Give up after the retry budget is spent.",
        "retry-faq.md": "Why retry? Transient faults pass. When not to retry? On validation errors. "
                        "How long to back off before a retry? Double the wait each time, with jitter.",
        "tls.md": "Rotate certificates before they expire.",
    }
    import_documents(catalog=catalog, slug="guides", documents=[
        DocumentInput(path, path, text, len(text)) for path, text in texts.items()
    ])
    return agent_token("guides-agent", [catalog])


@pytest.mark.parametrize("mode", MODES)
def test_dedup_returns_at_most_one_chunk_per_document(client, multi_chunk_token, mode):
    plain = search(client, multi_chunk_token, catalog="guides", query="retry backoff", mode=mode, top_k=10)
    deduped = search(client, multi_chunk_token, catalog="guides", query="retry backoff", mode=mode, top_k=10,
                     dedup=True)

    documents = [h["document_id"] for h in plain.json()["results"]]
    assert len(documents) > len(set(documents)), "precondition: without dedup a document repeats"
    kept = [h["document_id"] for h in deduped.json()["results"]]
    assert len(kept) == len(set(kept))
    assert set(kept) == set(documents)
    assert [h["rank"] for h in deduped.json()["results"]] == list(range(1, len(kept) + 1))


# --- refused requests ------------------------------------------------------------------------


def test_missing_token_is_401_and_changes_nothing(client, ops_token):
    before = index_state(), agents_state()

    response = search(client, None, catalog="ops", query="retry")

    assert_error(response, 401, "unauthenticated")
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert (index_state(), agents_state()) == before


@pytest.mark.parametrize("header", [
    "Bearer lct_not-a-real-token",
    "Bearer",
    "Bearer two parts",
    "Bearer caf\u00e9",
])
def test_bad_token_is_401_and_changes_nothing(client, ops_token, header):
    before = index_state(), agents_state()

    response = client.post(URL, {"catalog": "ops", "query": "retry"}, format="json", HTTP_AUTHORIZATION=header)

    assert_error(response, 401, "unauthenticated")
    assert (index_state(), agents_state()) == before


def test_revoked_token_is_401_and_changes_nothing(client, indexed_catalog):
    agent, token = agent_with_token(name="revoked", is_active=False)
    agent.catalogs.set([indexed_catalog])
    before = index_state(), agents_state()

    response = search(client, token, catalog="ops", query="retry")

    assert_error(response, 401, "unauthenticated")
    assert (index_state(), agents_state()) == before


def test_catalog_outside_the_tokens_scope_is_404_like_an_unknown_catalog(client, ops_token, make_catalog):
    make_catalog("secret-plans")
    before = index_state()

    hidden = search(client, ops_token, catalog="secret-plans", query="retry")
    unknown = search(client, ops_token, catalog="no-such-catalog", query="retry")

    hidden_error = assert_error(hidden, 404, "not_found")
    unknown_error = assert_error(unknown, 404, "not_found")
    assert hidden_error["message"].replace("secret-plans", "X") == unknown_error["message"].replace(
        "no-such-catalog", "X")
    assert index_state() == before


@pytest.mark.parametrize(("body", "field"), [
    ({"query": ""}, "query"),
    ({"query": "   "}, "query"),
    ({"catalog": "not a slug"}, "catalog"),
    ({"top_k": 0}, "top_k"),
    ({"top_k": 1001}, "top_k"),
    ({"top_k": "ten"}, "top_k"),
    ({"top_k": "10"}, "top_k"),  # JSON types are not coerced: the schema says integer
    ({"top_k": True}, "top_k"),
    ({"dedup": 0}, "dedup"),
    ({"dedup": "true"}, "dedup"),
    ({"weights": {"bm25": "1"}}, "weights"),
    ({"weights": {"vector": True}}, "weights"),
    ({"mode": "fuzzy"}, "mode"),
    ({"fusion": "borda"}, "fusion"),
    ({"normalization": "softmax"}, "normalization"),
    ({"weights": {"bm25": -1}}, "weights"),
    ({"weights": {"bm25": 101}}, "weights"),
    ({"weights": {"bm25": 0, "vector": 0}}, "weights"),
    ({"weights": {"title": 1}}, "weights"),
    ({"weights": "heavy"}, "weights"),
])
def test_invalid_input_is_400_naming_the_field_and_changes_nothing(client, ops_token, body, field):
    before = index_state()

    response = search(client, ops_token, **{"catalog": "ops", "query": "retry", **body})

    error = assert_error(response, 400, "invalid_input")
    assert list(error["details"]["fields"]) == [field]
    assert index_state() == before


def test_missing_fields_are_400(client, ops_token):
    error = assert_error(search(client, ops_token), 400, "invalid_input")

    assert set(error["details"]["fields"]) == {"catalog", "query"}


@pytest.mark.parametrize("raw", ['{"catalog": "ops", "query": ', "not json", "[1, 2"])
def test_malformed_json_body_is_400(client, ops_token, raw):
    before = index_state()

    response = client.post(URL, raw, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {ops_token}")

    assert_error(response, 400, "malformed_request")
    assert index_state() == before


def test_oversized_body_is_413_before_authentication(client, ops_token, settings):
    # given: a valid request padded past the limit, with a valid token
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    body = json.dumps({"catalog": "ops", "query": "retry", "pad": "x" * limit})
    before = index_state(), agents_state()

    response = client.post(URL, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {ops_token}")

    assert_error(response, 413, "payload_too_large")
    assert response.json()["error"]["details"] == {"max_bytes": limit}  # as the production worker says it
    assert (index_state(), agents_state()) == before, "the token must not even have been checked"


def test_a_body_just_under_the_limit_is_accepted(client, ops_token, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    head, tail = '{"catalog": "ops", "query": "retry", "mode": "bm25", "pad": "', '"}'
    body = head + "x" * (2048 - len(head) - len(tail)) + tail
    assert len(body) == 2048

    response = client.post(URL, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {ops_token}")

    assert response.status_code == 200, response.content


def test_unknown_api_path_is_a_json_404(client, ops_token):
    response = client.get("/api/v1/no-such-endpoint", HTTP_AUTHORIZATION=f"Bearer {ops_token}")

    error = assert_error(response, 404, "not_found")
    assert "/api/v1/no-such-endpoint" in error["message"]


def test_get_on_search_is_a_json_405(client, ops_token):
    response = client.get(URL, HTTP_AUTHORIZATION=f"Bearer {ops_token}")

    assert_error(response, 405, "method_not_allowed")


# --- schema and session callers ---------------------------------------------------------------


def test_schema_documents_search_with_its_own_response_shape(client, db):
    response = client.get("/api/v1/schema/", {"format": "json"})

    assert response.status_code == 200
    schema = json.loads(response.content)
    assert schema["openapi"].startswith("3.")
    operation = schema["paths"]["/api/v1/search"]["post"]
    assert operation["operationId"] == "rag_search"
    ref = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    component = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert {"results", "mode", "took_ms"} <= set(component["properties"])


@pytest.fixture
def staff(db):
    return User.objects.create_user("stella", password="pw", is_staff=True)


@pytest.fixture
def curator(db):
    return person("curt", "curator")


@pytest.fixture
def reviewer(db):
    return person("rita", "reviewer")


@pytest.fixture
def plain_user(db):
    return User.objects.create_user("paula", password="pw")


@pytest.mark.parametrize("user_fixture", ["curator", "reviewer"])
def test_curators_and_reviewers_can_search_with_a_session(client, indexed_catalog, user_fixture, request):
    client.force_login(request.getfixturevalue(user_fixture))

    response = search(client, None, catalog="ops", query="retry backoff", mode="bm25")

    assert response.status_code == 200, response.content
    assert response.json()["results"][0]["document_id"] == "retries.md"


@pytest.mark.parametrize("user_fixture", ["plain_user", "staff"])
def test_a_person_without_a_role_gets_404_for_every_catalog(client, indexed_catalog, user_fixture, request):
    """Staff status lets a person into the admin, nothing more: roles are groups."""
    client.force_login(request.getfixturevalue(user_fixture))
    before = index_state()

    response = search(client, None, catalog="ops", query="retry backoff")

    assert_error(response, 404, "not_found")
    assert index_state() == before
