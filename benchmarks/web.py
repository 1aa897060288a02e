"""How fast a web source's crawl goes: a generated site of N pages served from 127.0.0.1
by a server in this process (tests.websites' server), crawled once from nothing (every page fetched, its links
parsed and its main text extracted) and once more with the first crawl's validators
(every page answers 304 and is kept unread, as a re-crawl of an unchanged site does).

The crawl is catalog.sources.website's own (web_collect), on a source that is never
saved: nothing is written to the database, and chunking and embedding, which a run does
after the crawl, are not timed (bench_reindex times those). Each page is a few
kilobytes of text under headings, inside a header, navigation and footer as sites make
them; page i links to the site's first page and to pages 8i+1 to 8i+8, so the site is a
tree of depth log8(N) that a crawl of that depth reaches whole.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.test import override_settings

from benchmarks.common import BenchmarkError
from catalog.indexing.diffing import StoredDocument
from catalog.models import MAX_CRAWL_DEPTH, ReferenceSource
from catalog.sources.website import web_collect
from tests.websites import Reply, Seen, Site, web_server

FANOUT = 8
PARAGRAPH = ("A reference catalog keeps what agents may read, each chunk cited by where it came from; this "
             "paragraph stands for the prose of a documentation page, long enough to be read as one. ")


def page_html(i: int, pages: int) -> bytes:
    children = [c for c in range(FANOUT * i + 1, FANOUT * i + FANOUT + 1) if c < pages]
    links = "".join(f'<li><a href="/p/{c}.html">Page {c}</a></li>' for c in [0, *children])
    sections = "".join(f"<h2>Section {s}</h2><p>{PARAGRAPH * 4}</p>" for s in range(1, 5))
    return (f"<!doctype html><html><head><title>Page {i}</title><script>var t = {i};</script></head><body>"
            f"<header>Bench site</header><nav><ul>{links}</ul></nav><main><h1>Page {i}</h1>{sections}</main>"
            f"<footer>Footer of page {i}</footer></body></html>").encode()


@contextmanager
def served_site(pages: int) -> Iterator[tuple[str, Site]]:
    """A generated site of `pages` pages on 127.0.0.1 (tests.websites' server, with its
    validators and 304s); its start URL and the site, whose `requests` are those seen."""
    site = Site({f"/p/{i}.html": Reply(page_html(i, pages)) for i in range(pages)})
    with web_server(site):
        yield site.url("/p/0.html"), site


@dataclass
class CrawlTiming:
    pages: int  # documents the crawl found
    requests: int  # requests the server saw (robots.txt among them)
    read: int  # pages read (not kept unread on a 304)
    seconds: float

    @property
    def pages_per_second(self) -> float:
        return self.pages / self.seconds if self.seconds else 0.0


def depth_for(pages: int) -> int:
    depth, reached = 0, 1
    while reached < pages:
        depth += 1
        reached += FANOUT ** depth
    return depth


def crawl_timings(pages: int = 300) -> dict[str, Any]:
    """A first crawl and a re-crawl of a generated site of `pages` pages (see the module docstring)."""
    if pages < 1 or depth_for(pages) > MAX_CRAWL_DEPTH:
        raise BenchmarkError(f"--pages must be between 1 and {sum(FANOUT ** d for d in range(MAX_CRAWL_DEPTH + 1))}")
    with served_site(pages) as (start, site), \
            override_settings(LECTERN_OUTBOUND_ALLOWED_NETWORKS=["127.0.0.1/32"]):
        requests = site.requests
        source = ReferenceSource(slug="bench-web", kind=ReferenceSource.Kind.WEB, location=start,
                                 max_depth=depth_for(pages), max_pages=pages)
        first = _timed(source, {}, requests)
        stored = {d.path: StoredDocument(i, d.path, d.sha256, d.size, None, "", d.locator)
                  for i, d in enumerate(first[1].documents)}
        again = _timed(source, stored, requests)
    if first[0].pages != pages or again[0].read:
        raise BenchmarkError(f"the crawls did not go as generated: {first[0]} then {again[0]}")
    return {"pages": pages, "first": first[0], "again": again[0]}


def _timed(source: ReferenceSource, stored: dict[str, StoredDocument], requests: list[Seen]) -> tuple[CrawlTiming,
                                                                                                     Any]:
    requests.clear()
    started = time.perf_counter()
    collected = web_collect(source, stored)
    seconds = time.perf_counter() - started
    read = sum(1 for d in collected.documents if d.text is not None)
    return CrawlTiming(len(collected.documents), len(requests), read, seconds), collected
