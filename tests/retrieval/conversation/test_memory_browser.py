"""A curator finds what an agent keeps about an end user and erases it at their request,
in Debian's chromium: the agent's page, its end users, one end user, a mistyped
confirmation refused in place, then the erasure. Every page state audited and
photographed (tests.browser)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from retrieval.memory.services import fact_set, memory_store
from retrieval.models import MemoryEntry
from tests.browser import page_audit, sign_in
from tests.factories import agent_with_token, person

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_curator_reads_and_erases_an_end_users_memory(page, live_server):
    person("cora", "curator", password="correct horse battery")
    agent, _ = agent_with_token(name="helper-bot")
    fact_set(agent=agent, user_id="steve@example.com", key="name", value="Steve")
    fact_set(agent=agent, user_id="steve@example.com", key="location", value="Texas")
    for text in ("Steve keeps bees behind the house.", "Steve prefers VS Code with vim keybindings.",
                 "Steve's project is called Lectern."):
        memory_store(agent=agent, user_id="steve@example.com", content=text)
    memory_store(agent=agent, user_id="ana", content="Ana keeps chickens.")
    sign_in(page, live_server.url, "cora", "correct horse battery", f"/agents/{agent.pk}/")

    expect(page.locator("#id_rag_relevance_threshold")).to_have_value("0.3")  # the conversation profile
    page.click("text=Its end users' facts and memory")
    expect(page.locator("h1")).to_have_text("Facts and memory of helper-bot")
    expect(page.locator("table.end-users tbody tr")).to_have_count(2)
    page_audit(page, "memory-01-end-users")

    page.click("table.end-users a:has-text('steve@example.com')")
    expect(page.locator("table.memories tbody tr")).to_have_count(3)
    expect(page.locator("dl.facts")).to_contain_text("Texas")
    page_audit(page, "memory-02-end-user")

    page.fill("#id_confirm", "steve")
    page.click("#erase-form button[type=submit]")
    expect(page.locator("#id_confirm_error")).to_contain_text("Type the end user's id exactly")
    expect(page.locator("#id_confirm")).to_have_attribute("aria-invalid", "true")
    assert MemoryEntry.objects.filter(user_id="steve@example.com").count() == 3
    page_audit(page, "memory-03-erase-refused", allow=[r"status of 400"])

    page.fill("#id_confirm", "steve@example.com")
    page.click("#erase-form button[type=submit]")
    expect(page.locator(".messages")).to_contain_text(
        "Erased 3 memories, 2 facts and 0 conversation traces of that end user")
    expect(page.locator("table.end-users tbody tr")).to_have_count(1)
    assert not MemoryEntry.objects.filter(user_id="steve@example.com").exists()
    page_audit(page, "memory-04-erased")
