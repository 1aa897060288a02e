"""POST /api/v1/explain: "why not this document?", over the real index and embedder.

The property test holds explain to the search it explains: on seeded random queries,
for every document and mode, what explain says of its rank and the cut-off is what
POST /api/v1/search returned with the same options."""

from __future__ import annotations

import json
import random

import pytest
from rest_framework.test import APIClient

from catalog import analysis
from catalog.models import Catalog, ReferenceSource
from catalog.sources.documents import DocumentInput
from tests.approvals.builders import VAULT_TEXT, document
from tests.factories import import_documents, person

pytestmark = pytest.mark.django_db

URL = "/api/v1/explain"
SEARCH_URL = "/api/v1/search"

TOPICS = {
    "breaker.md": "A circuit breaker stops calls to a failing dependency. After repeated failures it opens and "
                  "rejects calls at once. After a cool-down it lets one trial request through; a success closes "
                  "it again, a failure opens it for another cool-down. Count failures in a rolling window.",
    "retries.md": "Retry transient failures with exponential backoff and jitter. Cap the number of attempts and "
                  "the total time spent. Never retry a request that is not idempotent unless the server "
                  "deduplicates it by an idempotency key. Log each attempt with its delay.",
    "caching.md": "Cache responses with a time to live. Invalidate the cache on every write to the underlying "
                  "record. A stampede of misses after an expiry can overload the database: refresh early, "
                  "or let one request rebuild the entry while the others wait.",
    "logging.md": "Log in JSON with a request id on every line. Never log secrets or tokens in clear text. "
                  "Sample debug logs under load, and keep error logs whole.",
    "queues.md": "A queue absorbs bursts: producers enqueue, workers dequeue at their own pace. Bound the queue "
                 "and shed load when it is full. Poison messages go to a dead letter queue after a few "
                 "attempts, with the failure that stopped them.",
    "timeouts.md": "Every call across the network needs a timeout. A timeout shorter than the caller's leaves "
                   "time to retry; a deadline passed along the request stops work nobody waits for.",
    "backups.md": "Back up the database nightly and test a restore every month. A backup nobody restored is a "
                  "hope, not a backup. Keep copies in another region, encrypted.",
    "limits.md": "Rate limits protect a service from one noisy client: a token bucket per client refills at a "
                 "steady rate. Answer 429 with Retry-After so the client knows when to come back.",
}


def _documents() -> list[DocumentInput]:
    return [DocumentInput(path, path.removesuffix(".md").title(), text, len(text.encode()))
            for path, text in TOPICS.items()]


@pytest.fixture
def lib(make_catalog):
    """Eight documents cut into chunks of about 200 characters: several chunks each, so
    dedup and a document's best chunk matter."""
    catalog = make_catalog("lib", chunk_size=200, chunk_overlap=20)
    import_documents(catalog=catalog, slug="ops", documents=_documents())
    catalog.refresh_from_db()
    return catalog


def post(client: APIClient, url: str, token: str | None, body: dict):
    if token:
        return client.post(url, body, format="json", HTTP_AUTHORIZATION=f"Bearer {token}")
    return client.post(url, body, format="json")


def explain(client: APIClient, token: str | None, **body) -> dict:
    response = post(client, URL, token, body)
    assert response.status_code == 200, response.content
    return response.json()


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code
    return body["error"]


def random_queries(rng: random.Random, count: int) -> list[str]:
    """Queries of two to four words drawn from the documents, now and then a word no
    document holds."""
    words = sorted({word.strip(".,;:") for text in TOPICS.values() for word in text.split()})
    return [" ".join(rng.sample(words, rng.randint(2, 4)) + (["zeppelin"] if rng.random() < 0.2 else []))
            for _ in range(count)]


# --- the property: explain says what search did -------------------------------------------------


@pytest.mark.parametrize(("mode", "feedback"), [("bm25", 0), ("vector", 0), ("hybrid", 0), ("bm25", 2),
                                                ("hybrid", 2)])
