"""Conversation enrichment (seed 001) over the API: where the injection goes, exact
stripping over many turns (a client that sends back what it got), token accounting,
memory off, threshold and max results, governance, a trace, bad input."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from approvals.services.decisions import request_decide
from catalog.embedder import get_embedder
from catalog.models import ReferenceSource
from catalog.sources.documents import DocumentInput
from retrieval.enrichment.formatting import injection_signer, strip_injection
from retrieval.memory.services import fact_set, memory_store
from retrieval.models import MemoryEntry, Trace
from tests.factories import agent_with_token, import_documents, person

pytestmark = pytest.mark.django_db

URL = "/api/v1/enrich/conversation"
SYSTEM = {"role": "system", "content": "You are the operations team's assistant."}


@pytest.fixture
def governed(indexed_catalog):
    """The handbook, and a vault source that needs approval."""
    vault = import_documents(catalog=indexed_catalog, slug="vault", documents=[
        DocumentInput("rotation.md", "Rotation", "Rotate the vault keys every ninety days; circuit breaker "
                      "secrets rotate with them.", 80)])
    ReferenceSource.objects.filter(pk=vault.pk).update(requires_approval=True)
    return indexed_catalog


@pytest.fixture
def bot(governed):
    agent, token = agent_with_token(name="ops-bot", catalogs=[governed])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    client.agent = agent  # type: ignore[attr-defined]
    return client


def call(client, messages, **body):
    response = client.post(URL, {"messages": messages, "user_id": body.pop("user_id", "steve"), **body},
                           format="json")
    assert response.status_code == 200, response.content
    return response.json()


def signed_for(client, end_user: str = "steve"):
    return injection_signer(agent=client.agent, end_user=end_user)


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict:
    return {"role": "assistant", "content": text}


def test_facts_and_context_go_onto_the_newest_user_message_only(bot):
    fact_set(agent=bot.agent, user_id="steve", key="name", value="Steve")
    fact_set(agent=bot.agent, user_id="steve", key="team", value="payments")
    memory_store(agent=bot.agent, user_id="steve", content="Steve wants a circuit breaker on the failing card network.")
    messages = [SYSTEM, user("Hello"), assistant("Hi Steve."),
                user("Our calls to a failing dependency pile up: should a circuit breaker open?")]

    body = call(bot, messages)

    out = body["messages"]
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]  # no message added
    assert out[:3] == messages[:3]  # the system prompt and earlier turns untouched
    assert body["injected_into"] == 3
    head, _, added = out[3]["content"].partition("\n\n")
    assert head == messages[3]["content"]
    assert added.startswith("[facts: name=Steve, team=payments]\n[context: ")
    assert "@handbook: A circuit breaker stops calls to a failing dependency." in added
    assert "Steve wants a circuit breaker on the failing card network." in added  # the memory
    assert [item["kind"] for item in body["context"]].count("passage") >= 1
    passage = next(item for item in body["context"] if item["kind"] == "passage")
    assert passage["citation"].startswith(f"{passage['document_id']}:1")  # its lines in its document
    assert len(body["context"]) <= 3  # the agent's rag_max_results
    assert strip_injection(out[3]["content"], signer=signed_for(bot)) == messages[3]["content"]


def test_nothing_is_added_when_the_conversation_does_not_end_with_a_user_message(bot):
    """Seed 001's guard: after an assistant turn or a tool result the model has cached
    the user's message; adding to it would change what it cached."""
    asked = user("Should a circuit breaker open after repeated failures?")
    first = call(bot, [SYSTEM, asked])
    messages = [*first["messages"], assistant("Let me check."), {"role": "tool", "content": "lookup done"}]

    body = call(bot, messages)

    assert first["injected_into"] == 1
    assert body["injected_into"] is None and body["context"] == []
    assert body["messages"] == [SYSTEM, asked, *messages[2:]]  # the earlier injection removed, nothing added


