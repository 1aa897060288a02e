"""A web-site source's documents: the pages of one site (catalog.sources.webfetch) that a
crawl from its start URL reaches, or that its sitemap lists (a start URL ending .xml;
a sitemap index is followed one level), each page's main text (extraction.html_text:
navigation, headers, footers and scripts dropped, headings kept).

A crawl goes breadth first over same-site links, to the source's depth (the start page
is depth 0) and page limit, asking robots.txt first. The include and exclude globs
match a page's URL path (docs/**, *.html): a page they leave out is not fetched; the
start page is always fetched for its links and indexed only if they take it.

A re-crawl asks each indexed page only whether it changed (If-None-Match and
If-Modified-Since, from the validators its document's locator kept): a 304 keeps the
document unread, as git keeps an unchanged blob, so a site where one page changed
re-reads and re-indexes that one page. The links a page had are kept in its locator
too, so the crawl goes on past a page that answered 304. A page that answered 404 or
410 leaves the index; one that failed for a while (a 5xx, a 429, no answer) keeps its
indexed copy and is listed as skipped with why; one that is too big, not a page
Lectern reads, or redirected off the site is listed as skipped and leaves the index.

The fingerprint is a hash of the (path, content hash) pairs indexed, so a crawl that
found nothing new leaves approvals standing. Whether a site changed cannot be known
without asking it, so the scheduled scan asks for a crawl once the last one is
LECTERN_WEB_RECRAWL_MINUTES old (web_fingerprint_now).
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter, deque
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.utils import timezone

from catalog.indexing.diffing import StoredDocument
from catalog.models import ReferenceSource
from catalog.sources.extraction import READERS, Extracted, ExtractionError
from catalog.sources.inputs import Collected, DocumentInput, document_input
from catalog.sources.repository import globs, selected
from catalog.sources.webfetch import (
    Fetcher,
    Page,
    PageFailed,
    WebError,
    normalised,
    page_links,
    page_path,
    robots_rules,
    site_of,
    sitemap_urls,
)

# What a page's Content-Type is read as (extraction.READERS); other types are skipped.
CONTENT_TYPES = {
    "text/html": "html", "application/xhtml+xml": "html", "text/plain": "text", "text/markdown": "markdown",
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
}
GONE = (404, 410)
TRANSIENT = (408, 429)  # and every 5xx: the indexed copy is kept
LINKS_KEPT = 1000  # of one page's links, kept in its locator for the crawls that get a 304


def filters_key(source: ReferenceSource) -> str:
    """What a crawl's pages depend on besides the site itself."""
    key = f"{source.location}\0{source.include}\0{source.exclude}\0{source.max_depth}\0{source.max_pages}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def web_fingerprint_now(source: ReferenceSource) -> str:
    """What the scheduled scan compares with the stored fingerprint: the stored one while
    the last crawl, with the same settings, is younger than LECTERN_WEB_RECRAWL_MINUTES;
    else one that differs from it, so a crawl is requested."""
    crawled = source.sync.get("crawled_at")
    due = timezone.now() - timedelta(minutes=settings.LECTERN_WEB_RECRAWL_MINUTES)
    if crawled and source.sync.get("filters") == filters_key(source) and datetime.fromisoformat(crawled) > due:
        return source.fingerprint
    return f"recrawl:{crawled or 'never'}"


def _conditional(known: StoredDocument | None) -> dict[str, str]:
    if known is None:
        return {}
    headers = {}
    if etag := known.locator.get("etag"):
        headers["If-None-Match"] = etag
    if modified := known.locator.get("last_modified"):
        headers["If-Modified-Since"] = modified
    return headers


