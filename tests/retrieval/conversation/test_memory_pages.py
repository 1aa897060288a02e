"""Curators see an agent's end users, one end user's facts and memories, export them and
erase them (audited, confirmed by typing the id); nobody else does."""

from __future__ import annotations

import json

import pytest

from catalog.models import AuditEntry
from retrieval.memory.selectors import end_user_digest
from retrieval.memory.services import fact_set, memory_store
from retrieval.models import Fact, MemoryEntry
from tests.factories import agent_with_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def kept(db):
    agent, _ = agent_with_token(name="helper-bot")
    fact_set(agent=agent, user_id="steve@example.com", key="name", value="Steve")
    memory_store(agent=agent, user_id="steve@example.com", content="Steve keeps bees.")
    memory_store(agent=agent, user_id="steve@example.com", content="Steve keeps bees.")
    memory_store(agent=agent, user_id="ana", content="Ana keeps chickens.")
    return agent


def test_the_end_users_are_listed_with_what_is_kept_about_each(client_for, cora, kept):
    page = client_for(cora).get(f"/agents/{kept.pk}/memory/")
    found = client_for(cora).get(f"/agents/{kept.pk}/memory/", {"q": "steve"})

    html = page.content.decode()
    assert page.status_code == 200 and "<code>steve@example.com</code>" in html and "<code>ana</code>" in html
    assert "?user=steve%40example.com" in html
    assert "<code>ana</code>" not in found.content.decode()


def test_one_end_users_facts_and_memories_and_their_export(client_for, cora, kept):
    page = client_for(cora).get(f"/agents/{kept.pk}/memory/", {"user": "steve@example.com"})
    export = client_for(cora).get(f"/agents/{kept.pk}/memory/export", {"user": "steve@example.com"})

    html = page.content.decode()
    assert page.status_code == 200 and "Steve keeps bees." in html and "2×" in html and "Ana keeps" not in html
    assert "<dt><code>name</code></dt><dd>Steve</dd>" in html
    assert export["Content-Disposition"] == 'attachment; filename="helper-bot-end-user-memory.json"'
    body = json.loads(export.content)
    assert body["user_id"] == "steve@example.com" and [m["content"] for m in body["memories"]] == ["Steve keeps bees."]
    assert body["facts"] == [{"key": "name", "value": "Steve", "updated_at": body["facts"][0]["updated_at"]}]


def test_erasing_needs_the_id_typed_again_and_is_audited(client_for, cora, kept):
    client = client_for(cora)
    url = f"/agents/{kept.pk}/memory/erase"

    refused = client.post(url, {"user": "steve@example.com", "confirm": "steve"})

    assert refused.status_code == 400 and "Type the end user&#x27;s id exactly" in refused.content.decode()
    assert 'aria-invalid="true"' in refused.content.decode()
    assert MemoryEntry.objects.filter(user_id="steve@example.com").exists() and not AuditEntry.objects.filter(
        action="memory.erased").exists()

    erased = client.post(url, {"user": "steve@example.com", "confirm": "steve@example.com"}, follow=True)

    assert "Erased 1 memory, 1 fact and 0 conversation traces of that end user" in erased.content.decode()
    assert not MemoryEntry.objects.filter(user_id="steve@example.com").exists()
    assert not Fact.objects.filter(user_id="steve@example.com").exists()
    assert MemoryEntry.objects.filter(user_id="ana").exists()
    entry = AuditEntry.objects.get(action="memory.erased")
    assert (entry.actor_name, entry.agent_id) == ("cora", kept.pk)
    assert entry.payload["end_user"] == end_user_digest(kept, "steve@example.com")


def test_the_pages_take_a_constant_number_of_statements(client_for, cora, kept, django_assert_max_num_queries):
    for number in range(30):
        memory_store(agent=kept, user_id=f"user-{number}", content=f"Memory {number}.")
    client = client_for(cora)
    client.get(f"/agents/{kept.pk}/memory/")  # the session, warmed

    with django_assert_max_num_queries(8):
        assert client.get(f"/agents/{kept.pk}/memory/").status_code == 200
    with django_assert_max_num_queries(9):
        assert client.get(f"/agents/{kept.pk}/memory/", {"user": "user-3"}).status_code == 200