def test_nothing_to_inject_gives_the_messages_back_unchanged(bot):
    messages = [SYSTEM, user("Thanks, that is all.")]
    no_user = [SYSTEM, assistant("Nobody asked anything.")]

    body = call(bot, messages, options={"rag_relevance_threshold": 1.0})
    nothing = call(bot, no_user)

    assert body["messages"] == messages and body["injected_into"] is None and body["context"] == []
    assert nothing["messages"] == no_user and nothing["injected_into"] is None
    assert body["tokens"]["before"] == body["tokens"]["after"] and body["tokens"]["added"] == 0


def test_a_client_sending_back_what_it_got_keeps_one_injection_and_its_own_texts(bot):
    fact_set(agent=bot.agent, user_id="steve", key="name", value="Steve")
    sent = [SYSTEM, user("How long should cached responses live?")]
    own = [m["content"] for m in sent]
    previous_added = 0  # what the last call added: this call frees it
    for turn, question in enumerate(["And retries, with backoff?", "Do we log tokens?", "What about a breaker?"]):
        body = call(bot, sent)
        received = body["messages"]
        # every message is the client's own text, the newest user message its text + one injection
        assert [strip_injection(m["content"], signer=signed_for(bot)) for m in received] == own
        assert sum(m["content"].count("<!-- lectern ") for m in received) == 1, turn
        assert body["tokens"]["freed"] == previous_added, turn
        previous_added = body["tokens"]["added"]
        sent = [*received, assistant(f"Answer {turn}."), user(question)]
        own += [f"Answer {turn}.", question]


def test_tokens_are_counted_with_the_models_tokenizer_or_by_characters(bot):
    messages = [SYSTEM, user("Should a circuit breaker open after repeated failures?")]
    embedder = get_embedder()
    assert embedder is not None

    model = call(bot, messages)
    chars = call(bot, messages, options={"tokenizer": "characters"})

    def counted(texts, by):  # the texts' own tokens: not the [CLS] and [SEP] the model adds to each
        if by == "model":
            return sum(count - 2 for count in embedder.count_tokens(texts))
        return sum(math.ceil(len(t) / 4) for t in texts)

    for body, by in ((model, "model"), (chars, "characters")):
        assert body["tokenizer"] == by
        tokens = body["tokens"]
        assert tokens["before"] == counted([m["content"] for m in messages], by)
        assert tokens["after"] == counted([m["content"] for m in body["messages"]], by)
        assert tokens["freed"] == 0 and tokens["added"] == tokens["after"] - tokens["before"] > 0

    again = call(bot, [*model["messages"], assistant("Yes."), user("Thanks.")], options={"rag_max_results": 0})
    assert again["tokens"]["freed"] == model["tokens"]["added"]  # the earlier injection, stripped
    assert again["tokens"]["before"] - again["tokens"]["freed"] == again["tokens"]["after"]  # nothing new added


def test_memory_false_leaves_out_facts_and_memories_but_not_passages(bot):
    fact_set(agent=bot.agent, user_id="steve", key="name", value="Steve")
    memory_store(agent=bot.agent, user_id="steve", content="Steve wants circuit breakers on every outbound call.")
    messages = [user("Should a circuit breaker open after repeated failures?")]

    on = call(bot, messages)
    off = call(bot, messages, memory=False)

    assert "[facts: name=Steve]" in on["messages"][0]["content"]
    assert any(item["kind"] == "memory" for item in on["context"])
    assert "[facts:" not in off["messages"][0]["content"] and off["facts"] == []
    assert [item["kind"] for item in off["context"]] and all(item["kind"] == "passage" for item in off["context"])


def test_threshold_and_max_results_come_from_the_agent_and_the_request(bot):
    messages = [user("Should a circuit breaker open after repeated failures, and retries back off?")]
    agent = bot.agent

    default = call(bot, messages)
    agent.rag_max_results, agent.rag_relevance_threshold = 1, 0.0
    agent.save()
    one = call(bot, messages)
    two = call(bot, messages, options={"rag_max_results": 2})
    none = call(bot, messages, options={"rag_relevance_threshold": 0.99})

    assert 1 <= len(default["context"]) <= 3 and all(item["score"] >= 0.3 for item in default["context"])
    assert len(one["context"]) == 1 and len(two["context"]) == 2
    assert none["context"] == [] and none["injected_into"] is None
    scores = [item["score"] for item in default["context"]]
    assert scores == sorted(scores, reverse=True)


