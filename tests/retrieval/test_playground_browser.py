"""The playground and the traces pages in a real browser (Debian's chromium driven by
Playwright), as a curator meets them: "/" leads there; a search as a person and as an
agent, its hits swapped in by htmx with every score and rank and the query's terms
marked, the address bar holding the run's link; a refused run shown beside its field
with the input kept; a prompt enriched as the agent with its trace; a tag added to a
reference and the same prompt now detecting it; a run's link opened afresh; the whole
of a run by keyboard alone; the traces list filtered, a trace opened and run again.
Every page is audited (tests/browser.py: no console errors, no serious axe-core
violation, usable at 1280 and 390 px) and photographed (`make screenshots`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from playwright.sync_api import expect

from approvals.models import ApprovalRequest
from catalog.models import Agent, Catalog, ReferenceSource
from catalog.sources.documents import DocumentInput
from catalog.tags import tags_ensure
from retrieval.enrichment.caller import Caller
from retrieval.enrichment.pipeline import enrich
from retrieval.models import Trace
from tests.browser import htmx_settled, page_audit, tab_to, wait_until
from tests.factories import agent_with_token, import_documents, person

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery"
QUARTZ_PROMPT = "The quartz pipeline failed again at midnight; who should look at it?"


@dataclass
class Studio:
    ops: Catalog
    rota: ReferenceSource
    support: Agent


def document(slug: str, title: str, text: str) -> list[DocumentInput]:
    return [DocumentInput(f"{slug}.md", title, text, len(text.encode()))]


def tagged(source: ReferenceSource, name: str, *tags: str) -> ReferenceSource:
    ReferenceSource.objects.filter(pk=source.pk).update(name=name)
    source.tags.add(*tags_ensure(names=list(tags)))
    return ReferenceSource.objects.get(pk=source.pk)


@pytest.fixture
def studio(transactional_db) -> Studio:
    person("cora", "curator", password=PASSWORD)
    ops = Catalog.objects.create(slug="ops", name="Operations", description="How we run our services.")
    tagged(import_documents(catalog=ops, slug="retries", documents=document(
        "retries", "Retries", "Retry transient failures with exponential backoff and jitter. Cap the attempts; "
        "a retry storm makes an outage worse.")), "Retries", "retries", "backoff")
    tagged(import_documents(catalog=ops, slug="caching", documents=document(
        "caching", "Caching", "Cache responses in Redis with a time to live. Invalidate the cache on every write "
        "to the record behind it.")), "Caching", "caching", "redis")
    vault = tagged(import_documents(catalog=ops, slug="vault", documents=document(
        "vault", "Vault", "Rotate the vault credentials every ninety days. Never paste secrets into tickets.")),
        "Secrets vault", "secrets", "credentials")
    ReferenceSource.objects.filter(pk=vault.pk).update(requires_approval=True)
    rota = tagged(import_documents(catalog=ops, slug="on-call", documents=document(
        "on-call", "On-call rota", "Who answers pages each week, and how to hand over at the end of a shift.")),
        "On-call rota")
    support, _ = agent_with_token(name="support-bot", catalogs=[ops])
    return Studio(ops=ops, rota=rota, support=support)


def sign_in(page, base_url: str, next_path: str = "/") -> None:
    page.goto(f"{base_url}/accounts/login/?next={next_path}")
    page.fill("input[name=username]", "cora")
    page.fill("input[name=password]", PASSWORD)
    page.click("button:has-text('Sign in')")


def run(page, *, kind: str = "search", agent: str = "", catalog: str = "", text: str) -> None:
    page.check(f"input[name=kind][value={kind}]")
    page.select_option("#id_agent", agent)
    page.select_option("#id_catalog", catalog)
    page.fill("#id_text", text)
    page.click("#play-form button[type=submit]")


def test_anonymous_visit_redirects_to_the_login_page(page, live_server):
    page.goto(f"{live_server.url}/")

    assert page.url == f"{live_server.url}/accounts/login/?next=/"
    assert page.locator("h1").inner_text() == "Sign in"
    page_audit(page, "login")


def test_a_search_as_a_person_and_as_the_agent_shows_scores_ranks_and_what_was_withheld(page, live_server, studio):
    sign_in(page, live_server.url)
    page.wait_for_url(f"{live_server.url}/playground/")
    assert page.locator("nav.primary a[aria-current=page]").inner_text() == "Playground"
    page_audit(page, "playground-01-empty")

    run(page, catalog="ops", text="how should we retry transient failures?")
    page.wait_for_selector("#run .play-hit")

    assert re.search(r"/playground/\?kind=search&text=how\+should", page.url), "the run's link, by htmx"
    first = page.locator(".play-hit").first
    assert first.locator(".hit-head strong").inner_text() == "Retries"
    assert [dt.inner_text().lower() for dt in first.locator("dt").all()] == ["fused", "bm25", "vector"]
    assert re.search(r"\d\.\d{3}\s+rank \d", first.locator("dd").nth(1).inner_text())
    assert "transient" in first.locator("mark").all_inner_texts()
    assert "vault" in page.locator(".withheld-list").inner_text()
    assert "approvals are granted to agents" in page.locator(".withheld-list").inner_text()
    page_audit(page, "playground-02-search-as-a-person")

    run(page, agent="support-bot", catalog="ops", text="rotate the vault credentials")
    withheld = page.wait_for_selector("#run .withheld-list:has-text('no reviewer has approved it for this agent')")
    # named whatever the query, with no count and no request its search would raise: no policy discloses matches
    assert "vault" in withheld.inner_text() and "matching passage" not in withheld.inner_text()
    assert "would raise an approval request" not in withheld.inner_text()
    assert "support-bot" in page.locator("#run .play-run-head").inner_text()
    assert "Rotate the vault" not in page.locator("#run").inner_text(), "nothing of a withheld reference"
    assert ApprovalRequest.objects.count() == 0 and Trace.objects.count() == 0, "a dry run"
    page_audit(page, "playground-03-search-as-the-agent")


def test_why_not_a_document_is_answered_stage_by_stage_under_the_hits_and_a_wrong_path_is_refused(
        page, live_server, studio):
    sign_in(page, live_server.url, "/playground/")
    page.wait_for_url(f"{live_server.url}/playground/")
    page.fill("#id_top_k", "1")
    run(page, agent="support-bot", catalog="ops", text="retry transient failures and cache the responses")
    page.wait_for_selector("#run .play-hit")
    assert page.locator(".play-hit").count() == 1
    htmx_settled(page)  # htmx listens to the swapped-in field only once it settles

    page.fill("#id_why_not_document", "cach")  # the field suggests the catalog's documents as one types
    wait_until(page, "() => document.querySelectorAll('#why-not-documents option').length === 1")
    assert page.get_attribute("#why-not-documents option", "value") == "caching/caching.md"
    page.fill("#id_why_not_document", "caching/caching.md")
    page.click("#why-not-form button[type=submit]")
    page.wait_for_selector("#why-not .why-not-answer")

    answer = page.locator("#why-not .why-not-answer")
    assert "Verdict: ranked 2: below top_k 1." in answer.inner_text()
    rows = answer.locator("table.why-not-table tbody th[scope=row]").all_inner_texts()
    assert rows[0] == "BM25" and "Vector" in rows and rows[-1].startswith("Fused")
    assert answer.locator("tr.term.matched").count() >= 1 and answer.locator("tr.term.missing").count() >= 1
    assert "cut-off: top_k 1, below it" in answer.locator("tr.fused").inner_text()
    assert "support-bot" in page.locator("#run .play-run-head").inner_text(), "the search above stays"
    assert ApprovalRequest.objects.count() == 0 and Trace.objects.count() == 0, "a read"
    page.evaluate("window.scrollTo(0, 0)")  # the answer took focus; photographed from the top, as the others
    page_audit(page, "playground-08-why-not")

    htmx_settled(page)
    page.fill("#id_why_not_document", "caching/nowhere.md")
    page.click("#why-not-form button[type=submit]")
    error = page.wait_for_selector("#id_why_not_document_error")
    assert "No document “nowhere.md” in source caching of catalog ops: pick one from the list." in error.inner_text()
    assert page.get_attribute("#id_why_not_document", "aria-invalid") == "true"
    assert page.input_value("#id_why_not_document") == "caching/nowhere.md"
    assert page.locator("#why-not .why-not-answer").count() == 0
    page.evaluate("window.scrollTo(0, 0)")
    page_audit(page, "playground-09-why-not-refused")

    htmx_settled(page)
    page.fill("#id_why_not_document", "vault/vault.md")  # withheld from the agent: its governance alone
    page.click("#why-not-form button[type=submit]")
    page.wait_for_selector("#why-not .why-outcome-withheld")
    assert "Rotate the vault" not in page.locator("#why-not").inner_text()
    assert page.locator("#why-not table").count() == 0


def test_a_refused_run_shows_why_beside_the_field_and_keeps_what_was_typed(page, live_server, studio):
    sign_in(page, live_server.url, "/playground/")
    page.wait_for_url(f"{live_server.url}/playground/")

    run(page, agent="support-bot", text="retry storms")  # a search needs its catalog
    error = page.wait_for_selector("#id_catalog_error")

    assert "Choose the catalog to search." in error.inner_text()
    assert page.get_attribute("#id_catalog", "aria-invalid") == "true"
    assert page.input_value("#id_text") == "retry storms" and page.input_value("#id_agent") == "support-bot"
    assert page.locator("#run").count() == 0
    page_audit(page, "playground-04-refused")


def test_a_prompt_as_the_agent_shows_what_it_gets_and_its_trace_and_a_new_tag_changes_detection(
        page, live_server, studio):
    sign_in(page, live_server.url, "/playground/")
    page.wait_for_url(f"{live_server.url}/playground/")

    run(page, kind="prompt", agent="support-bot", text="Our Redis cache is stale again; rotate the credentials")
    page.wait_for_selector("#run pre.enriched")

    outcomes = page.locator("ul.outcomes").inner_text()
    assert "Caching" in outcomes and "Secrets vault" in outcomes
    marks = page.locator("pre.tagged mark")
    assert [marks.nth(i).get_attribute("title") for i in range(marks.count())] == ["tag redis", "tag credentials"]
    assert marks.first.text_content() == "Redis (tag redis)"
    assert "Reference sources available" in page.locator("pre.enriched").inner_text()
    assert "Approval gate" in page.locator("ol.passes").inner_text()
    assert "this dry run raised none" in page.locator("ol.passes").inner_text()
    assert Trace.objects.count() == 0
    page_audit(page, "playground-05-prompt-as-the-agent")

    run(page, kind="prompt", agent="support-bot", text=QUARTZ_PROMPT)
    page.wait_for_selector("#run pre.enriched:has-text('quartz pipeline')")
    outcomes = page.locator("section[aria-labelledby=outcomes-title]")
    assert "On-call rota" not in outcomes.inner_text()

    tagged(studio.rota, "On-call rota", "quartz pipeline")  # a curator's edit, through the tags service
    page.click("#play-form button[type=submit]")  # the same prompt again
    page.wait_for_selector("ul.outcomes:has-text('On-call rota')")

    assert page.locator("pre.tagged mark").first.text_content() == "quartz pipeline (tag quartz pipeline)"
    assert "tag “quartz pipeline” in the text" in page.locator("ul.outcomes").inner_text()
    page_audit(page, "playground-06-tag-added")


def test_a_runs_link_opened_afresh_runs_it_again(page, live_server, studio):
    sign_in(page, live_server.url, "/playground/")
    page.wait_for_url(f"{live_server.url}/playground/")
    run(page, kind="tool_result", agent="support-bot", catalog="ops",
        text="$ cat deploy.log\nredis timeout, retrying with backoff")
    page.wait_for_selector("#run pre.enriched")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    page.click("button[data-copy=share-link]")
    wait_until(page, "() => document.querySelector('#share-status').textContent.includes('Copied')")
    link = page.evaluate("navigator.clipboard.readText()")
    assert link == page.url

    fresh = page.context.new_page()
    fresh.goto(link)

    assert fresh.locator("h1").inner_text() == "Playground"
    assert fresh.is_checked("input[name=kind][value=tool_result]")
    assert fresh.input_value("#id_text") == "$ cat deploy.log\nredis timeout, retrying with backoff"
    assert fresh.locator("#workbench ul.outcomes").inner_text() == page.locator("#workbench ul.outcomes").inner_text()
    page_audit(fresh, "playground-07-from-a-link")


def test_a_run_by_keyboard_alone(page, live_server, studio):
    sign_in(page, live_server.url, "/playground/")
    page.wait_for_url(f"{live_server.url}/playground/")

    tab_to(page, "input[name=kind]:checked")
    page.keyboard.press("ArrowRight")  # the radio group: search -> prompt
    assert page.is_checked("input[name=kind][value=prompt]")
    tab_to(page, "#id_agent")
    page.keyboard.press("ArrowDown")  # the first agent
    tab_to(page, "#id_text")
    page.keyboard.type("The redis cache is stale")
    tab_to(page, "#play-form button[type=submit]")
    page.keyboard.press("Enter")

    page.wait_for_selector("#workbench ul.outcomes:has-text('Caching')")
    assert "support-bot" in page.locator("#run .play-run-head").inner_text()


def test_a_failing_run_says_so_and_an_ended_session_goes_to_sign_in(page, live_server, studio):
    sign_in(page, live_server.url, "/playground/")
    page.wait_for_url(f"{live_server.url}/playground/")
    page.route("**/playground/", lambda route: route.fulfill(status=500, body="server error"))

    run(page, catalog="ops", text="retries")
    page.wait_for_selector("#run-failed", state="visible")
    assert "server error" not in page.locator("#workbench").inner_text()

    page.unroute("**/playground/")
    page.context.clear_cookies(name="sessionid")  # the session ends; the CSRF cookie outlives it
    page.click("#play-form button[type=submit]")
    page.wait_for_url(re.compile(r"/accounts/login/\?next="))
    assert page.locator("h1").inner_text() == "Sign in"


def test_the_traces_list_filters_and_a_trace_reads_pass_by_pass(page, live_server, studio):
    caller = Caller.of(studio.support)
    enrich(caller=caller, text="Our Redis cache is stale again; rotate the credentials", surface="prompt")
    enrich(caller=caller, text="$ pytest\nretries exhausted after backoff", surface="tool_result")
    sign_in(page, live_server.url, "/traces/")
    page.wait_for_url(f"{live_server.url}/traces/")
    assert page.locator("table.traces tbody tr").count() == 2
    page_audit(page, "traces-01-list")

    page.select_option("#id_withheld", "yes")
    page.wait_for_url(re.compile(r"withheld=yes"))
    wait_until(page, "() => document.querySelectorAll('table.traces tbody tr').length === 1")
    assert "vault" in page.locator("table.traces tbody").inner_text()
    page_audit(page, "traces-02-filtered")

    page.fill("#id_since", "2026-05-02")
    page.fill("#id_until", "2026-05-01")
    page.click("#trace-filters button[type=submit]")
    expect(page.locator("#id_until_error")).to_have_text("The end of the range comes before its start.")
    expect(page.locator("#id_until")).to_have_attribute("aria-invalid", "true")
    page_audit(page, "traces-03-refused")

    page.goto(f"{live_server.url}/traces/?withheld=yes")
    page.click("table.traces a.trace-link")
    page.wait_for_url(re.compile(r"/traces/[0-9a-f-]{36}/$"))
    assert page.locator("h1").inner_text() == "A prompt enriched for support-bot"
    assert "Secrets vault" in page.locator("ul.outcomes").inner_text()
    assert "Request #" in page.locator("ul.outcomes").inner_text()
    page_audit(page, "traces-04-trace")

    page.click("a:has-text('Run it again in the playground')")
    page.wait_for_selector("#workbench ul.outcomes")
    assert page.is_checked("input[name=kind][value=prompt]") and page.input_value("#id_agent") == "support-bot"


def test_the_traces_are_filtered_and_opened_by_keyboard_alone(page, live_server, studio):
    caller = Caller.of(studio.support)
    enrich(caller=caller, text="Our Redis cache is stale again; rotate the credentials", surface="prompt")
    enrich(caller=caller, text="retries exhausted after backoff", surface="prompt")
    sign_in(page, live_server.url, "/traces/")
    page.wait_for_url(f"{live_server.url}/traces/")

    tab_to(page, "#id_withheld")
    page.keyboard.press("ArrowDown")  # "something withheld"
    page.wait_for_url(re.compile(r"withheld=yes"))
    wait_until(page, "() => document.querySelectorAll('table.traces tbody tr').length === 1")
    tab_to(page, "table.traces a.trace-link")
    page.keyboard.press("Enter")

    page.wait_for_url(re.compile(r"/traces/[0-9a-f-]{36}/$"))
    assert "Secrets vault" in page.locator("ul.outcomes").inner_text()