def test_what_explain_says_of_rank_and_cut_off_is_what_search_returned(lib, agent_token, mode, feedback):
    # A fusion depth below the catalog's chunk count, so that hybrid leaves documents out too
    # (below the least a curator may set: the catalog's settings are read as stored); with
    # BM25 feedback, the terms it adds score too.
    Catalog.objects.filter(pk=lib.pk).update(ranking={"fusion_depth": 4, "bm25_feedback": feedback})
    token, client, rng = agent_token("lib-agent", [lib]), APIClient(), random.Random(24)
    outcomes: set[str] = set()
    for query in random_queries(rng, 20):
        options = {"mode": mode, "top_k": rng.choice([1, 2, 3, 5]), "dedup": rng.random() < 0.5}
        response = post(client, SEARCH_URL, token, {"catalog": "lib", "query": query, **options})
        assert response.status_code == 200, response.content
        hits = response.json()["results"]
        shown = [(hit["source"], hit["document_id"]) for hit in hits]
        for path in TOPICS:
            body = explain(client, token, catalog="lib", query=query, source="ops", document=path, **options)
            outcomes.add(body["outcome"])
            said = (query, options, path, body["verdict"])
            if body["outcome"] == "shown":
                rank = body["rank"]
                assert body["verdict"] == f"shown at rank {rank}"
                assert shown[rank - 1] == ("ops", path), said
                assert ("ops", path) not in shown[: rank - 1], said  # its first place
                if options["dedup"]:  # the hit is the document: its ranks are the ones explained
                    assert hits[rank - 1]["ranks"] == {"bm25": body["bm25"]["rank"], "vector": body["vector"]["rank"]}
            else:
                assert body["outcome"] in ("below_top_k", "not_retrieved"), said
                assert ("ops", path) not in shown, said
                assert (body["rank"] is None) == (body["outcome"] == "not_retrieved")
                if body["rank"] is not None:
                    assert body["rank"] > options["top_k"], said
    # the queries reached every verdict search can give a document
    assert outcomes == {"shown", "below_top_k", "not_retrieved"}


# --- the stages ---------------------------------------------------------------------------------


def test_a_document_lacking_query_terms_is_told_which(indexed_catalog, agent_token):
    token = agent_token("ops-agent", [indexed_catalog])
    body = explain(APIClient(), token, catalog="ops", query="retry with backoff, or cache the zeppelin",
                   source="handbook", document="retries.md", mode="hybrid")

    terms = {term["term"]: term for term in body["bm25"]["terms"]}
    [retry, backoff, cache, zeppelin] = analysis.analyze("retry backoff cache zeppelin")
    assert set(terms) == {retry, backoff, cache, zeppelin}
    assert terms[retry]["in_chunk"] and terms[backoff]["in_chunk"]
    assert not terms[cache]["in_chunk"] and terms[cache]["in_catalog"] and terms[cache]["score"] == 0
    assert not terms[zeppelin]["in_chunk"] and not terms[zeppelin]["in_catalog"]
    # the matched terms' parts are the score, as BM25 summed it
    assert terms[retry]["score"] > 0 and terms[backoff]["score"] > 0
    assert terms[retry]["score"] + terms[backoff]["score"] == body["bm25"]["score"]
    assert any(f"lacks the query terms {cache}, {zeppelin} (in no chunk of the catalog)" in sentence
               for sentence in body["sentences"])
    assert body["catalog"] == {"source_found": True, "source_status": "ready", "last_error": None,
                               "document_found": True, "chunks": 1}
    assert body["governance"] == {"withheld": False, "state": "allowed", "reason": "", "request_id": None}


