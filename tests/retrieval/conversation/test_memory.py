"""Facts and memory (seed 001) over the API: per agent and end user, stored once,
searched by keywords and meaning with a recency boost, exported, erased (audited) and
gone from search; bad input changes nothing."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.models import Agent, AuditEntry
from retrieval.memory import selectors as memory
from retrieval.memory.selectors import end_user_digest, memory_search, recency_factor
from retrieval.models import Fact, MemoryEntry, Trace
from tests.factories import agent_with_token, person

pytestmark = pytest.mark.django_db

FACTS, MEMORY, EXPORT = "/api/v1/facts", "/api/v1/memory", "/api/v1/memory/export"


@pytest.fixture
def bot():
    agent, token = agent_with_token(name="helper-bot")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    client.agent = agent  # type: ignore[attr-defined]
    return client


@pytest.fixture
def other_bot():
    _, token = agent_with_token(name="other-bot")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def store(client, user_id: str, content: str):
    return client.post(MEMORY, {"user_id": user_id, "content": content}, format="json")


def search(client, user_id: str, q: str, **params):
    response = client.get(MEMORY, {"user_id": user_id, "q": q, **params})
    assert response.status_code == 200, response.content
    return response.json()["hits"]


# --- facts ----------------------------------------------------------------------------------


def test_facts_are_set_replaced_listed_and_deleted(bot):
    assert bot.put(FACTS, {"user_id": "steve", "key": "name", "value": "Steve"}, format="json").status_code == 201
    assert bot.put(FACTS, {"user_id": "steve", "key": "location", "value": "Ohio"}, format="json").status_code == 201
    replaced = bot.put(FACTS, {"user_id": "steve", "key": "location", "value": "Texas"}, format="json")

    assert replaced.status_code == 200 and replaced.json()["value"] == "Texas"
    listed = bot.get(FACTS, {"user_id": "steve"}).json()
    assert [(f["key"], f["value"]) for f in listed["facts"]] == [("location", "Texas"), ("name", "Steve")]
    deleted = bot.delete(f"{FACTS}?user_id=steve&key=name")
    assert deleted.status_code == 200 and deleted.json()["value"] == "Steve"
    gone = bot.delete(f"{FACTS}?user_id=steve&key=name")
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "not_found"
    assert Fact.objects.count() == 1


def test_one_agent_or_end_user_never_sees_anothers_facts_or_memory(bot, other_bot):
    bot.put(FACTS, {"user_id": "steve", "key": "name", "value": "Steve"}, format="json")
    store(bot, "steve", "Steve keeps bees in his garden.")
    store(bot, "ana", "Ana keeps chickens in her garden.")

    assert other_bot.get(FACTS, {"user_id": "steve"}).json()["facts"] == []
    assert other_bot.get(MEMORY, {"user_id": "steve"}).json()["count"] == 0
    assert search(other_bot, "steve", "garden bees") == []
    assert [hit["content"] for hit in search(bot, "ana", "garden bees chickens")] == [
        "Ana keeps chickens in her garden."]
    assert other_bot.get(EXPORT, {"user_id": "steve"}).json()["memories"] == []
    erased = other_bot.delete(f"{MEMORY}?user_id=steve")
    assert erased.json() == {"memories": 0, "facts": 0, "traces": 0}
    assert MemoryEntry.objects.count() == 2 and Fact.objects.count() == 1  # the other agent's erasure touched none


# --- memory ---------------------------------------------------------------------------------


def test_storing_the_same_memory_twice_keeps_one_entry_remembered_again(bot):
    first = store(bot, "steve", "Prefers VS Code with vim keybindings.")
    stored_at = MemoryEntry.objects.get().stored_at
    again = store(bot, "steve", "  prefers vs code   with VIM keybindings. ")

    assert first.status_code == 201 and first.json()["created"] is True
    assert again.status_code == 200 and again.json()["created"] is False
    assert again.json()["memory"]["id"] == first.json()["memory"]["id"] and again.json()["memory"]["times"] == 2
    entry = MemoryEntry.objects.get()
    assert entry.content == "Prefers VS Code with vim keybindings." and entry.stored_at > stored_at
    assert store(bot, "ana", "Prefers VS Code with vim keybindings.").status_code == 201  # another end user's
    assert MemoryEntry.objects.count() == 2


def test_memories_are_found_by_keywords_and_by_meaning(bot):
    store(bot, "steve", "The project is called Lectern and is written in Django.")
    store(bot, "steve", "Steve is allergic to peanuts.")
    store(bot, "steve", "The favourite colour is green.")

    by_keyword = search(bot, "steve", "What did I tell you about my project?")
    by_meaning = search(bot, "steve", "any food allergies I should watch out for?")

    assert by_keyword[0]["content"].startswith("The project is called Lectern")
    assert by_keyword[0]["lexical"] == 1.0  # "project", the message's one keyword
    assert by_meaning[0]["content"] == "Steve is allergic to peanuts."
    assert by_meaning[0]["lexical"] == 0.0 and by_meaning[0]["similarity"] > by_meaning[1]["similarity"]
    for hit in by_keyword + by_meaning:
        relevance = max(hit["lexical"], hit["similarity"] or 0.0)
        assert hit["score"] == pytest.approx(relevance * hit["recency"], abs=1e-3)


def test_recency_boosts_the_memory_stored_last(bot, monkeypatch):
    monkeypatch.setattr(memory, "MEMORY_HALF_LIFE_DAYS", 10.0)
    monkeypatch.setattr(memory, "MEMORY_RECENCY_WEIGHT", 1.0)
    store(bot, "steve", "The deadline for the garden project is Friday.")
    store(bot, "steve", "The budget for the garden project is small.")
    old = MemoryEntry.objects.get(content__contains="deadline")
    MemoryEntry.objects.filter(pk=old.pk).update(stored_at=timezone.now() - timedelta(days=10))
    agent = bot.agent

    hits = memory_search(agent=agent, user_id="steve", text="garden project", limit=5)

    assert [hit.content for hit in hits] == ["The budget for the garden project is small.",
                                             "The deadline for the garden project is Friday."]
    assert hits[0].lexical == hits[1].lexical == 1.0
    assert hits[1].recency == pytest.approx(0.75, abs=1e-3)  # (1 + 1 x 2^-1) / 2: one half-life old
    now = timezone.now()
    assert recency_factor(now, now) == 1.0 and recency_factor(now - timedelta(days=10_000), now) == pytest.approx(0.5)
    # stored again, it is recent again
    store(bot, "steve", "The deadline for the garden project is Friday.")
    assert memory_search(agent=agent, user_id="steve", text="garden project", limit=1)[0].content.startswith(
        "The deadline")


def test_memory_lists_newest_first_with_a_count(bot):
    for number in range(3):
        store(bot, "steve", f"Memory number {number} about tomatoes.")

    listed = bot.get(MEMORY, {"user_id": "steve", "limit": 2}).json()

    assert listed["count"] == 3 and [m["content"] for m in listed["memories"]] == [
        "Memory number 2 about tomatoes.", "Memory number 1 about tomatoes."]


def test_an_export_holds_every_fact_and_memory_of_the_end_user(bot):
    bot.put(FACTS, {"user_id": "steve", "key": "name", "value": "Steve"}, format="json")
    store(bot, "steve", "Steve keeps bees.")
    store(bot, "ana", "Ana keeps chickens.")

    export = bot.get(EXPORT, {"user_id": "steve"}).json()

    assert export["agent"] == "helper-bot" and export["user_id"] == "steve"
    assert [(f["key"], f["value"]) for f in export["facts"]] == [("name", "Steve")]
    assert [(m["content"], m["times"]) for m in export["memories"]] == [("Steve keeps bees.", 1)]


def test_erasure_deletes_the_end_users_memory_facts_and_conversations_audited_and_leaves_nothing_in_search(bot):
    bot.put(FACTS, {"user_id": "steve", "key": "name", "value": "Steve"}, format="json")
    store(bot, "steve", "Steve keeps bees in the garden.")
    store(bot, "steve", "Steve's garden faces south.")
    store(bot, "ana", "Ana's garden faces north.")
    assert len(search(bot, "steve", "garden")) == 2
    for user_id in ("steve", "steve", "ana"):
        talk = bot.post("/api/v1/enrich/conversation", {"user_id": user_id, "messages": [
            {"role": "user", "content": "Which way does my garden face?"}]}, format="json")
        assert talk.status_code == 200, talk.content
    steves = Trace.objects.filter(surface="conversation").order_by("created_at")[:2]
    assert "Steve" in json.dumps(steves[0].steps)  # his memories, recalled in his conversation's trace

    erased = bot.delete(f"{MEMORY}?user_id=steve")

    assert erased.status_code == 200 and erased.json() == {"memories": 2, "facts": 1, "traces": 2}
    assert Trace.objects.filter(surface="conversation").count() == 1  # Ana's
    assert "Steve" not in json.dumps(list(Trace.objects.values("text", "steps", "hints")))
    assert search(bot, "steve", "garden") == [] and search(bot, "steve", "bees honey hives") == []
    assert bot.get(FACTS, {"user_id": "steve"}).json()["facts"] == []
    assert len(search(bot, "ana", "garden")) == 1  # another end user's stay
    entry = AuditEntry.objects.get(action="memory.erased")
    assert entry.actor_name == "helper-bot" and entry.agent_id == bot.agent.pk
    assert entry.payload == {"end_user": end_user_digest(bot.agent, "steve"), "memories": 2, "facts": 1, "traces": 2}
    assert "steve" not in str(entry.payload).lower()  # the log holds no end user's id in clear


def test_a_single_memory_cannot_be_deleted_only_erased_with_the_end_users(bot):
    store(bot, "steve", "Steve keeps bees.")
    store(bot, "steve", "Steve keeps wasps.")
    entry = MemoryEntry.objects.order_by("pk")[0]

    assert bot.delete(f"{MEMORY}/{entry.pk}").status_code == 404
    narrowed = bot.delete(f"{MEMORY}?user_id=steve&id={entry.pk}")  # what looks like one memory erases none
    assert narrowed.status_code == 400 and narrowed.json()["error"]["details"]["fields"] == {
        "id": ["Not a parameter of the erasure."]}
    assert MemoryEntry.objects.count() == 2
    assert bot.delete(f"{MEMORY}?user_id=steve").json() == {"memories": 2, "facts": 0, "traces": 0}


@pytest.mark.parametrize(("method", "path", "body"), [
    ("post", MEMORY, {"user_id": "steve"}),
    ("post", MEMORY, {"user_id": "steve", "content": ""}),
    ("post", MEMORY, {"user_id": "steve", "content": "x" * 10_001}),
    ("post", MEMORY, {"user_id": "steve", "content": "nul \x00 byte"}),
    ("post", MEMORY, {"user_id": "", "content": "Steve keeps bees."}),
    ("post", MEMORY, {"user_id": "u" * 201, "content": "Steve keeps bees."}),
    ("post", MEMORY, {"user_id": ["steve"], "content": "Steve keeps bees."}),
    ("delete", f"{MEMORY}?user_id=steve&everything=no", {}),
    ("put", FACTS, {"user_id": "steve", "key": "has space", "value": "x"}),
    ("put", FACTS, {"user_id": "steve", "key": "name", "value": "v" * 1001}),
    ("put", FACTS, {"user_id": "steve", "key": "name"}),
    ("get", MEMORY, {"user_id": "steve", "limit": 0}),
    ("get", MEMORY, {}),
    ("delete", MEMORY, {}),
    ("get", EXPORT, {}),
])
def test_bad_input_is_a_json_400_and_changes_nothing(bot, method, path, body):
    store(bot, "steve", "Steve keeps bees.")
    before = (list(MemoryEntry.objects.values_list("pk", "times")), list(Fact.objects.values()))

    if method in ("post", "put"):
        response = getattr(bot, method)(path, body, format="json")
    else:
        response = getattr(bot, method)(path, body) if method == "get" else bot.delete(path)  # delete: in the path

    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] in ("invalid_input", "malformed_request")  # NUL: the JSON is refused
    assert (list(MemoryEntry.objects.values_list("pk", "times")), list(Fact.objects.values())) == before


def test_a_person_is_refused_facts_and_memory_which_are_an_agents(client):
    client.force_login(person("cora", "curator"))

    response = client.get(MEMORY, {"user_id": "steve"})

    assert response.status_code == 403 and response.json()["error"]["code"] == "forbidden"


def test_a_long_word_is_no_keyword_and_a_memory_stored_without_the_model_gets_its_vector_when_stored_again(
        bot, monkeypatch):
    url = "https://example.com/" + "a" * 120
    monkeypatch.setattr("retrieval.memory.services.get_embedder", lambda: None)

    first = store(bot, "steve", f"Steve's notes live at {url} now.")

    assert first.status_code == 201 and MemoryEntry.objects.get().embedding is None
    assert all(len(word) <= 100 for word in MemoryEntry.objects.get().keywords)
    monkeypatch.undo()
    again = store(bot, "steve", f"Steve's notes live at {url} now.")
    assert again.status_code == 200 and MemoryEntry.objects.get().embedding is not None
    assert search(bot, "steve", "where are my notes kept?")[0]["similarity"] is not None


def test_the_same_person_is_another_hash_for_each_agent(bot, other_bot):
    agents = list(Agent.objects.filter(name__in=["helper-bot", "other-bot"]))
    assert end_user_digest(agents[0], "steve") != end_user_digest(agents[1], "steve")