class Crawl:
    """One crawl of a source's site: the pages it reached, in the order found."""

    def __init__(self, source: ReferenceSource, stored: dict[str, StoredDocument]) -> None:
        start = normalised(source.location)
        if start is None:
            raise WebError(f"{source.location!r} is not an http or https URL")
        self.source, self.stored, self.start = source, stored, start
        self.site = site_of(start)
        self.fetcher = Fetcher(self.site)
        self.include, self.exclude = globs(source.include), globs(source.exclude)
        self.documents: list[DocumentInput] = []
        self.skipped: list[tuple[str, str]] = []
        self.counts: Counter[str] = Counter()
        self.queue: deque[tuple[str, int]] = deque()
        self.seen: set[str] = set()

    def run(self) -> None:
        """Ask robots.txt, then take the pages of the sitemap or of the link walk, up to the limit."""
        self.robots = robots_rules(self.fetcher, self.start)
        if page_path(self.start).lower().endswith(".xml"):
            self._enqueue_sitemap()
        else:
            self._enqueue(self.start, 0)
        while self.queue:
            if self.counts["requested"] >= self.source.max_pages:
                self.counts["left_over"] = len(self.queue)
                break
            url, depth = self.queue.popleft()
            self._visit(url, depth)

    def _enqueue(self, url: str, depth: int) -> None:
        if url in self.seen or site_of(url) != self.site:  # never another site, however the link was spelled
            return
        self.seen.add(url)
        if url != self.start and not selected(page_path(url).lstrip("/"), self.include, self.exclude):
            return
        self.queue.append((url, depth))

    def _enqueue_sitemap(self) -> None:
        """The pages a sitemap lists (a sitemap index: those of the sitemaps it lists), at the
        last depth, so their links are not followed."""
        kind, urls = self._sitemap(self.start)
        if kind == "sitemapindex":
            urls = [url for sitemap in urls if (found := normalised(sitemap)) is not None
                    and site_of(found) == self.site for url in self._sitemap(found)[1]]
        for url in urls:
            if (found := normalised(url)) is not None and site_of(found) == self.site:
                self._enqueue(found, self.source.max_depth)

    def _sitemap(self, url: str) -> tuple[str, list[str]]:
        try:
            page = self.fetcher.fetch(url)
            if page.status != 200:
                raise PageFailed(f"answered {page.status}")
            return sitemap_urls(page.body)
        except PageFailed as exc:
            raise WebError(f"the sitemap {url} could not be read: {exc}") from None

    def _visit(self, url: str, depth: int) -> None:
        path = page_path(url)
        if not self.robots.can_fetch(self.fetcher.user_agent, url):
            self.counts["disallowed"] += 1
            return
        known = self.stored.get(path)
        self.counts["requested"] += 1
        try:
            page = self.fetcher.fetch(url, _conditional(known))
        except PageFailed as exc:
            self._failed(url, known, str(exc), transient=not str(exc).startswith("redirected"))
            return
        self.counts["fetched"] += 1
        if page.url != url:  # redirected: the page is indexed under the URL it was found at
            if page.url in self.seen:
                return
            self.seen.add(page.url)
            path, known = page_path(page.url), self.stored.get(page_path(page.url))
        if page.status == 304 and known is not None:
            self.counts["not_modified"] += 1
            self._keep(path, known)
            self._follow(known.locator.get("links", []), depth)
        elif page.status == 200:
            self._read(page, path, depth)
        elif page.status in GONE and url != self.start:
            self.counts["gone"] += 1
        else:
            self._failed(url, known, f"answered {page.status}",
                         transient=page.status in TRANSIENT or page.status >= 500)

    def _keep(self, path: str, known: StoredDocument) -> None:
        self.documents.append(DocumentInput(path, "", None, known.size, None, known.sha256, locator=known.locator))

    def _failed(self, url: str, known: StoredDocument | None, why: str, *, transient: bool) -> None:
        """A page not had: listed as skipped, its indexed copy kept while the failure may
        pass. The start page failing fails the crawl: with no way in, what the site holds
        is unknown, and what was indexed stays as it is."""
        if url == self.start:
            raise WebError(f"the start page {url} could not be read: {why}")
        if transient and known is not None:
            self._keep(page_path(url), known)
            why += "; the copy indexed before is kept"
        self.skipped.append((page_path(url), why))

    def _read(self, page: Page, path: str, depth: int) -> None:
        media = page.headers.get("content-type", "").partition(";")[0].strip().lower()
        kind = CONTENT_TYPES.get(media)
        if kind is None:
            self.skipped.append((path, f"a {media or 'untyped'} reply, not a page Lectern reads"))
            return
        links = [page_path(link) for link in page_links(page.body, page.url, self.site)][:LINKS_KEPT] \
            if kind == "html" else []
        self._follow(links, depth)
        if selected(path.lstrip("/"), self.include, self.exclude):
            try:
                text, title = READERS[kind](page.body)
            except ExtractionError as exc:
                self.skipped.append((path, str(exc)))
                return
            document = document_input(path, Extracted(text, title or page.url, kind), len(page.body))
            document.locator |= {"url": page.url, **_validators(page), "links": links}
            self.documents.append(document)

    def _follow(self, paths: list[str], depth: int) -> None:
        if depth >= self.source.max_depth:
            return
        origin = urlunsplit((*urlsplit(self.start)[:2], "", "", ""))
        for path in paths:
            # The site's origin and the path, joined as text: urljoin would read a path
            # of '//other.example/x' as another host.
            if (url := normalised(origin + path)) is not None:
                self._enqueue(url, depth + 1)


def _validators(page: Page) -> dict[str, str]:
    found = {"etag": page.headers.get("etag", ""), "last_modified": page.headers.get("last-modified", "")}
    return {name: value for name, value in found.items() if value}


def web_collect(source: ReferenceSource, stored: dict[str, StoredDocument]) -> Collected:
    """Crawl the source's site, reading only the pages that changed (see the module docstring)."""
    started = time.monotonic()
    crawl = Crawl(source, stored)
    crawl.run()
    digest = hashlib.sha256()
    for document in sorted(crawl.documents, key=lambda d: d.path):
        digest.update(f"{document.path}\0{document.sha256}\n".encode())
    counts = crawl.counts
    sync: dict[str, Any] = {
        "start": crawl.start, "filters": filters_key(source), "requested": counts["requested"],
        "fetched": counts["fetched"], "not_modified": counts["not_modified"],
        "read": sum(1 for d in crawl.documents if d.text is not None), "indexed": len(crawl.documents),
        "skipped": len(crawl.skipped), "disallowed": counts["disallowed"], "gone": counts["gone"],
        "limit_reached": counts["left_over"] > 0, "elapsed_seconds": round(time.monotonic() - started, 3),
        "crawled_at": timezone.now().isoformat(timespec="seconds")}
    return Collected(crawl.documents, crawl.skipped, digest.hexdigest(), sync=sync)
