"""The Content-Security-Policy (issue 20, item 9): on every answer, including those no view
made (errors the middleware answers, the 404 page); pages that run under it, with no inline
script, handler or style in any template; the API docs pages served from this origin with
their start-up script a file, Redoc alone allowed its run-time styles.
(tests/test_permission_matrix.py checks the header on every URL for every caller; the
browser tests see a violation as a console error.)"""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.test import Client

from tests.policy import assert_policy, policy_of

TEMPLATES = settings.BASE_DIR / "templates"
# What a policy without 'unsafe-inline' for scripts and styles refuses, in a template.
INLINE = {
    "an inline script": re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I),
    "an event handler attribute": re.compile(r"\son[a-z]+\s*=", re.I),
    "an hx-on attribute (eval)": re.compile(r"\shx-on[:-]", re.I),
    "a style attribute": re.compile(r"\sstyle\s*=", re.I),
    "a <style> element": re.compile(r"<style\b", re.I),
    "a javascript: URL": re.compile(r"javascript:", re.I),
}


def test_no_template_holds_what_the_policy_refuses():
    found = [f"{path.relative_to(TEMPLATES)}:{number}: {what}"
             for path in sorted(TEMPLATES.rglob("*.html"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             for what, pattern in INLINE.items() if pattern.search(line)]
    assert found == []


def test_htmx_adds_no_style_and_evaluates_nothing(client, rita):
    client.force_login(rita)
    page = client.get("/approvals/").content.decode()
    config = re.search(r'<meta name="htmx-config" content=\'([^\']*)\'>', page)
    assert config is not None
    assert '"includeIndicatorStyles": false' in config.group(1) and '"allowEval": false' in config.group(1)


@pytest.mark.django_db
@pytest.mark.parametrize(("path", "status"), [
    ("/accounts/login/", 200),
    ("/no-such-page/", 404),
    ("/api/v1/health", 200),
    ("/api/v1/no-such-endpoint", 404),  # answered by the error middleware, not a view
    ("/api/v1/catalogs", 401),
    ("/api/v1/schema/", 200),
])
def test_every_answer_carries_the_policy(path, status):
    answer = Client().get(path)
    assert answer.status_code == status
    assert_policy(answer, path)


@pytest.mark.django_db
def test_a_body_refused_before_any_view_reads_it_carries_the_policy(agent_token, make_catalog, settings):
    token = agent_token("bot", [make_catalog("kb")])
    answer = Client().post("/api/v1/search", "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1),
                           content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert answer.status_code == 413 and answer["Content-Type"] == "application/json"
    assert_policy(answer, "/api/v1/search")


@pytest.mark.django_db
def test_the_api_docs_page_loads_only_files_from_this_origin():
    page = Client().get("/api/v1/docs/")
    html = page.content.decode()

    assert_policy(page, "/api/v1/docs/")
    assert not any(pattern.search(html) for pattern in INLINE.values()), html
    scripts = re.findall(r'<script src="([^"]+)"', html)
    assert len(scripts) == 3 and all(src.startswith("/") and not src.startswith("//") for src in scripts), scripts
    start_up = Client().get(scripts[-1])
    assert start_up.status_code == 200 and start_up["Content-Type"].startswith("application/javascript")
    assert b"SwaggerUIBundle" in start_up.content


@pytest.mark.django_db
def test_redoc_alone_may_add_styles_and_a_worker_and_fetches_no_fonts():
    page = Client().get("/api/v1/redoc/")
    html = page.content.decode()

    relaxed = policy_of(page)
    assert relaxed["style-src"] == ["'self'", "'unsafe-inline'"] and relaxed["worker-src"] == ["blob:"]
    assert relaxed["script-src"] == ["'self'"]
    assert "<script>" not in html and "<style" not in html and "fonts.googleapis.com" not in html
