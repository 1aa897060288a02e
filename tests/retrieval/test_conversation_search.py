"""POST /api/v1/search/conversation (seed 002), over the real index and embedder: the
conversation cut into query chunks embedded in one batch, each searched, the hits
deduplicated per document, optionally diversified by MMR, the approval gate applied as
search applies it; refused input changes nothing."""

from __future__ import annotations

import json
import logging

import pytest
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from approvals.services.policies import policy_create
from catalog.embedder import get_embedder
from catalog.models import Agent, Catalog, Chunk, ReferenceSource
from catalog.sources.documents import DocumentInput
from retrieval.conversations.messages import Message
from retrieval.conversations.search import ConversationOptions, conversation_search
from tests.factories import import_documents, person

pytestmark = pytest.mark.django_db

URL = "/api/v1/search/conversation"
HIT_KEYS = {"rank", "chunk_id", "document_id", "title", "source", "byte_offset", "content",
            "locator", "citation", "cite", "fingerprint", "byte_start", "byte_end", "approval_id", "similarity",
            "query_chunk"}
CHATTER = ["Thanks, that helps a lot!", "Sure, happy to help with that.", "Let me think about it for a moment.",
           "Great, talk soon."]
# Two topics of the `ops` catalog, far apart, each a few paragraphs, between small talk.
TWO_TOPICS = [
    ("user", "Our payment calls fail now and then with timeouts. How should transient failures be retried?"),
    ("assistant", "Let me think about it for a moment."),
    ("user", "Also: which responses can we cache, and when must the cache entry be invalidated after a write?"),
    ("assistant", "Great, talk soon."),
]


def client_with(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def ops(indexed_catalog, agent_token) -> APIClient:
    return client_with(agent_token("ops-agent", [indexed_catalog]))


def messages(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"role": role, "content": content} for role, content in pairs]