def test_terms_bm25_feedback_added_are_told_apart_and_their_parts_count(lib, agent_token):
    Catalog.objects.filter(pk=lib.pk).update(ranking={"bm25_feedback": 2})
    token = agent_token("lib-agent", [lib])
    body = explain(APIClient(), token, catalog="lib", query="retry backoff", source="ops", document="retries.md",
                   mode="bm25")

    own = [term for term in body["bm25"]["terms"] if not term["feedback"]]
    added = [term for term in body["bm25"]["terms"] if term["feedback"]]
    assert [term["term"] for term in own] == analysis.analyze("retry backoff")
    assert added and any(term["in_chunk"] and term["score"] > 0 for term in added)
    # every part of the score is told: the query's terms' and feedback's
    assert sum(term["score"] for term in body["bm25"]["terms"]) == pytest.approx(body["bm25"]["score"])
    assert any(sentence.startswith("Feedback from the best first hits added the terms ")
               for sentence in body["sentences"])


def test_a_document_without_any_query_term_says_so(indexed_catalog, agent_token):
    token = agent_token("ops-agent", [indexed_catalog])
    body = explain(APIClient(), token, catalog="ops", query="exponential backoff jitter", source="handbook",
                   document="logging.md", mode="bm25", top_k=2)

    assert body["outcome"] == "not_retrieved" and body["rank"] is None
    assert body["verdict"] == "no query term in it"
    assert body["bm25"]["score"] == 0 and body["bm25"]["rank"] is None
    assert body["vector"] == {"ran": False, "chunk_id": None, "score": None, "rank": None, "depth": 2}


def test_a_missing_source_or_document_is_an_answer_not_an_error(indexed_catalog, agent_token):
    token, client = agent_token("ops-agent", [indexed_catalog]), APIClient()

    no_source = explain(client, token, catalog="ops", query="retry", source="nowhere", document="retries.md")
    no_document = explain(client, token, catalog="ops", query="retry", source="handbook", document="gone.md")

    assert no_source["outcome"] == "no_source" and no_source["verdict"] == "no such source 'nowhere' in catalog 'ops'"
    assert no_source["catalog"]["source_found"] is False and no_source["bm25"] is None
    assert no_document["outcome"] == "no_document"
    assert no_document["verdict"] == "no such document 'gone.md' in source 'handbook'"
    assert no_document["catalog"]["document_found"] is False and no_document["fusion"] is None


# --- governance ---------------------------------------------------------------------------------


def test_a_withheld_source_is_explained_by_its_governance_alone(make_catalog, agent_token):
    catalog = make_catalog("kb")
    vault = import_documents(catalog=catalog, slug="vault", documents=[document("rotation.md", VAULT_TEXT)])
    ReferenceSource.objects.filter(pk=vault.pk).update(requires_approval=True)
    token, client = agent_token("bot", [catalog]), APIClient()
    ask = {"catalog": "kb", "query": "rotate the vault keys and the root token", "source": "vault"}

    body = explain(client, token, **ask, document="rotation.md")
    missing = explain(client, token, **ask, document="nothing-here.md")

    assert body["outcome"] == "withheld" and body["verdict"].startswith("withheld: requires approval")
    assert body["governance"]["withheld"] is True and body["governance"]["state"] == "missing"
    assert body["bm25"] is None and body["vector"] is None and body["fusion"] is None and body["rank"] is None
    assert body["catalog"]["document_found"] is None and body["catalog"]["chunks"] is None
    text = json.dumps(body).lower()
    for revealing in ("rotation", "ninety", "offline", "rotat", "keys", "root", "score", "terms"):
        assert revealing not in text, revealing
    # whether the path exists is not told either: the answer is the same for a path that does not
    assert missing == body


def test_a_term_only_withheld_content_holds_is_told_as_absent_from_the_catalog(make_catalog, agent_token):
    catalog = make_catalog("kb")
    vault = import_documents(catalog=catalog, slug="vault", documents=[document("rotation.md", VAULT_TEXT)])
    ReferenceSource.objects.filter(pk=vault.pk).update(requires_approval=True)
    import_documents(catalog=catalog, slug="notes", documents=[document("retry.md", "Retry with backoff.\n")])
    token, client = agent_token("bot", [catalog]), APIClient()
    ask = {"catalog": "kb", "source": "notes", "document": "retry.md", "mode": "bm25"}

    held_only = explain(client, token, **ask, query="retry ninety")  # "ninety" is in the vault alone
    nowhere = explain(client, token, **ask, query="retry zebrafish")

    assert [(t["term"], t["in_catalog"]) for t in held_only["bm25"]["terms"]] == [("retri", True), ("nineti", False)]
    assert [(t["term"], t["in_catalog"]) for t in nowhere["bm25"]["terms"]] == [("retri", True), ("zebrafish", False)]
    assert held_only["sentences"][1:] == [s.replace("zebrafish", "nineti") for s in nowhere["sentences"][1:]]


