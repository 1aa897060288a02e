"""Web-site sources against a real site served on 127.0.0.1 by the test (tests.websites):
a crawl keeps each page's main text with its headings and cites its URL; a re-crawl asks
with the page's validators and re-reads only the page that changed; robots.txt, the depth
and page limits, the site's bounds and the outbound address rules hold; a page that fails
is listed with why while the rest indexes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.indexing.runs import sources_scan
from catalog.indexing.source_index import source_index
from catalog.models import Chunk, Document, ReferenceSource
from catalog.sources.documents import source_fingerprint
from catalog.sources.lifecycle import SourceSettings, WebSettings, source_create, source_update
from catalog.sources.locators import cite
from catalog.sources.webfetch import WebError, normalised, page_links, sitemap_urls
from tests.factories import agent_with_token
from tests.websites import Reply, Site, html_page, web_server

pytestmark = pytest.mark.django_db
INTRO = "Every machine that reports to Acme runs one agent; this page says how to put it in place on each system."
LINKS = ["/", "/guide/install.html", "/guide/upgrade.html", "/faq.html", "/about.html"]


def _pages() -> dict[str, Reply | str | None]:
    return {
        "/": html_page("Acme Docs", "<p>Welcome to the quokka handbook.</p>", LINKS),
        "/guide/install.html": html_page(
            "Install", f"<p>{INTRO}</p><h2>Linux</h2><p>Install the wombat agent with apt, then start it.</p>"
                       f"<h2>macOS</h2><p>{INTRO}</p>", LINKS),
        "/guide/upgrade.html": html_page("Upgrade", "<p>Upgrades keep the narwhal config.</p>", LINKS),
        "/faq.html": html_page("FAQ", "<h2>Refunds</h2><p>Refunds take five days.</p>", LINKS),
        "/about.html": html_page("About", "<p>Acme builds axolotl tooling.</p>", LINKS),
        "/robots.txt": Reply("User-agent: *\nDisallow: /private/\n", content_type="text/plain"),
    }


@pytest.fixture
def site(settings):
    settings.LECTERN_OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    with web_server(Site(_pages())) as served:
        yield served


@pytest.fixture
def other_site(settings):
    """Another site (another port of 127.0.0.1): a crawl must never reach it."""
    with web_server(Site({"/": html_page("Elsewhere", "<p>Off-site platypus.</p>")})) as served:
        yield served


def _web(make_catalog, url: str, **limits) -> ReferenceSource:
    # small chunks: each of a page's sections is a chunk of its own, with its heading path
    catalog = make_catalog("eng", chunk_size=100, chunk_overlap=0)
    return source_create(catalog=catalog, slug="docs", kind="web", settings=SourceSettings(name="Docs"),
                         web=WebSettings(url, **limits), by=None)


def _paths(source: ReferenceSource) -> list[str]:
    return sorted(Document.objects.filter(source=source).values_list("path", flat=True))


def test_a_crawl_indexes_each_pages_main_text_cited_by_url_and_heading(site, make_catalog):
    source = _web(make_catalog, site.url("/"))

    report = source_index(source=source)

    source.refresh_from_db()
    assert _paths(source) == ["/", "/about.html", "/faq.html", "/guide/install.html", "/guide/upgrade.html"]
    assert report.skipped == []
    text = "\n".join(Document.objects.filter(source=source).values_list("text", flat=True))
    for boilerplate in ("site header", "footer boilerplate", "boilerplate-script"):
        assert boilerplate not in text
    chunk = Chunk.objects.get(source=source, content__contains="wombat")
    assert chunk.locator == {"format": "html", "url": site.url("/guide/install.html"), "heading": "Install › Linux"}
    assert cite(chunk.locator) == f"{site.url('/guide/install.html')} — Install › Linux"
    _, token = agent_with_token(name="reader", catalogs=[source.catalog])
    hit = APIClient().post("/api/v1/search", {"catalog": "eng", "query": "wombat agent", "mode": "bm25"},
                           format="json", HTTP_AUTHORIZATION=f"Bearer {token}").json()["results"][0]
    assert hit["locator"] == {"format": "html", "url": site.url("/guide/install.html"), "heading": "Install › Linux"}
    assert hit["citation"] == f"{site.url('/guide/install.html')} — Install › Linux"
    assert (source.sync["requested"], source.sync["read"], source.sync["indexed"], source.sync["not_modified"]) == (
        5, 5, 5, 0)
    assert Document.objects.get(source=source, path="/faq.html").title == "FAQ"


def test_a_changed_page_is_the_only_one_read_and_reindexed_again(site, make_catalog):
    source = _web(make_catalog, site.url("/"))
    source_index(source=source)
    source.refresh_from_db()
    first = source.fingerprint
    site.requests.clear()

    site.set({"/faq.html": html_page("FAQ", "<h2>Refunds</h2><p>Refunds take ten days.</p>", LINKS)})
    report = source_index(source=source)

    source.refresh_from_db()
    assert (report.changed, report.added, report.removed, report.unchanged) == (1, 0, 0, 4)
    assert (source.sync["read"], source.sync["not_modified"], source.sync["fetched"]) == (1, 4, 5)
    pages = [request for request in site.requests if request.path != "/robots.txt"]
    assert len(pages) == 5 and all(request.conditional for request in pages)
    assert Chunk.objects.filter(source=source, content__contains="ten days").exists()
    assert not Chunk.objects.filter(source=source, content__contains="five days").exists()
    assert source.fingerprint != first


def test_a_page_whose_main_text_stayed_keeps_its_chunks_and_answers_304_next_time(site, make_catalog):
    source = _web(make_catalog, site.url("/"))
    source_index(source=source)

    site.set({"/about.html": html_page("About", "<p>Acme builds axolotl tooling.</p>", [*LINKS, "/new.html"]),
              "/new.html": html_page("New", "<p>A page the navigation now links to.</p>")})
    moved = source_index(source=source)
    again = source_index(source=source)

    source.refresh_from_db()
    assert (moved.changed, moved.added, moved.unchanged) == (0, 1, 5)  # about.html read, its text the same
    assert "/new.html" in Document.objects.get(source=source, path="/about.html").locator["links"]
    assert (again.changed, again.added, source.sync["read"], source.sync["not_modified"]) == (0, 0, 0, 6)


def test_an_unchanged_site_keeps_its_fingerprint_and_the_scan_waits_for_the_recrawl_interval(site, make_catalog,
                                                                                            settings):
    settings.LECTERN_WEB_RECRAWL_MINUTES = 60
    source = _web(make_catalog, site.url("/"))
    source_index(source=source)
    source.refresh_from_db()
    assert source_fingerprint(source=source) == source.fingerprint
    assert sources_scan() == []

    ReferenceSource.objects.filter(pk=source.pk).update(sync={
        **source.sync, "crawled_at": (timezone.now() - timedelta(minutes=61)).isoformat()})
    runs = sources_scan()
    report = source_index(source=ReferenceSource.objects.get(pk=source.pk))

    assert [run.source_id for run in runs] == [source.pk]
    assert report.unchanged == 5 and report.changed == 0
    assert ReferenceSource.objects.get(pk=source.pk).fingerprint == source.fingerprint


def test_robots_txt_is_honoured(site, make_catalog):
    site.set({"/": html_page("Acme Docs", "<p>Home.</p>", [*LINKS, "/private/keys.html"]),
              "/private/keys.html": html_page("Keys", "<p>Secret keys.</p>"),
              "/robots.txt": Reply("User-agent: *\nDisallow: /private/\nDisallow: /about.html\n",
                                   content_type="text/plain")})
    source = _web(make_catalog, site.url("/"))

    source_index(source=source)

    source.refresh_from_db()
    assert "/private/keys.html" not in _paths(source) and "/about.html" not in _paths(source)
    assert site.seen("/private/keys.html") == [] and site.seen("/about.html") == []
    assert source.sync["disallowed"] == 2


def test_the_depth_and_page_limits_bound_the_crawl(site, make_catalog):
    site.set({"/": html_page("Acme Docs", "<p>Home.</p>", ["/a.html"]),
              "/a.html": html_page("A", "<p>A.</p>", ["/b.html"]),
              "/b.html": html_page("B", "<p>B.</p>", ["/c.html"]),
              "/c.html": html_page("C", "<p>C.</p>")})
    source = _web(make_catalog, site.url("/"), max_depth=1)

    source_index(source=source)
    assert _paths(source) == ["/", "/a.html"] and site.seen("/b.html") == []

    source_update(source=source, settings=SourceSettings(name="Docs"),
                  web=WebSettings(site.url("/"), max_depth=5, max_pages=3), by=None)
    source.refresh_from_db()
    source_index(source=source)

    source.refresh_from_db()
    assert _paths(source) == ["/", "/a.html", "/b.html"] and site.seen("/c.html") == []
    assert source.sync["requested"] == 3 and source.sync["limit_reached"] is True


def test_links_and_redirects_off_the_site_are_not_followed(site, other_site, make_catalog):
    site.set({"/": html_page("Acme Docs", "<p>Home.</p>", ["/faq.html", other_site.url("/"), "/moved.html",
                                                           "/metadata.html", "/renamed.html"]),
              "/moved.html": Reply(status=302, headers={"Location": other_site.url("/")}),
              "/metadata.html": Reply(status=301, headers={"Location": "http://169.254.169.254/latest/meta-data/"}),
              "/renamed.html": Reply(status=301, headers={"Location": "/faq.html#refunds"})})
    source = _web(make_catalog, site.url("/"))

    report = source_index(source=source)

    assert other_site.requests == []
    skipped = dict(report.skipped)
    assert skipped["/moved.html"] == f"redirected to {other_site.url('/')}: another site, which a crawl does not follow"
    assert skipped["/metadata.html"].startswith("redirected to http://169.254.169.254/latest/meta-data/: "
                                                "169.254.169.254 is the cloud metadata address")
    paths = _paths(source)  # a redirect on the site lands on a page taken once
    assert "/faq.html" in paths and not {"/moved.html", "/metadata.html", "/renamed.html"} & set(paths)


def test_loopback_is_refused_unless_a_setting_allows_it(site, make_catalog, settings):
    source = _web(make_catalog, site.url("/"))
    settings.LECTERN_OUTBOUND_ALLOWED_NETWORKS = []
    site.requests.clear()

    with pytest.raises(ValidationError) as refused:
        source_create(catalog=source.catalog, slug="again", kind="web", settings=SourceSettings(name="Again"),
                      web=WebSettings(site.url("/")), by=None)
    with pytest.raises(WebError) as failed:
        source_index(source=source)

    assert "127.0.0.1 is a loopback address" in str(refused.value.message_dict["location"])
    assert "127.0.0.1 is a loopback address" in str(failed.value)
    assert site.requests == []
    assert ReferenceSource.objects.get(pk=source.pk).status == ReferenceSource.Status.ERROR


def test_a_failing_page_is_listed_with_why_and_the_rest_indexes(site, make_catalog, settings):
    settings.LECTERN_WEB_MAX_PAGE_BYTES = 4096
    site.set({"/about.html": Reply(status=500, body="boom"),
              "/faq.html": html_page("FAQ", "<p>" + "Long answer. " * 1000 + "</p>"),
              "/guide/upgrade.html": Reply(b"\x89PNG", content_type="image/png")})
    source = _web(make_catalog, site.url("/"))

    report = source_index(source=source)

    skipped = dict(report.skipped)
    assert skipped["/about.html"] == "answered 500"
    assert skipped["/faq.html"].endswith("more than LECTERN_WEB_MAX_PAGE_BYTES (4,096)")
    assert skipped["/guide/upgrade.html"] == "a image/png reply, not a page Lectern reads"
    assert _paths(source) == ["/", "/guide/install.html"]


def test_a_page_that_fails_for_a_while_keeps_its_copy_and_one_gone_leaves(site, make_catalog):
    source = _web(make_catalog, site.url("/"))
    source_index(source=source)

    site.set({"/about.html": Reply(status=503, body="down"), "/faq.html": None})
    report = source_index(source=source)

    assert dict(report.skipped)["/about.html"] == "answered 503; the copy indexed before is kept"
    assert "/about.html" in _paths(source) and "/faq.html" not in _paths(source)
    assert report.removed == 1


def test_an_unreachable_start_page_fails_the_run_and_keeps_the_index(site, make_catalog):
    source = _web(make_catalog, site.url("/"))
    source_index(source=source)

    site.set({"/": Reply(status=404, body="gone")})
    with pytest.raises(WebError, match="the start page .* could not be read: answered 404"):
        source_index(source=source)

    assert len(_paths(source)) == 5


def test_a_sitemap_lists_the_pages_and_an_index_of_sitemaps_is_followed(site, make_catalog):
    urlset = ('<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
              f'<url><loc>{site.url("/faq.html")}</loc></url><url><loc>{site.url("/about.html")}</loc></url>'
              '<url><loc>http://169.254.169.254/</loc></url></urlset>')
    index = ('<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
             f'<sitemap><loc>{site.url("/pages.xml")}</loc></sitemap></sitemapindex>')
    site.set({"/pages.xml": Reply(urlset, content_type="application/xml"),
              "/sitemap.xml": Reply(index, content_type="application/xml")})
    source = _web(make_catalog, site.url("/sitemap.xml"))

    source_index(source=source)

    assert _paths(source) == ["/about.html", "/faq.html"]  # their links are not followed
    assert site.seen("/guide/install.html") == []


def test_include_and_exclude_globs_select_url_paths(site, make_catalog):
    source = source_create(catalog=make_catalog("eng"), slug="docs", kind="web", settings=SourceSettings(name="D"),
                           web=WebSettings(site.url("/"), include="guide/**", exclude="*upgrade*"), by=None)

    source_index(source=source)

    assert _paths(source) == ["/guide/install.html"]
    assert site.seen("/faq.html") == [] and site.seen("/guide/upgrade.html") == []


def test_urls_are_normalised_and_links_stay_on_the_site():
    assert normalised("HTTP://Example.COM:80") == "http://example.com/"
    assert normalised("../b.html#top", "https://example.com/docs/a/") == "https://example.com/docs/b.html"
    assert normalised("mailto:someone@example.com") is None and normalised("javascript:alert(1)") is None
    page = (b'<html><head><base href="/docs/"></head><body><a href="a.html">a</a><a href="https://other.example/">'
            b'x</a><a href="logo.png">l</a><a rel="nofollow" href="n.html">n</a><a href="a.html#x">again</a></body>')
    assert page_links(page, "https://example.com/", ("https", "example.com", 443)) == [
        "https://example.com/docs/a.html"]


def test_a_sitemap_with_entities_is_read_without_expanding_them():
    body = (b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
            b'<urlset><url><loc>https://example.com/&e;</loc></url></urlset>')
    kind, urls = sitemap_urls(body)
    assert kind == "urlset" and all("root:" not in url for url in urls)


def test_a_same_site_path_spelled_like_another_host_never_leaves_the_site(site, other_site, make_catalog):
    """A page of the site linking to `https://site//other.example/guide` links to a page of
    the site; joined back to a URL (as a re-crawl does with the links a 304 kept), the path
    must not read as another host."""
    sneaky = site.url("/") + "/" + other_site.base.split("//", 1)[1] + "/guide"
    site.set({"/": html_page("Acme Docs", "<p>Home.</p>", [sneaky])})
    source = _web(make_catalog, site.url("/"))

    source_index(source=source)
    source_index(source=source)  # the second crawl gets a 304 for / and follows the links it kept

    assert other_site.requests == []