def ask(client: APIClient, **body) -> dict:
    response = client.post(URL, {"catalog": "ops", **body}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def long_talk(topics: list[str], rounds: int = 6) -> list[dict[str, str]]:
    """Each topic asked about at length (paragraphs of it), with chatter between: several query chunks."""
    talk = []
    for topic in topics:
        for n in range(rounds):
            talk.append(("user", f"{topic} (point {n}) " + " ".join([topic] * 3)))
            talk.append(("assistant", CHATTER[n % len(CHATTER)]))
    return messages(*talk)


# --- the answer ------------------------------------------------------------------------------


def test_a_conversation_on_two_topics_finds_each_topics_document(ops):
    body = ask(ops, messages=messages(*TWO_TOPICS), top_k=2)

    assert set(body) == {"results", "counts", "mode", "took_ms", "withheld"}
    assert {hit["document_id"] for hit in body["results"]} == {"retries.md", "caching.md"}
    assert set(body["results"][0]) == HIT_KEYS
    assert [hit["rank"] for hit in body["results"]] == [1, 2]
    similarities = [hit["similarity"] for hit in body["results"]]
    assert similarities == sorted(similarities, reverse=True) and all(0 < s <= 1 for s in similarities)
    assert body["counts"]["chunks"] == 1 and body["counts"]["final"] == 2
    assert body["counts"]["results"] >= body["counts"]["deduplicated"] >= body["counts"]["final"]
    assert body["results"][0]["query_chunk"]["index"] == 0
    assert body["results"][0]["query_chunk"]["excerpt"].startswith("## Message 1 **Role:** user Our payment")
    assert (body["mode"], body["withheld"]) == ("approximate", {"count": 0, "sources": []})


def test_each_hit_names_the_query_chunk_that_found_it(ops, settings):
    talk = long_talk(["How should transient failures be retried with exponential backoff and jitter?",
                      "Should our logs be written in JSON, and how do we keep tokens out of them?"])

    body = ask(ops, messages=talk, top_k=2)

    assert body["counts"]["chunks"] > 2
    by_document = {hit["document_id"]: hit["query_chunk"] for hit in body["results"]}
    assert set(by_document) == {"retries.md", "logging.md"}
    assert by_document["retries.md"]["index"] < by_document["logging.md"]["index"]  # the order they were talked of
    assert "retried" in by_document["retries.md"]["excerpt"] and "JSON" in by_document["logging.md"]["excerpt"]
    assert all(len(chunk["excerpt"]) <= 200 for chunk in by_document.values())


def test_all_query_chunks_are_embedded_in_one_batch(indexed_catalog, monkeypatch):
    embedder = get_embedder()
    assert embedder is not None
    batches: list[list[str]] = []
    embed = embedder.embed

    def recorded(texts, **options):
        batches.append(list(texts))
        return embed(texts, **options)

    monkeypatch.setattr(embedder, "embed", recorded)
    talk = [Message(m["role"], m["content"]) for m in long_talk(["Retry transient failures with backoff.",
                                                                 "Cache responses with a time to live."])]

    result = conversation_search(catalog=indexed_catalog, messages=talk, options=ConversationOptions(top_k=3))

    assert len(result.chunks) > 2
    assert batches == [result.chunks]  # one call, every chunk
    assert max(embedder.count_tokens(result.chunks)) <= embedder.max_tokens


def test_counts_are_logged_and_the_conversation_is_not(ops, caplog):
    with caplog.at_level(logging.INFO, logger="retrieval.conversations.search"):
        body = ask(ops, messages=messages(*TWO_TOPICS), top_k=2)

    logged = "\n".join(record.getMessage() for record in caplog.records)
    counts = body["counts"]
    assert f"Chunked conversation into {counts['chunks']} chunks" in logged
    assert (f"{counts['chunks']} chunks -> {counts['results']} results -> {counts['deduplicated']} deduplicated "
            f"-> {counts['final']} final") in logged
    assert "payment" not in logged and "cache" not in logged


@pytest.fixture
def guides(make_catalog, agent_token) -> APIClient:
    """Documents of several chunks each, and two near-copies about retries."""
    catalog = make_catalog("guides", chunk_size=100, chunk_overlap=0)
    texts = {
        "retry-guide.md": "Retry idempotent calls. Retry with exponential backoff. Retry at most five times. "
                          "Log each retry with its attempt number. Give up after the retry budget is spent.",
        "retry-copy.md": "Retry idempotent calls. Retry with exponential backoff. Retry at most five times.",
        "backoff-faq.md": "Why back off? Transient faults pass. How long to wait before trying a call again? "
                          "Double the wait each time, with jitter.",
        "tls.md": "Rotate certificates before they expire.",
    }
    import_documents(catalog=catalog, slug="guides", documents=[
        DocumentInput(path, path, text, len(text)) for path, text in texts.items()])
    return client_with(agent_token("guides-agent", [catalog]))


RETRY_TALK = messages(("user", "How many times should we retry a failed call, and with what backoff?"))
COPIES_TALK = messages(("user", "Should we retry idempotent calls with exponential backoff, and at most how many "
                                 "times?"))


def test_per_document_1_keeps_each_documents_best_chunk_and_2_keeps_two(guides):
    one = ask(guides, catalog="guides", messages=RETRY_TALK, top_k=20)
    two = ask(guides, catalog="guides", messages=RETRY_TALK, top_k=20, per_document=2)

    documents = [hit["document_id"] for hit in one["results"]]
    assert len(documents) == len(set(documents)) == 4
    kept = [hit["document_id"] for hit in two["results"]]
    assert kept.count("retry-guide.md") == 2 and max(kept.count(d) for d in kept) == 2
    assert set(kept) == set(documents) and len(kept) > len(documents)
    assert one["counts"]["deduplicated"] == 4 < two["counts"]["deduplicated"] == len(kept)
    chunks = {hit["chunk_id"]: hit["similarity"] for hit in two["results"]}
    assert all(chunks[hit["chunk_id"]] == hit["similarity"] for hit in one["results"])  # the best of each


def test_mmr_reorders_only_below_lambda_1(guides):
    plain = ask(guides, catalog="guides", messages=COPIES_TALK, top_k=3)
    one = ask(guides, catalog="guides", messages=COPIES_TALK, top_k=3, mmr_lambda=1)
    diverse = ask(guides, catalog="guides", messages=COPIES_TALK, top_k=3, mmr_lambda=0.3)

    order = [hit["document_id"] for hit in plain["results"]]
    assert sorted(order[:2]) == ["retry-copy.md", "retry-guide.md"]  # the near-copies lead on similarity
    assert [hit["chunk_id"] for hit in one["results"]] == [hit["chunk_id"] for hit in plain["results"]]
    reordered = [hit["document_id"] for hit in diverse["results"]]
    assert reordered[0] == order[0] and reordered[1] not in ("retry-copy.md", "retry-guide.md")
    assert [hit["rank"] for hit in diverse["results"]] == [1, 2, 3]


def test_exact_and_approximate_find_the_same_top_hits(ops, monkeypatch):
    talk = messages(*TWO_TOPICS)
    with monkeypatch.context() as patched:
        patched.setattr("retrieval.search.vector.VECTOR_EXACT_MAX", 0)  # approximate: the HNSW index, even for 4 chunks
        approximate = ask(ops, messages=talk, top_k=3)
    exact = ask(ops, messages=talk, top_k=3, mode="exact")

    assert exact["mode"] == "exact" and approximate["mode"] == "approximate"
    assert [hit["chunk_id"] for hit in exact["results"]] == [hit["chunk_id"] for hit in approximate["results"]]
    assert [hit["similarity"] for hit in exact["results"]] == pytest.approx(
        [hit["similarity"] for hit in approximate["results"]], abs=1e-5)


def test_min_similarity_drops_weaker_hits_before_dedup(ops):
    everything = ask(ops, messages=messages(*TWO_TOPICS), top_k=10, min_similarity=-1)
    floor = sorted(hit["similarity"] for hit in everything["results"])[1]  # drops the least similar one

    strict = ask(ops, messages=messages(*TWO_TOPICS), top_k=10, min_similarity=floor)
    nothing = ask(ops, messages=messages(*TWO_TOPICS), top_k=10, min_similarity=0.99)

    assert len(everything["results"]) == 4
    assert [hit["chunk_id"] for hit in strict["results"]] == [hit["chunk_id"] for hit in everything["results"]][:3]
    assert strict["counts"]["results"] == 3 and all(hit["similarity"] >= floor for hit in strict["results"])
    assert nothing["results"] == [] and nothing["counts"] == {"chunks": 1, "results": 0, "deduplicated": 0,
                                                              "final": 0}


@pytest.fixture
def many(make_catalog, agent_token) -> APIClient:
    """Thirty one-chunk documents: more than any chunk query below fetches."""
    catalog = make_catalog("many")
    texts = {f"note-{n:02}.md": f"Note {n}: retry the call after {n} seconds of backoff." for n in range(30)}
    import_documents(catalog=catalog, slug="notes", documents=[
        DocumentInput(path, path, text, len(text)) for path, text in texts.items()])
    return client_with(agent_token("many-agent", [catalog]))


@pytest.mark.parametrize(("top_k", "per_document"), [(1, 1), (2, 1), (2, 2), (5, 1)])
def test_each_query_chunk_fetches_five_times_what_it_keeps_as_seed_002_does(many, top_k, per_document):
    """Seed 002 fetches `chunks_per_query` (5) per chunk query for each final hit; here a
    chunk query fetches 5 x top_k x per_document, every one counted in `results` (no
    threshold, every chunk compared)."""
    talk = messages(("user", "How long should we back off before we retry the call?"))

    body = ask(many, catalog="many", messages=talk, top_k=top_k, per_document=per_document, min_similarity=-1,
               mode="exact")

    assert body["counts"]["chunks"] == 1
    assert body["counts"]["results"] == 5 * top_k * per_document
    assert len(body["results"]) == top_k


def test_without_top_k_an_agent_gets_its_default_top_k(ops):
    Agent.objects.filter(name="ops-agent").update(default_top_k=1)

    body = ask(ops, messages=messages(*TWO_TOPICS))

    assert len(body["results"]) == 1


def test_blank_messages_find_nothing_and_embed_nothing(ops):
    body = ask(ops, messages=messages(("user", "   "), ("assistant", "")))

    assert body["results"] == [] and body["counts"] == {"chunks": 0, "results": 0, "deduplicated": 0, "final": 0}


# --- governance -------------------------------------------------------------------------------

WITHHELD = {"secrets-management", "incident-response"}
SECRETS_TALK = messages(
    ("user", "We need to rotate the vault credentials and secrets; how often, and who holds the keys?"),
    ("assistant", "Sure, happy to help with that."),
    ("user", "And when an incident happens, who is paged first and how do we run the postmortem?"),
    ("assistant", "Thanks, that helps a lot!"),
    ("user", "Finally, how should transient failures be retried?"),
)


def test_what_needs_approval_is_never_found_nor_shown_and_each_is_named_with_its_request(demo):
    client = client_with(demo.token)
    ReferenceSource.objects.filter(slug__in=WITHHELD).update(requires_approval=False)
    ungated = client.post(URL, {"catalog": "demo", "messages": SECRETS_TALK, "top_k": 5}, format="json").json()
    ReferenceSource.objects.filter(slug__in=WITHHELD).update(requires_approval=True)
    assert {hit["source"] for hit in ungated["results"]} & WITHHELD  # the conversation is about them
    named = client.post(URL, {"catalog": "demo", "messages": SECRETS_TALK, "top_k": 5}, format="json").json()
    assert {(entry["source"], entry["count"], entry["request_id"]) for entry in named["withheld"]["sources"]} == \
        {(slug, None, None) for slug in WITHHELD}  # named, uncounted, nothing raised: no policy discloses matches
    assert not ApprovalRequest.objects.exists()
    curator = person("cora", "curator")
    for source in ReferenceSource.objects.filter(slug__in=WITHHELD):  # policies that disclose them
        policy_create(by=curator, source=source, disclose_matches=True)

    gated = client.post(URL, {"catalog": "demo", "messages": SECRETS_TALK, "top_k": 5}, format="json").json()
    # every hit of every query chunk: top_k and per_document large enough to return all that was found
    every = client.post(URL, {"catalog": "demo", "messages": SECRETS_TALK, "top_k": 100, "per_document": 10,
                              "min_similarity": -1}, format="json").json()

    assert len(gated["results"]) == 5 and not {hit["source"] for hit in gated["results"]} & WITHHELD
    assert every["counts"]["final"] == every["counts"]["deduplicated"] == every["counts"]["results"] > 5
    assert not {hit["source"] for hit in every["results"]} & WITHHELD
    assert {hit["source"] for hit in every["results"]} == set(
        Chunk.objects.filter(catalog__slug="demo").exclude(source__slug__in=WITHHELD)
        .values_list("source__slug", flat=True))  # what may be shown still is
    assert {entry["source"] for entry in gated["withheld"]["sources"]} == WITHHELD
    for entry in gated["withheld"]["sources"]:
        request = ApprovalRequest.objects.get(pk=entry["request_id"])
        assert (request.source.slug, request.state, request.raised_via) == (entry["source"], "pending", "search")
        assert request.context.startswith("conversation search")
    served = json.dumps(gated) + json.dumps(every)
    for content in Chunk.objects.filter(source__slug__in=WITHHELD).values_list("content", flat=True):
        assert content not in served


def test_a_signed_in_person_is_searched_for_under_the_gates_rule_for_people(demo):
    client = APIClient()
    client.force_authenticate(person("curator", "curator"))
    before = ApprovalRequest.objects.count()

    body = client.post(URL, {"catalog": "demo", "messages": SECRETS_TALK, "top_k": 5}, format="json").json()

    assert len(body["results"]) == 5 and not {hit["source"] for hit in body["results"]} & WITHHELD
    assert {entry["source"] for entry in body["withheld"]["sources"]} == WITHHELD
    assert ApprovalRequest.objects.count() == before  # a person raises no request


# --- refused -----------------------------------------------------------------------------------


def state() -> tuple:
    return (ApprovalRequest.objects.count(), Chunk.objects.count(),
            list(Catalog.objects.order_by("slug").values_list("slug", "chunk_count")))


TOO_MANY = 101


@pytest.mark.parametrize("body, field", [
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "robot", "content": "hi"}]}, "messages"),
    ({"messages": [{"role": "user", "content": 42}]}, "messages"),
    ({"messages": [{"role": "user"}]}, "messages"),
    ({"messages": "retry"}, "messages"),
    ({"top_k": 0}, "top_k"),
    ({"top_k": TOO_MANY}, "top_k"),
    ({"top_k": "5"}, "top_k"),
    ({"per_document": 0}, "per_document"),
    ({"mmr_lambda": -0.1}, "mmr_lambda"),
    ({"mmr_lambda": 1.5}, "mmr_lambda"),
    ({"mmr_lambda": "0.5"}, "mmr_lambda"),
    ({"min_similarity": 2}, "min_similarity"),
    ({"mode": "ann"}, "mode"),
    ({"catalog": 7}, "catalog"),
])
def test_bad_input_is_a_400_naming_the_field_and_changes_nothing(ops, body, field):
    before = state()

    response = ops.post(URL, {"catalog": "ops", "messages": messages(*TWO_TOPICS), **body}, format="json")

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_input" and list(error["details"]["fields"]) == [field]
    assert state() == before


