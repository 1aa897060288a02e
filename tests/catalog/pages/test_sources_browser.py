"""Where teams keep their knowledge, added in a real browser (Debian's chromium driven by
Playwright): a git repository the test serves over smart HTTP with a token, a small web
site it serves, and a folder holding a PDF, a DOCX, a PPTX and a scanned PDF; then an
agent's search finds each with its locator, and its conversation enrichment cites the
passages it adds. Indexing runs in the request here (the test settings' synchronous
queue). Every page state shown is audited (tests.browser.page_audit) and photographed."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from rest_framework.test import APIClient

from tests.browser import page_audit
from tests.browser import sign_in as browser_sign_in
from tests.catalog.pages.conftest import build_ops
from tests.documents import docx_bytes, pdf_bytes, pptx_bytes
from tests.factories import agent_with_token, person
from tests.gitserver import Repository, git_http_server
from tests.websites import Site, html_page, web_server

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery"
TOKEN = "glpat-quokka-0123456789abcdef"  # noqa: S105 - a test's token


@pytest.fixture
def cora(transactional_db):
    return person("cora", "curator", password=PASSWORD)


@pytest.fixture
def ops(transactional_db, root):
    return build_ops(root)


def shot(page, name: str) -> None:
    page.evaluate("window.scrollTo(0, 0)")
    page_audit(page, f"sources-{name}")


def search(token: str, query: str) -> dict:
    response = APIClient().post("/api/v1/search", {"catalog": "ops", "query": query, "mode": "bm25", "top_k": 1},
                                format="json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.content
    return response.json()["results"][0]


def test_a_curator_adds_a_repository_and_a_folder_of_documents_and_an_agent_cites_each(
        page, live_server, cora, ops, root, tmp_path, settings):
    settings.LECTERN_GIT_DIR = tmp_path / "mirrors"
    settings.LECTERN_OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    repo = Repository(tmp_path / "repos")
    commit = repo.commit({"docs/restart.md": "# Restart\n\n## Ingest\n\nRestart the quokka ingest worker.\n",
                          "cmd/main.go": "package main\n"})
    team = root / "team"
    team.mkdir()
    (team / "ops.pdf").write_bytes(pdf_bytes([["Ops guide"], ["Rotate the narwhal signing keys."]]))
    (team / "deploy.docx").write_bytes(docx_bytes([("h1", "Deploying"), ("p", "Tag the axolotl release.")]))
    (team / "review.pptx").write_bytes(pptx_bytes([("Review", ["Wombats grew"]), ("Plans", ["Hire two"])]))
    (team / "scan.pdf").write_bytes(pdf_bytes([[]]))

    with git_http_server(tmp_path / "repos", TOKEN) as (base, _):
        browser_sign_in(page, live_server.url, "cora", PASSWORD, "/catalogs/ops/")
        page.click("a.button:has-text('Git repository')")
        page.fill("#id_slug", "handbook-repo")
        page.fill("#id_name", "Handbook repository")
        page.fill("#id_remote", f"{base}/handbook.git")
        page.fill("#id_ref", "main")
        page.fill("#id_secret", TOKEN)
        page.fill("#id_include", "docs/**")
        shot(page, "01-new-git")
        page.click("#source-form button[type=submit]")
        page.wait_for_url(f"{live_server.url}/catalogs/ops/sources/handbook-repo/")
        expect(page.locator(".source-side")).to_contain_text(f"commit {commit[:12]}")
        expect(page.locator("#documents tbody")).to_contain_text("docs/restart.md")
        assert TOKEN not in page.content()
        shot(page, "02-git-source")

    page.goto(f"{live_server.url}/catalogs/ops/sources/new?kind=glob")
    page.fill("#id_slug", "team-files")
    page.fill("#id_name", "Team files")
    page.fill("#id_location", "team/*")
    expect(page.locator("#glob-preview")).to_contain_text("team/ops.pdf")
    page.click("#source-form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/catalogs/ops/sources/team-files/")
    expect(page.locator("#documents tbody")).to_contain_text("team/review.pptx")
    expect(page.locator(".source-side pre.error-text")).to_contain_text(
        "skipped team/scan.pdf: no text in its 1 page(s): a scanned PDF without a text layer?")
    shot(page, "03-document-source")
    page.click("a:has-text('which, and why')")
    expect(page.locator("ul.skipped-files")).to_contain_text("team/scan.pdf: no text in its 1 page(s)")
    shot(page, "03b-run-skipped-files")

    _, token = agent_with_token(name="reader", catalogs=[ops.catalog])
    git_hit = search(token, "quokka ingest worker")
    assert (git_hit["source"], git_hit["citation"]) == ("handbook-repo",
                                                        f"docs/restart.md:1-5 @ {commit[:12]} — Restart")
    assert git_hit["locator"]["commit"] == commit
    assert search(token, "narwhal signing")["citation"] == "team/ops.pdf p. 2"
    assert search(token, "axolotl release")["citation"] == "team/deploy.docx — Deploying"
    assert search(token, "wombats grew")["citation"] == "team/review.pptx slide 1 — Review"


def test_a_curator_adds_a_web_site_and_an_agents_enrichment_cites_its_pages(page, live_server, cora, ops, settings):
    settings.LECTERN_OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    site = Site({"/": html_page("Handbook", "<p>Start with the guides.</p>", ["/guides/cache", "/guides/pager"]),
                 "/guides/cache": html_page("Caching", "<h2>Expiry</h2><p>Wombat entries expire hourly.</p>"),
                 "/guides/pager": html_page("Paging", "<h2>Handover</h2><p>Hand the pager over on Mondays.</p>")})
    with web_server(site):
        browser_sign_in(page, live_server.url, "cora", PASSWORD, "/catalogs/ops/")
        page.click("a.button:has-text('Web site')")
        page.fill("#id_slug", "site-docs")
        page.fill("#id_name", "Docs site")
        page.fill("#id_url", site.url("/"))
        shot(page, "04-new-web")
        page.click("#source-form button[type=submit]")
        page.wait_for_url(f"{live_server.url}/catalogs/ops/sources/site-docs/")
        expect(page.locator("#documents tbody")).to_contain_text("/guides/cache")
        shot(page, "05-web-source")

    _, token = agent_with_token(name="reader", catalogs=[ops.catalog])
    hit = search(token, "wombat entries expire")
    assert hit["citation"] == f"{site.url('/guides/cache')} — Caching"  # one chunk: where it starts
    assert hit["locator"] == {"format": "html", "url": site.url("/guides/cache"), "heading": "Caching"}
    enriched = APIClient().post("/api/v1/enrich/conversation", {
        "user_id": "steve", "messages": [{"role": "user", "content": "When do wombat cache entries expire?"}]},
        format="json", HTTP_AUTHORIZATION=f"Bearer {token}").json()
    passages = [item for item in enriched["context"] if item["kind"] == "passage"]
    assert any(item["citation"] == f"{site.url('/guides/cache')} — Caching" for item in passages)