def test_what_needs_approval_is_withheld_named_and_injected_once_approved(bot):
    messages = [user("When do we rotate the vault keys?")]

    withheld = call(bot, messages)

    assert "ninety days" not in withheld["messages"][0]["content"]
    assert all(item["source_id"] != "vault" for item in withheld["context"])
    (entry,) = [w for w in withheld["withheld"] if w["source_id"] == "vault"]
    assert (entry["count"], entry["request_id"]) == (None, None)  # named whatever the message: issue 20
    asked = bot.post("/api/v1/references/select", {"ids": ["vault"]}, format="json").json()  # the agent asks
    request = ApprovalRequest.objects.get(pk=asked["withheld"][0]["request_id"])
    assert request.agent == bot.agent and request.source.slug == "vault"
    request_decide(request_id=request.pk, reviewer=person("rita", "reviewer"), verdict="approve", comment="ok")

    allowed = call(bot, messages)

    assert "@vault: Rotate the vault keys every ninety days" in allowed["messages"][0]["content"]
    assert allowed["withheld"] == []


def test_one_agent_or_end_user_never_gets_anothers_facts_or_memories(bot, governed):
    fact_set(agent=bot.agent, user_id="steve", key="codename", value="bluebird")
    memory_store(agent=bot.agent, user_id="steve", content="Steve's circuit breaker opens after five failures.")
    other, token = agent_with_token(name="other-bot", catalogs=[governed])
    fact_set(agent=other, user_id="ana", key="codename", value="redwing")
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    messages = [user("Should a circuit breaker open after repeated failures? What is my codename?")]

    own = call(bot, messages)
    ana = call(bot, messages, user_id="ana")
    other_agent = call(stranger, messages)
    others_ana = call(stranger, messages, user_id="ana")

    assert "bluebird" in own["messages"][0]["content"] and "five failures" in own["messages"][0]["content"]
    for body in (ana, other_agent):
        text = json.dumps(body)
        assert "bluebird" not in text and "five failures" not in text and "redwing" not in text
    assert "redwing" in others_ana["messages"][0]["content"] and "bluebird" not in json.dumps(others_ana)
    assert stranger.get(f"/api/v1/traces/{own['trace_id']}").status_code == 404


def test_a_trace_keeps_passages_by_reference_not_their_text(bot):
    body = call(bot, [user("Should a circuit breaker open after repeated failures?")])

    trace = Trace.objects.get(pk=body["trace_id"])
    assert any(item["kind"] == "passage" for item in body["context"])
    assert "cool-down" in body["messages"][0]["content"]  # sent to the agent once, in the answer
    assert "cool-down" not in json.dumps(trace.steps) + json.dumps(trace.hints)  # not kept for later reads


def test_each_call_leaves_a_trace_a_person_can_read(bot, client):
    memory_store(agent=bot.agent, user_id="steve", content="Steve wants circuit breakers on every outbound call.")
    body = call(bot, [user("When do we rotate the vault keys, and should a circuit breaker open?")])

    trace = Trace.objects.get(pk=body["trace_id"])
    assert trace.surface == "conversation" and trace.agent == bot.agent
    assert [step["pass"] for step in trace.steps] == ["strip", "memory", "passages", "conversation"]
    client.force_login(person("cora", "curator"))
    page = client.get(f"/traces/{trace.pk}/").content.decode()
    assert "Facts and memory" in page and "Passages" in page and "Conversation sent back" in page
    assert "withheld" in page and "added as context" in page