def test_a_nul_byte_is_a_400_and_changes_nothing(ops):
    before = state()

    response = ops.post(URL, {"catalog": "ops", "messages": messages(("user", "nul \u0000 byte"))}, format="json")

    assert response.status_code == 400 and response.json()["error"]["code"] == "malformed_request"
    assert state() == before


def test_a_conversation_of_more_chunks_than_allowed_is_refused(ops, settings):
    settings.LECTERN_CONVERSATION_MAX_CHUNKS = 2
    talk = long_talk(["How should transient failures be retried?", "What should the cache hold?"])
    before = state()

    response = ops.post(URL, {"catalog": "ops", "messages": talk}, format="json")

    assert response.status_code == 400, response.content
    (message,) = response.json()["error"]["details"]["fields"]["messages"]
    assert "LECTERN_CONVERSATION_MAX_CHUNKS" in message and "at most 2" in message
    assert state() == before


def test_a_catalog_the_agent_may_not_read_is_a_404(ops, make_catalog):
    make_catalog("private")
    before = state()

    for slug in ("private", "missing"):
        response = ops.post(URL, {"catalog": slug, "messages": messages(*TWO_TOPICS)}, format="json")
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert state() == before


def test_without_a_token_it_is_a_401(indexed_catalog):
    response = APIClient().post(URL, {"catalog": "ops", "messages": messages(*TWO_TOPICS)}, format="json")

    assert response.status_code == 401 and response.json()["error"]["code"] == "unauthenticated"


