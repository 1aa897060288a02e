"""The agent pages and the status page in a real browser (Debian's chromium driven by
Playwright), as a curator and a reviewer meet them: create an agent and copy its token
(shown once; it works over HTTP at once), refusals shown beside the fields they
concern, pins that follow the catalogs checked, rotate and revoke after a confirmation
(the revoked token's next call gets 401 over HTTP), the whole of it by keyboard alone,
and the status page with the curator's reset. Every page is audited (tests/browser.py:
no console errors, no serious axe-core violations, usable at 1280 and 390 px) and
photographed (`make screenshots`: var/screenshots/)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass

import pytest

from catalog.audit.log import Action
from catalog.models import Agent, AuditEntry, Catalog, ReferenceSource
from catalog.sources.documents import DocumentInput
from tests.browser import page_audit, tab_to, wait_until
from tests.browser import sign_in as browser_sign_in
from tests.factories import agent_with_token, import_documents, person

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery"


@dataclass
class Desk:
    ops: Catalog
    hr: Catalog
    runbook: ReferenceSource
    leave: ReferenceSource
    support: Agent
    support_token: str


def inline(catalog: Catalog, slug: str, name: str) -> ReferenceSource:
    return ReferenceSource.objects.create(catalog=catalog, slug=slug, name=name, kind=ReferenceSource.Kind.INLINE,
                                          content=f"{name}.", status=ReferenceSource.Status.READY)


@pytest.fixture
def desk(transactional_db) -> Desk:
    person("cora", "curator", password=PASSWORD)
    person("rita", "reviewer", password=PASSWORD)
    ops = Catalog.objects.create(slug="ops", name="Operations")
    hr = Catalog.objects.create(slug="hr", name="People handbook")
    import_documents(catalog=ops, slug="payments-runbook", documents=[DocumentInput(
        "payments.md", "Payments runbook", "When the payment gateway times out, retry twice with backoff.", 64)])
    runbook = ReferenceSource.objects.get(catalog=ops, slug="payments-runbook")
    ReferenceSource.objects.filter(pk=runbook.pk).update(name="Payments runbook")
    inline(ops, "incident-response", "Incident response")
    inline(ops, "on-call", "On-call rota")
    leave = inline(hr, "parental-leave", "Parental leave")
    inline(hr, "expenses", "Expenses policy")
    support, token = agent_with_token(name="support-bot", catalogs=[ops], preselected=[runbook])
    agent_with_token(name="deploy-bot", catalogs=[ops], strategy="rag", is_curator=True)
    return Desk(ops, hr, runbook, leave, support, token)


def shot(page, name: str, **allowed) -> None:
    page_audit(page, name, **allowed)


def sign_in(page, base_url: str, username: str, next_path: str) -> None:
    browser_sign_in(page, base_url, username, PASSWORD, next_path)


def api_status(base_url: str, token: str) -> int:
    """An agent's call over HTTP to the server the browser uses."""
    request = urllib.request.Request(f"{base_url}/api/v1/catalogs", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            json.load(response)
            return int(response.status)
    except urllib.error.HTTPError as refused:
        return refused.code


def copied_token(page, base_url: str) -> str:
    """Copy the token with its button and read it back from the clipboard."""
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base_url)
    page.click("button[data-copy=token]")
    wait_until(page, "() => document.querySelector('#copy-status').textContent.includes('Copied')")
    token = page.evaluate("navigator.clipboard.readText()")
    assert token == page.input_value("#token") and token.startswith("lct_")
    return str(token)


def test_a_curator_creates_an_agent_and_copies_its_token_which_works_at_once(page, live_server, desk):
    sign_in(page, live_server.url, "cora", "/agents/")
    assert page.locator("table.agents tbody tr").count() == 2
    assert page.locator("nav.primary a[aria-current=page]").inner_text() == "Agents"
    shot(page, "agents-01-list")

    page.click("a:has-text('New agent')")
    page.wait_for_url(f"{live_server.url}/agents/new")
    shot(page, "agents-02-new")
    page.fill("#id_name", "support-bot")  # taken
    page.fill("#id_token_budget", "50")
    page.click("button:has-text('Create agent')")

    page.wait_for_selector("#form-errors")
    assert "An agent of this name exists already" in page.locator("#id_name_error").inner_text()
    assert "Choose at least one catalog" in page.locator("#id_catalogs_error").inner_text()
    assert "greater than or equal to 100" in page.locator("#id_token_budget_error").inner_text()
    assert page.get_attribute("#id_token_budget", "aria-invalid") == "true"
    assert page.get_attribute("#id_token_budget", "aria-describedby") == \
        "id_token_budget_helptext id_token_budget_error"
    assert page.input_value("#id_name") == "support-bot", "what was typed stays"
    shot(page, "agents-03-new-refused")

    page.fill("#id_name", "helper-bot")
    page.fill("#id_token_budget", "4000")
    page.check("label:has-text('Operations (ops)') input")
    page.wait_for_selector("#pins label:has-text('Payments runbook')")  # the pins of the checked catalog
    page.check("#pins label:has-text('Incident response') input")
    page.check("label:has-text('rag') input[name=strategy]")
    page.click("button:has-text('Create agent')")

    page.wait_for_selector("#token")
    assert "helper-bot is created" in page.locator("h1").inner_text()
    token = copied_token(page, live_server.url)
    shot(page, "agents-04-token-once")
    agent = Agent.objects.get(name="helper-bot")
    assert (agent.strategy, agent.token_budget) == ("rag", 4000)
    assert [s.slug for s in agent.preselected.all()] == ["incident-response"]
    assert api_status(live_server.url, token) == 200

    page.click("a:has-text('Done')")
    page.wait_for_url(f"{live_server.url}/agents/{agent.pk}/")
    assert token not in page.content() and token[:8] in page.content()


