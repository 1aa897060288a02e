"""The home page in a real browser (Debian's chromium driven by Playwright): sign-in,
the catalog list, and searches whose results htmx swaps into the page (the browser and
page fixtures are tests/conftest.py's)."""

from __future__ import annotations

import re

import pytest

from tests.browser import page_audit
from tests.factories import person

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery"


@pytest.fixture
def curator(transactional_db):
    return person("curator", "curator", password=PASSWORD)


def sign_in(page, base_url: str, username: str) -> None:
    page.goto(f"{base_url}/accounts/login/?next=/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button:has-text('Sign in')")
    page.wait_for_url(f"{base_url}/")


def search(page, query: str) -> None:
    page.select_option("select[name=catalog]", "ops")
    page.fill("input[name=query]", query)
    page.click("#search-form button[type=submit]")


def test_anonymous_visit_redirects_to_the_login_page(page, live_server):
    page.goto(f"{live_server.url}/")

    assert page.url == f"{live_server.url}/accounts/login/?next=/"
    assert page.locator("h1").inner_text() == "Sign in"
    page_audit(page, "login")


def test_signed_in_curator_searches_and_sees_swapped_in_hits(page, live_server, curator, indexed_catalog):
    sign_in(page, live_server.url, "curator")
    catalogs = page.locator("table.catalogs tbody")
    assert "Ops" in catalogs.inner_text() and "ops" in catalogs.inner_text()

    search(page, "how should we handle transient failures?")
    page.wait_for_selector("#results .hit")

    assert page.url == f"{live_server.url}/", "results arrive by htmx swap, not by navigating"
    titles = page.locator("#results .hit .hit-head strong").all_inner_texts()
    assert "Retries" in titles[:2]
    scores = page.locator("#results .hit .scores").first.inner_text()
    assert re.search(r"bm25 \d+\.\d{3}", scores) and re.search(r"vector \d\.\d{3}", scores), scores
    assert page.locator("#results h1").count() == 0, "the partial, not the full search page"
    page_audit(page, "home-results")


def test_a_blank_query_shows_the_error_in_place(page, live_server, curator, indexed_catalog):
    sign_in(page, live_server.url, "curator")

    # Spaces pass the browser's `required` check; the server strips them and refuses.
    search(page, "   ")
    error = page.wait_for_selector("#results .error")

    assert "query" in error.inner_text() and "required" in error.inner_text()
    assert page.locator("#results .hit").count() == 0
    page_audit(page, "home-error")


def test_a_failing_search_says_so_instead_of_staying_silent(page, live_server, curator, indexed_catalog):
    sign_in(page, live_server.url, "curator")
    page.route("**/search/?*", lambda route: route.fulfill(status=500, body="server error"))

    search(page, "retries")
    failed = page.wait_for_selector("#search-failed", state="visible")

    assert "search failed" in failed.inner_text()
    assert "server error" not in page.locator("#results").inner_text()


def test_a_search_after_the_session_ended_goes_to_the_login_page(page, live_server, curator, indexed_catalog):
    sign_in(page, live_server.url, "curator")
    page.context.clear_cookies()

    search(page, "retries")

    # Not the login form swapped into the results box: the whole page goes to sign-in.
    page.wait_for_url(re.compile(r"/accounts/login/\?next="))
    assert page.locator("h1").inner_text() == "Sign in"