def test_what_enrich_conversation_added_and_a_client_sent_back_is_not_searched(ops):
    talk = messages(("user", "How long should cached responses live before they are invalidated?"))
    enriched = ops.post("/api/v1/enrich/conversation", {"messages": talk, "user_id": "steve"}, format="json")
    assert enriched.status_code == 200 and enriched.json()["injected_into"] == 0  # context about caching added
    sent_back = enriched.json()["messages"]

    def untimed(body: dict) -> dict:
        return {key: value for key, value in body.items() if key != "took_ms"}

    assert untimed(ask(ops, messages=sent_back, top_k=4, user_id="steve")) == untimed(ask(ops, messages=talk, top_k=4))
    # another end user's conversation, or no end user named: the block is the conversation's text
    for other in ({"user_id": "ana"}, {}):
        assert untimed(ask(ops, messages=sent_back, top_k=4, **other)) != untimed(ask(ops, messages=talk, top_k=4))


def test_what_enrich_added_for_the_agent_is_not_searched_in_an_end_users_conversation(ops, indexed_catalog,
                                                                                      agent_token):
    """A message the agent enriched (a block for the agent alone) and sent on in steve's
    conversation; another agent's block is the conversation's text."""
    asked = "See @handbook: how long should cached responses live before they are invalidated?"
    stranger = client_with(agent_token("other-agent", [indexed_catalog]))

    def enriched_by(client: APIClient) -> list[dict[str, str]]:
        response = client.post("/api/v1/enrich", {"text": asked, "surface": "prompt"}, format="json")
        assert response.status_code == 200 and response.json()["text"] != asked
        return messages(("user", response.json()["text"]))

    def untimed(body: dict) -> dict:
        return {key: value for key, value in body.items() if key != "took_ms"}

    plain = untimed(ask(ops, messages=messages(("user", asked)), top_k=4))
    assert untimed(ask(ops, messages=enriched_by(ops), top_k=4, user_id="steve")) == plain
    assert untimed(ask(ops, messages=enriched_by(stranger), top_k=4, user_id="steve")) != plain


def test_a_block_followed_by_a_line_break_is_not_searched(ops):
    talk = messages(("user", "How long should cached responses live before they are invalidated?"))
    enriched = ops.post("/api/v1/enrich/conversation", {"messages": talk, "user_id": "steve"}, format="json")
    assert enriched.status_code == 200 and enriched.json()["injected_into"] == 0
    sent_back = [{**m, "content": m["content"] + "\n"} for m in enriched.json()["messages"]]  # the client's habit

    def untimed(body: dict) -> dict:
        return {key: value for key, value in body.items() if key != "took_ms"}

    assert untimed(ask(ops, messages=sent_back, top_k=4, user_id="steve")) == untimed(ask(ops, messages=talk, top_k=4))
