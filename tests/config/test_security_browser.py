"""The pages outside the dashboard under the Content-Security-Policy, in a real browser
(Debian's chromium): the API docs (Swagger UI and Redoc) and the admin render with no
violation (a refused script or style is a console error), and a locked-out sign-in says
why. The dashboard's own pages are audited by their browser tests (tests/browser.py)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from approvals.channels.webhooks.endpoints import endpoint_create
from tests.browser import CONSOLE_ERRORS, page_audit
from tests.factories import person

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery"


def console_errors(page) -> list[str]:
    return list(getattr(page, CONSOLE_ERRORS))


def test_swagger_ui_runs_under_the_policy(live_server, page):
    page.goto(f"{live_server.url}/api/v1/docs/")

    expect(page.locator(".opblock").first).to_be_visible()  # the operations, drawn by its scripts
    expect(page.locator(".information-container .title")).to_contain_text("Lectern API")
    page.locator(".opblock-summary").first.click()  # a script-driven part works too
    expect(page.locator(".opblock-body").first).to_be_visible()
    assert console_errors(page) == [], console_errors(page)


def test_redoc_runs_under_its_policy(live_server, page):
    page.goto(f"{live_server.url}/api/v1/redoc/")

    expect(page.locator("h1").first).to_contain_text("Lectern API")
    expect(page.get_by_text("/api/v1/health").first).to_be_attached()  # an operation, drawn
    # The one thing refused: the Redocly logo its bundle fetches from a CDN (Redoc then leaves it out).
    refused = [error for error in console_errors(page) if "https://cdn.redoc.ly/redoc/logo-mini.svg" not in error]
    assert refused == [], refused


def test_the_admin_runs_under_the_policy(live_server, page, make_catalog):
    person("ada", "curator", is_staff=True, is_superuser=True, password=PASSWORD)
    endpoint = endpoint_create(catalog=make_catalog("kb"), url="https://hooks.example.com/in", by=None).endpoint

    page.goto(f"{live_server.url}/admin/")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", PASSWORD)
    page.click("input[type=submit]")
    expect(page.locator("#site-name")).to_be_visible()
    for path in ("/admin/", "/admin/approvals/webhookendpoint/",
                 f"/admin/approvals/webhookendpoint/{endpoint.pk}/change/", "/admin/auth/user/",
                 "/admin/auth/user/add/", "/admin/catalog/catalog/"):
        page.goto(f"{live_server.url}{path}")
        expect(page.locator("#content")).to_be_visible()
    assert console_errors(page) == [], console_errors(page)


def test_a_locked_out_sign_in_says_why(live_server, page, settings):
    settings.AXES_FAILURE_LIMIT = 3
    person("rita", "reviewer", password=PASSWORD)
    page.goto(f"{live_server.url}/accounts/login/?next=/approvals/")
    for password in ("wrong-1", "wrong-2", "wrong-3", PASSWORD):
        page.fill("input[name=username]", "rita")
        page.fill("input[name=password]", password)
        page.click("button:has-text('Sign in')")

    expect(page.get_by_role("alert")).to_contain_text("Too many failed sign-ins for this user name")
    assert page.url.startswith(f"{live_server.url}/accounts/login/")
    page_audit(page, "signin-locked", allow=[r"status of 429"])
    assert not re.search(r"Refused to", " ".join(console_errors(page)))
