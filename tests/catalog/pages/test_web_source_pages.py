"""A curator adds a web site in the dashboard: served on 127.0.0.1 by the test, crawled
by the run the form queued, its last crawl and the pages it could not read on the source
page; an edit of its limits queues a crawl; a site Lectern may not reach is refused in
place with nothing written."""

from __future__ import annotations

import pytest
from django.urls import reverse

from catalog.indexing.runs import index_run_execute
from catalog.models import Chunk, IndexRun, ReferenceSource
from tests.websites import Reply, Site, html_page, web_server

pytestmark = pytest.mark.django_db


@pytest.fixture
def site(settings):
    settings.LECTERN_OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    pages: dict[str, Reply | str | None] = {
             "/": html_page("Handbook", "<p>Page the quokka on-call first.</p>", ["/broken.html", "/faq.html"]),
             "/faq.html": html_page("FAQ", "<h2>Refunds</h2><p>Refunds take five days.</p>"),
             "/broken.html": Reply(status=500, body="boom")}
    with web_server(Site(pages)) as served:
        yield served


def test_a_web_source_is_created_crawled_and_shown_with_its_crawl_and_its_errors(curator, ops, site):
    form = {"slug": "site-docs", "name": "Handbook", "mode": "selectable", "url": site.url("/"), "max_depth": "2",
            "max_pages": "50", "exclude": "private/**"}

    created = curator.post(reverse("catalogs-source-create", args=["ops"]) + "?kind=web", form)
    index_run_execute(run_id=IndexRun.objects.get(source__slug="site-docs").pk)
    page = curator.get(reverse("catalogs-source", args=["ops", "site-docs"])).content.decode()

    assert created.status_code == 302
    source = ReferenceSource.objects.get(slug="site-docs")
    assert (source.kind, source.location, source.max_depth, source.max_pages, source.exclude) == (
        "web", site.url("/"), 2, 50, "private/**")
    assert Chunk.objects.filter(source=source, content__contains="quokka").exists()
    assert "3 pages fetched · 2 read · 0 unchanged (304) · 2 indexed · 1 skipped" in page
    assert "skipped /broken.html: answered 500" in page


def test_an_edit_of_the_limits_queues_a_crawl_and_the_form_shows_them(curator, ops, site):
    base = {"name": "Handbook", "mode": "selectable", "url": site.url("/"), "max_depth": "3", "max_pages": "200"}
    curator.post(reverse("catalogs-source-create", args=["ops"]) + "?kind=web", {**base, "slug": "site-docs"})
    edit = reverse("catalogs-source-edit", args=["ops", "site-docs"])
    IndexRun.objects.all().delete()

    shown = curator.get(edit).content.decode()
    saved = curator.post(edit, {**base, "max_depth": "1"})

    assert f'value="{site.url("/")}"' in shown and 'name="max_pages"' in shown
    assert saved.status_code == 302 and ReferenceSource.objects.get(slug="site-docs").max_depth == 1
    assert IndexRun.objects.filter(source__slug="site-docs").count() == 1


@pytest.mark.parametrize(("url", "why"), [
    ("http://169.254.169.254/latest/", "the cloud metadata address"),
    ("http://10.0.0.7/", "a private address"),
    ("ftp://example.com/", "not an http or https URL"),
])
def test_a_site_lectern_may_not_reach_is_refused_in_place(curator, ops, url, why):
    response = curator.post(reverse("catalogs-source-create", args=["ops"]) + "?kind=web",
                            {"slug": "bad", "name": "Bad", "mode": "selectable", "url": url, "max_depth": "3",
                             "max_pages": "200"}, headers={"HX-Request": "true"})

    assert response.status_code == 400 and why in response.content.decode()
    assert not ReferenceSource.objects.filter(slug="bad").exists()