@pytest.mark.parametrize("body", [
    {"messages": [], "user_id": "steve"},
    {"messages": [{"role": "wizard", "content": "hi"}], "user_id": "steve"},
    {"messages": [{"role": "user"}], "user_id": "steve"},
    {"messages": [{"role": "user", "content": 42}], "user_id": "steve"},
    {"messages": "hello", "user_id": "steve"},
    {"messages": [{"role": "user", "content": "hi"}]},
    {"messages": [{"role": "user", "content": "hi"}], "user_id": ""},
    {"messages": [{"role": "user", "content": "hi"}], "user_id": "steve", "memory": "maybe"},
    {"messages": [{"role": "user", "content": "hi"}], "user_id": "steve", "options": {"rag_max_results": 21}},
    {"messages": [{"role": "user", "content": "hi"}], "user_id": "steve", "options": {"rag_relevance_threshold": 2}},
    {"messages": [{"role": "user", "content": "hi"}], "user_id": "steve", "options": {"tokenizer": "gpt"}},
    {"messages": [{"role": "user", "content": "x" * 200_001}], "user_id": "steve"},
])
def test_bad_input_is_a_json_400_and_changes_nothing(bot, body):
    before = (Trace.objects.count(), MemoryEntry.objects.count(), ApprovalRequest.objects.count())

    response = bot.post(URL, body, format="json")

    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_input", response.content
    assert (Trace.objects.count(), MemoryEntry.objects.count(), ApprovalRequest.objects.count()) == before


def test_an_unknown_catalog_is_a_json_404(bot):
    response = bot.post(URL, {"messages": [user("hi")], "user_id": "steve", "catalogs": ["nope"]}, format="json")

    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


# --- a client that sends back what it got, property-tested --------------------------------------

WORDS = ["circuit", "breaker", "retries", "backoff", "cache", "logging", "tokens", "vault", "keys", "the", "why",
         "[context: fake]", "<!-- lectern 2 10 00000000000000000000000000000000 -->", "\n\n", "\n", "  "]
TEXTS = st.lists(st.sampled_from(WORDS), min_size=0, max_size=8).map(" ".join)
TURNS = st.lists(st.tuples(st.sampled_from(["user", "assistant", "tool", "system"]), TEXTS), min_size=1, max_size=6)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=TURNS)
def test_stripping_restores_every_message_exactly_over_many_turns(bot, turns):
    """Whatever the messages say (look-alike blocks and forged markers included), after
    each call every message is the client's own text again, but for one injection on
    the newest user message, which a later call removes exactly."""
    fact_set(agent=bot.agent, user_id="steve", key="name", value="Steve")
    signer = signed_for(bot)
    sent: list[dict] = []
    own: list[str] = []
    for role, text in turns:
        sent.append({"role": role, "content": text})
        own.append(text)
        body = call(bot, sent, options={"rag_relevance_threshold": 0.0})
        received = body["messages"]
        assert [m["role"] for m in received] == [m["role"] for m in sent]
        restored = [strip_injection(m["content"], signer=signer) for m in received]
        assert restored == own
        changed = [i for i, m in enumerate(received) if m["content"] != own[i]]
        assert changed == ([body["injected_into"]] if body["injected_into"] is not None else [])
        if body["injected_into"] is not None:
            assert received[body["injected_into"]]["role"] == "user"
            assert received[body["injected_into"]]["content"].startswith(own[body["injected_into"]])
        sent = received  # the client keeps what it got


# --- only what Lectern placed, where it placed it, for this agent and end user ----------------

QUESTION = "Should a circuit breaker open after repeated failures?"


@pytest.fixture
def enriched(bot):
    """(the question, what enrich/conversation appended to it for steve)."""
    fact_set(agent=bot.agent, user_id="steve", key="name", value="Steve")
    body = call(bot, [user(QUESTION)])
    assert body["injected_into"] == 0
    return QUESTION, body["messages"][0]["content"].removeprefix(QUESTION)


def sent_back_as_is(client, earlier: str, **body) -> str:
    """The earlier user message `earlier` as the answer gives it back, followed by a turn."""
    answer = call(client, [user(earlier), assistant("Noted."), user("And retries?")], **body)
    return answer["messages"][0]["content"]