# --- bad input and scope ------------------------------------------------------------------------


@pytest.mark.parametrize(("body", "field"), [
    ({"catalog": "ops", "query": "retry", "source": "handbook"}, "document"),
    ({"catalog": "ops", "query": "retry", "document": "retries.md"}, "source"),
    ({"catalog": "ops", "query": "retry", "source": "handbook", "document": "retries.md", "mode": "magic"}, "mode"),
    ({"catalog": "ops", "query": "retry", "source": "handbook", "document": "retries.md", "top_k": 0}, "top_k"),
    ({"catalog": "ops", "query": "retry", "source": "handbook", "document": ["retries.md"]}, "document"),
])
def test_bad_input_is_a_400_naming_the_field(indexed_catalog, agent_token, body, field):
    token = agent_token("ops-agent", [indexed_catalog])
    error = assert_error(post(APIClient(), URL, token, body), 400, "invalid_input")
    assert field in error["details"]["fields"]


def test_an_unknown_catalog_or_another_readers_catalog_is_a_404(indexed_catalog, make_catalog, agent_token):
    other = make_catalog("elsewhere")
    import_documents(catalog=other, slug="notes", documents=[document("notes.md", "Plain notes.\n")])
    token, client = agent_token("ops-agent", [indexed_catalog]), APIClient()
    ask = {"query": "plain notes", "source": "notes", "document": "notes.md"}

    assert_error(post(client, URL, token, {"catalog": "nowhere", **ask}), 404, "not_found")
    assert_error(post(client, URL, token, {"catalog": "elsewhere", **ask}), 404, "not_found")
    assert_error(post(client, URL, None, {"catalog": "elsewhere", **ask}), 401, "unauthenticated")


def test_a_signed_in_curator_may_explain(indexed_catalog, client_for):
    client = client_for(person("cora", "curator"))
    response = client.post(URL, {"catalog": "ops", "query": "retry transient failures", "source": "handbook",
                                 "document": "retries.md", "mode": "bm25"}, content_type="application/json")

    assert response.status_code == 200, response.content
    assert response.json()["verdict"] == "shown at rank 1"


def test_a_source_in_error_says_its_last_error_and_a_document_without_chunks_is_not_indexed(make_catalog,
                                                                                            agent_token):
    catalog = make_catalog("kb")
    import_documents(catalog=catalog, slug="notes", documents=[document("notes.md", "Plain notes.\n"),
                                                                document("blank.md", " \n")])
    ReferenceSource.objects.filter(slug="notes").update(status=ReferenceSource.Status.ERROR,
                                                        last_error="the fetch failed: timed out\nTraceback ...")
    token, client = agent_token("bot", [catalog]), APIClient()
    ask = {"catalog": "kb", "query": "plain notes", "source": "notes", "mode": "bm25"}

    indexed = explain(client, token, **ask, document="notes.md")
    blank = explain(client, token, **ask, document="blank.md")

    assert indexed["catalog"]["last_error"] == "the fetch failed: timed out"
    assert indexed["verdict"] == "shown at rank 1"  # what an earlier run indexed is still searched
    assert "Source notes's status is error; its last error: the fetch failed: timed out." in indexed["sentences"]
    assert blank["outcome"] == "not_indexed" and blank["catalog"]["chunks"] == 0
    assert blank["verdict"] == "not indexed: source 'notes' has status error (the fetch failed: timed out)"
