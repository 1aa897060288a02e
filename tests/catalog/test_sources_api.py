"""The curators' sources API: a git source created over REST with a token it never
shows again, read back with its last sync and the files it skipped, and a web source
with its last crawl and the pages it skipped; each changed (a run is
queued when what it reads changed, the token kept unless replaced); bad input is a JSON
400 naming the field, with nothing written; a reader is refused."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from catalog.indexing.runs import index_run_execute
from catalog.models import IndexRun, ReferenceSource
from tests.factories import agent_with_token
from tests.gitserver import Repository, git_http_server
from tests.websites import Reply, Site, html_page, web_server

TOKEN = "glpat-wombat-0123456789abcdef"  # noqa: S105 - a test's token


@pytest.fixture
def served(tmp_path, settings):
    settings.LECTERN_GIT_DIR = tmp_path / "mirrors"
    settings.LECTERN_OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    repo = Repository(tmp_path / "repos")
    repo.commit({"docs/a.md": "# A\n\nAxolotls.\n", "docs/scan.pdf": b"%PDF-1.4 broken"})
    with git_http_server(tmp_path / "repos", TOKEN) as (base, _):
        yield repo, f"{base}/handbook.git"


@pytest.fixture
def curator(make_catalog):
    catalog = make_catalog("eng")
    _, token = agent_with_token(name="curator-bot", catalogs=[catalog], is_curator=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def test_a_git_source_is_created_read_and_changed_over_rest(curator, served):
    repo, url = served
    created = curator.post("/api/v1/catalogs/eng/sources", {
        "slug": "handbook", "name": "Handbook", "kind": "git", "location": url, "ref": "main",
        "include": "docs/**", "secret": TOKEN, "tags": ["runbooks"]}, format="json")

    assert created.status_code == 202, created.content
    body = created.json()
    assert TOKEN not in created.content.decode() and body["source"]["secret_stored"] is True
    index_run_execute(run_id=body["run"]["id"])
    read = curator.get("/api/v1/catalogs/eng/sources/handbook").json()
    assert read["sync"]["commit"] == repo.head() and read["sync"]["indexed"] == 1
    assert read["skipped"][0]["path"] == "docs/scan.pdf" and "not a readable PDF" in read["skipped"][0]["reason"]
    assert read["tags"] == ["runbooks"] and read["error"] is None

    described = curator.patch("/api/v1/catalogs/eng/sources/handbook", {"description": "Runbooks."}, format="json")
    moved = curator.patch("/api/v1/catalogs/eng/sources/handbook", {"exclude": "docs/*.pdf"}, format="json")

    assert described.status_code == 200 and described.json()["run"] is None  # nothing it reads changed
    assert moved.status_code == 200 and moved.json()["run"]["status"] == "queued"
    source = ReferenceSource.objects.get(slug="handbook")
    assert source.secret_sealed and source.exclude == "docs/*.pdf" and source.description == "Runbooks."
    listed = curator.get("/api/v1/catalogs/eng/sources").json()
    assert [entry["slug"] for entry in listed] == ["handbook"]


@pytest.mark.parametrize(("body", "field", "why"), [
    ({"kind": "git", "location": "http://169.254.169.254/r.git"}, "location", "cloud metadata"),
    ({"kind": "git", "location": ""}, "location", "needs its repository"),
    ({"kind": "glob", "location": "/etc/*.conf"}, "location", "outside the configured source roots"),
    ({"kind": "inline", "content": " "}, "content", "needs its text"),
    ({"kind": "web", "location": "http://169.254.169.254/"}, "location", "cloud metadata"),
    ({"kind": "web", "location": "http://127.0.0.1/"}, "location", "a loopback address"),
    ({"kind": "web", "location": "https://example.com/", "max_pages": 0}, "max_pages", "greater than or equal"),
    ({"kind": "rss", "location": "https://example.com/"}, "kind", "not a valid choice"),
])
def test_bad_input_is_a_json_400_naming_the_field_and_writes_nothing(curator, body, field, why):
    response = curator.post("/api/v1/catalogs/eng/sources", {"slug": "bad", "name": "Bad", **body}, format="json")

    assert response.status_code == 400, response.content
    assert why in str(response.json()["error"]["details"]["fields"][field])
    assert not ReferenceSource.objects.filter(slug="bad").exists() and not IndexRun.objects.exists()


def test_a_web_source_is_created_read_with_its_crawl_and_changed_over_rest(curator, settings):
    settings.LECTERN_OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    pages: dict[str, Reply | str | None] = {
        "/": html_page("Docs", "<p>Axolotls.</p>", ["/a.html", "/b.html"]),
        "/a.html": html_page("A", "<h2>Care</h2><p>Feed the axolotl.</p>"), "/b.html": Reply(status=500)}
    with web_server(Site(pages)) as site:
        created = curator.post("/api/v1/catalogs/eng/sources", {
            "slug": "docs", "name": "Docs", "kind": "web", "location": site.url("/"), "max_depth": 1}, format="json")
        assert created.status_code == 202, created.content
        assert (created.json()["source"]["max_depth"], created.json()["source"]["max_pages"]) == (1, 200)
        index_run_execute(run_id=created.json()["run"]["id"])
        read = curator.get("/api/v1/catalogs/eng/sources/docs").json()
        moved = curator.patch("/api/v1/catalogs/eng/sources/docs", {"max_pages": 2}, format="json")

    sync = read["sync"]
    assert (sync["requested"], sync["fetched"], sync["indexed"], sync["not_modified"], sync["skipped"]) == (
        3, 3, 2, 0, 1)
    assert sync["start"] == site.url("/") and sync["limit_reached"] is False and sync["crawled_at"]
    assert read["skipped"] == [{"path": "/b.html", "reason": "answered 500"}]
    assert moved.status_code == 200 and moved.json()["run"]["status"] == "queued"
    assert ReferenceSource.objects.get(slug="docs").max_pages == 2


def test_a_reader_may_neither_list_nor_create_sources(make_catalog):
    catalog = make_catalog("eng")
    _, token = agent_with_token(name="reader", catalogs=[catalog])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")

    assert client.get("/api/v1/catalogs/eng/sources").status_code == 403
    refused = client.post("/api/v1/catalogs/eng/sources", {"slug": "x", "name": "X", "kind": "inline",
                                                           "content": "x"}, format="json")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