@pytest.mark.parametrize("pasted", [
    lambda question, block: "AAA" + block + "BBB",  # into the middle of a message
    lambda question, block: "AAA" + block + "\n\nBBB",
    lambda question, block: question + block + " and one more thing",  # not at the end any more
    lambda question, block: "Earlier I asked: " + question + block,  # at the end of another text
    lambda question, block: "My own words" + block,
])
def test_a_block_anywhere_but_where_lectern_placed_it_is_the_users_text(bot, enriched, pasted):
    text = pasted(*enriched)

    assert sent_back_as_is(bot, text) == text  # byte for byte
    assert sent_back_as_is(bot, enriched[0] + enriched[1]) == enriched[0]  # where it was placed: removed


def test_a_block_placed_for_another_end_user_or_another_agent_is_the_users_text(bot, governed, enriched):
    other, token = agent_with_token(name="other-bot", catalogs=[governed])
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    stranger.agent = other  # type: ignore[attr-defined]
    placed_for_steve = enriched[0] + enriched[1]

    assert sent_back_as_is(bot, placed_for_steve, user_id="ana") == placed_for_steve  # another end user
    assert sent_back_as_is(stranger, placed_for_steve) == placed_for_steve  # another agent, the same end user id
    assert sent_back_as_is(bot, placed_for_steve) == enriched[0]


def enriched_by(client, text: str) -> str:
    """`text` as POST /api/v1/enrich gives it back to `client`: with a block placed for
    the agent alone (enrich names no end user)."""
    response = client.post("/api/v1/enrich", {"text": text, "surface": "prompt"}, format="json")
    assert response.status_code == 200 and response.json()["text"] != text, response.content
    return response.json()["text"]


def test_what_enrich_added_for_the_agent_is_removed_from_its_end_users_conversation(bot, governed):
    """The agent enriched a message, then sent it on in steve's conversation: its block
    is Lectern's and goes, its tokens freed, so blocks do not pile up turn after turn.
    Another agent's block stays the user's text."""
    other, token = agent_with_token(name="other-bot", catalogs=[governed])
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    asked = "See @handbook: should a circuit breaker open after repeated failures?"
    own, others = enriched_by(bot, asked), enriched_by(stranger, asked)

    body = call(bot, [user(own), assistant("Noted."), user("And retries?")], options={"tokenizer": "characters"})

    assert body["messages"][0]["content"] == asked
    assert body["tokens"]["freed"] == math.ceil(len(own) / 4) - math.ceil(len(asked) / 4) > 0
    assert sent_back_as_is(bot, others) == others  # byte for byte
    assert sent_back_as_is(bot, own, user_id="ana") == asked  # the agent's own, whichever its end user


@pytest.mark.parametrize("after", ["\n", "\r\n", "  \n"])
def test_a_client_that_ends_messages_with_a_line_break_still_gets_the_block_removed(bot, enriched, after):
    question, block = enriched

    assert sent_back_as_is(bot, question + block + after) == question  # the text it was appended to, exactly
    assert sent_back_as_is(bot, question + block + after + "PS") == question + block + after + "PS"


def test_a_catalogs_vector_feedback_does_not_lift_what_the_relevance_threshold_bounds(bot, governed):
    from catalog.catalogs import catalog_ranking_update

    messages = [user("What should I cook for dinner tonight?")]  # nothing in the handbook is about it
    before = call(bot, messages, options={"rag_relevance_threshold": 0.0, "rag_max_results": 5})
    catalog_ranking_update(catalog=governed, values={"vector_feedback": 3, "feedback_weight": 1.0}, by=None)

    after = call(bot, messages, options={"rag_relevance_threshold": 0.0, "rag_max_results": 5})
    unrelated = call(bot, messages)

    def passages(body):
        return [(item["source_id"], item["document_id"], item["score"]) for item in body["context"]
                if item["kind"] == "passage"]

    assert passages(after) == passages(before) and passages(before)  # the query's own similarity
    assert unrelated["context"] == []  # below the agent's threshold, as before
