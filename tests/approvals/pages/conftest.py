"""Fixtures for the reviewer's pages: named people for every row of the permission
matrix (tests/approvals/conftest.py has rita and rob, reviewers, and cora, a curator),
a pending request, a signed-in client per person; a browser."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client

from tests.approvals.builders import raised
from tests.factories import person


@pytest.fixture
def nobody(db):
    """Signed in, in no group."""
    return person("nobody")


@pytest.fixture
def staff(db):
    """Staff status (the admin) but no role: no back door."""
    return person("stan", is_staff=True)


@pytest.fixture
def bea(db):
    """Both roles."""
    return person("bea", "curator", "reviewer")


@pytest.fixture
def sue(db):
    """A superuser: holds every role."""
    return person("sue", is_superuser=True, is_staff=True)


@pytest.fixture
def pending(kb, agent) -> int:
    """The id of a pending request of `agent` for the governed source `vault`."""
    return raised(agent, kb.vault, via="enrichment")


@pytest.fixture
def client_for():
    """client_for(user, csrf=False) -> a Client signed in as `user`."""
    def make(user, *, csrf: bool = False) -> Client:
        client = Client(enforce_csrf_checks=csrf)
        client.force_login(user)
        return client

    return make


# --- the browser (Debian's chromium driven by Playwright, as tests/retrieval/test_home_browser.py) ---

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is missing: `make chromium` installs it")
    sync_api = pytest.importorskip("playwright.sync_api")
    # Playwright's sync API runs an event loop in this thread, which Django's ORM (used
    # by fixtures and the transactional flush) would otherwise refuse.
    with pytest.MonkeyPatch.context() as patch, sync_api.sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    context.set_default_timeout(15_000)
    yield context.new_page()
    context.close()