def test_pins_follow_the_catalogs_and_one_outside_them_is_refused_in_place(page, live_server, desk):
    sign_in(page, live_server.url, "cora", f"/agents/{desk.support.pk}/")
    assert page.is_checked("#pins label:has-text('Payments runbook') input")
    shot(page, "agents-05-agent")

    page.check("label:has-text('People handbook (hr)') input")
    page.wait_for_selector("#pins label:has-text('Parental leave')")
    page.check("#pins label:has-text('Parental leave') input")
    page.uncheck("label:has-text('People handbook (hr)') input")  # the pin stays, outside the catalogs
    page.wait_for_selector("#pins .pin-group.outside label:has-text('Parental leave')")
    page.click("button:has-text('Save changes')")

    error = page.wait_for_selector("#id_preselected_error")
    assert "hr/parental-leave is not" in error.inner_text()
    assert page.is_checked("#pins .outside label:has-text('Parental leave') input")
    shot(page, "agents-06-pin-refused")
    assert list(Agent.objects.get(pk=desk.support.pk).catalogs.all()) == [desk.ops]

    page.uncheck("#pins .outside label:has-text('Parental leave') input")
    page.fill("#id_max_hints", "8")
    page.click("button:has-text('Save changes')")
    page.wait_for_selector(".message")
    assert "Saved support-bot: changed most hints." in page.locator(".message").inner_text()
    assert Agent.objects.get(pk=desk.support.pk).max_hints == 8
    assert AuditEntry.objects.get(action=Action.AGENT_UPDATED).payload["changes"] == {
        "max_hints": {"from": 5, "to": 8}}
    shot(page, "agents-07-saved")


def test_a_revoked_tokens_next_call_gets_401_and_a_new_token_lets_the_agent_in(page, live_server, desk):
    sign_in(page, live_server.url, "cora", f"/agents/{desk.support.pk}/")
    assert api_status(live_server.url, desk.support_token) == 200

    page.click("a:has-text('Revoke token…')")
    page.wait_for_url(f"{live_server.url}/agents/{desk.support.pk}/revoke")
    shot(page, "agents-08-revoke-confirm")
    page.click("a:has-text('Cancel')")
    page.wait_for_url(f"{live_server.url}/agents/{desk.support.pk}/")
    assert api_status(live_server.url, desk.support_token) == 200, "cancelled: nothing changed"

    page.click("a:has-text('Revoke token…')")
    page.click("button:has-text('Revoke token')")
    page.wait_for_selector(".message")

    assert api_status(live_server.url, desk.support_token) == 401
    assert "revoked" in page.locator("h1 .state").inner_text()
    assert AuditEntry.objects.get(action=Action.TOKEN_REVOKED).actor_name == "cora"
    shot(page, "agents-09-revoked")

    page.click("a:has-text('Issue a new token…')")
    shot(page, "agents-10-rotate-confirm")
    page.click("button:has-text('Issue new token')")
    page.wait_for_selector("#token")
    token = page.input_value("#token")
    assert (api_status(live_server.url, token), api_status(live_server.url, desk.support_token)) == (200, 401)
    page.goto(f"{live_server.url}/agents/?state=revoked")
    assert page.locator("table.agents td.empty").count() == 1


def test_an_agent_is_created_and_its_token_copied_by_keyboard_alone(page, live_server, desk):
    sign_in(page, live_server.url, "cora", "/")

    tab_to(page, "nav.primary a[href='/agents/']")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/agents/")
    tab_to(page, "a[href='/agents/new']")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/agents/new")
    tab_to(page, "#id_name")
    page.keyboard.type("keyboard-bot")
    tab_to(page, f"input[name=catalogs][value='{desk.hr.pk}']")
    page.keyboard.press("Space")
    page.wait_for_selector("#pins label:has-text('Parental leave')")
    tab_to(page, f"#pins input[value='{desk.leave.pk}']")
    page.keyboard.press("Space")
    tab_to(page, "button[type=submit]")
    page.keyboard.press("Enter")

    page.wait_for_selector("#token")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    tab_to(page, "button[data-copy=token]")
    page.keyboard.press("Enter")
    wait_until(page, "() => document.querySelector('#copy-status').textContent.includes('Copied')")
    assert page.evaluate("navigator.clipboard.readText()") == page.input_value("#token")
    agent = Agent.objects.get(name="keyboard-bot")
    assert [c.slug for c in agent.catalogs.all()] == ["hr"] and list(agent.preselected.all()) == [desk.leave]


def test_the_status_page_for_a_reviewer_and_a_curators_reset(page, live_server, desk):
    sign_in(page, live_server.url, "rita", "/status/")
    nav = page.locator("nav.primary").inner_text()
    assert "Status" in nav and "Agents" not in nav
    assert page.locator("button:has-text('Reload model and clear caches')").count() == 0
    assert "all-MiniLM-L6-v2-int8" in page.locator("#status-panel").inner_text()
    page.click("button:has-text('Refresh')")
    page.wait_for_selector("#status-panel .generated")
    shot(page, "status-01-reviewer")

    page.context.clear_cookies()
    sign_in(page, live_server.url, "cora", "/status/")
    page.click("button:has-text('Reload model and clear caches')")
    notice = page.wait_for_selector("#status-panel .notice")

    assert "the model all-MiniLM-L6-v2-int8 loaded again" in notice.inner_text()
    entry = AuditEntry.objects.get(action=Action.RUNTIME_RESET)
    assert entry.actor_name == "cora"
    assert f"#{entry.seq}" in page.locator("#status-panel").inner_text()
    shot(page, "status-02-after-reset")
