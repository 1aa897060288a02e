"""Web-site sources' transport: pages fetched through catalog.outbound (every hop's address
checked and pinned, so a page or a redirect cannot lead Lectern into its own network),
redirects followed on the site only, robots.txt read, links and sitemaps parsed.

A site is the start URL's scheme, host and port: a link or a redirect elsewhere is not
followed (a redirect off the site fails that page, saying where it led). URLs are
normalised so that one page has one spelling: the fragment dropped, scheme and host
lower-cased, the default port left out, an empty path made `/`.
"""

from __future__ import annotations

import http.client
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit
from urllib.robotparser import RobotFileParser

from django.conf import settings

from catalog.outbound.addresses import NotAnAddress, host_address, refusal
from catalog.outbound.client import SCHEMES, OutboundRefused, TooLarge, allowed_networks, destination_check, get
from catalog.sources.errors import SourceError

REDIRECTS = (301, 302, 303, 307, 308)
# Links to these are assets, not pages: never fetched.
ASSET_SUFFIXES = (".css", ".js", ".mjs", ".png", ".jpg", ".jpeg", ".gif", ".webp", ".svg", ".ico", ".bmp", ".woff",
                  ".woff2", ".ttf", ".otf", ".eot", ".mp3", ".mp4", ".webm", ".ogg", ".wav", ".avi", ".mov",
                  ".zip", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar", ".exe", ".dmg", ".iso", ".apk", ".jar",
                  ".bin", ".rss", ".atom", ".json", ".xml")
Site = tuple[str, str, int]  # scheme, host, port


class WebError(SourceError):
    """A crawl that cannot go on (the start page or robots.txt unreachable): the run fails
    and the source keeps what it had indexed."""


class PageFailed(Exception):
    """One page could not be had; the message says why, and the crawl goes on."""


@dataclass(frozen=True)
class Page:
    url: str  # after any redirects
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


def normalised(url: str, base: str | None = None) -> str | None:
    """`url` (relative to `base`) in its one spelling, or None when it is no http(s) URL."""
    try:
        parts = urlsplit(urljoin(base, url.strip()) if base else url.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in SCHEMES or not parts.hostname:
        return None
    scheme, host = parts.scheme.lower(), parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port in (None, SCHEMES[scheme]) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


def site_of(url: str) -> Site:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or SCHEMES.get(parts.scheme, 0)


def page_path(url: str) -> str:
    """A page's document path: its URL's path and query, the same on every crawl."""
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}" if parts.query else parts.path


def url_problem(url: str) -> str | None:
    """Why `url` cannot start a web source, or None (a name that does not resolve now is
    no refusal: it is checked again before each request)."""
    if normalised(url) is None:
        return f"{url!r} is not an http or https URL with a host"
    if urlsplit(url).username or urlsplit(url).password:
        return "a start URL may not carry a user name or password"
    try:
        destination_check(url)
    except OutboundRefused as exc:
        return str(exc)
    except OSError:
        return None
    return None


def _literal_refusal(url: str) -> str | None:
    """Why a URL whose host is written as an address may not be reached, without resolving
    a name (a redirect off the site is refused anyway: this only says it better)."""
    try:
        address = host_address(urlsplit(url).hostname or "")
    except NotAnAddress as exc:
        return str(exc)
    return refusal(address, allowed=allowed_networks()) if address is not None else None


class Fetcher:
    """Fetches a site's pages within the LECTERN_WEB_* limits, following redirects on it."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.timeout = settings.LECTERN_WEB_TIMEOUT
        self.max_bytes = settings.LECTERN_WEB_MAX_PAGE_BYTES
        self.max_redirects = settings.LECTERN_WEB_MAX_REDIRECTS
        self.user_agent = settings.LECTERN_WEB_USER_AGENT

    def fetch(self, url: str, headers: dict[str, str] | None = None) -> Page:
        """The page at `url` after at most LECTERN_WEB_MAX_REDIRECTS redirects on the site,
        each hop's address checked again; PageFailed saying why when there is none."""
        sent = {"User-Agent": self.user_agent, "Accept": "text/html, text/plain;q=0.9, */*;q=0.5", **(headers or {})}
        for _ in range(self.max_redirects + 1):
            fetched = self._get(url, sent)
            location = fetched.headers.get("location")
            if fetched.status not in REDIRECTS or not location:
                return Page(url, fetched.status, fetched.headers, fetched.body)
            target = normalised(location, url)
            if target is None or site_of(target) != self.site:
                why = (_literal_refusal(target) if target else None) or "another site, which a crawl does not follow"
                raise PageFailed(f"redirected to {target or location}: {why}")
            url = target
        raise PageFailed(f"more than {self.max_redirects} redirects (LECTERN_WEB_MAX_REDIRECTS)")

    def _get(self, url: str, headers: dict[str, str]) -> Any:
        try:
            destination = destination_check(url)
            return get(destination, headers=headers, timeout=self.timeout, max_bytes=self.max_bytes)
        except OutboundRefused as exc:
            raise PageFailed(str(exc)) from None
        except TooLarge as exc:
            raise PageFailed(f"{exc}, more than LECTERN_WEB_MAX_PAGE_BYTES ({self.max_bytes:,})") from None
        except TimeoutError:
            raise PageFailed(f"no answer within {self.timeout} s (LECTERN_WEB_TIMEOUT)") from None
        except (OSError, http.client.HTTPException) as exc:
            raise PageFailed(f"no answer: {type(exc).__name__}: {exc}") from None


def robots_rules(fetcher: Fetcher, start: str) -> RobotFileParser:
    """The site's robots.txt as urllib reads it: none (4xx) allows every page, 401 or 403
    forbids them all (as urllib's own reader does); a server error or no answer fails
    the crawl, since the rules cannot be known."""
    scheme, host, _ = fetcher.site
    netloc = urlsplit(start).netloc.rpartition("@")[2]
    try:
        page = fetcher.fetch(urlunsplit((scheme, netloc or host, "/robots.txt", "", "")))
    except PageFailed as exc:
        raise WebError(f"robots.txt could not be read, so the crawl waits: {exc}") from None
    rules = RobotFileParser()
    if page.status in (401, 403):
        rules.parse(["User-agent: *", "Disallow: /"])
    elif 400 <= page.status < 500:
        rules.parse([])
    elif page.status != 200:
        raise WebError(f"robots.txt answered {page.status}, so the crawl waits")
    else:
        rules.parse(page.body.decode("utf-8", "replace").splitlines())
    return rules


def page_links(body: bytes, url: str, site: Site) -> list[str]:
    """The links of an HTML page to other pages of the site, normalised, in page order
    (a <base href> respected; assets and rel=nofollow links left out)."""
    from lxml import etree, html

    try:
        root = html.document_fromstring(body)
    except (etree.ParserError, ValueError):
        return []
    base = next((b.get("href") for b in root.iter("base") if b.get("href")), None)
    base_url = normalised(base, url) if base else url
    found: dict[str, None] = {}
    for anchor in root.iter("a", "area"):
        href = anchor.get("href")
        if not href or "nofollow" in (anchor.get("rel") or "").lower().split():
            continue
        target = normalised(href, base_url or url)
        if target is None or site_of(target) != site or urlsplit(target).path.lower().endswith(ASSET_SUFFIXES):
            continue
        found.setdefault(target, None)
    return list(found)


def sitemap_urls(body: bytes) -> tuple[str, list[str]]:
    """("urlset" or "sitemapindex", the <loc> URLs) of a sitemap; PageFailed for anything
    else. Entities are not expanded and nothing is fetched while parsing."""
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)
    try:
        root = etree.fromstring(body, parser=parser)
    except etree.XMLSyntaxError as exc:
        raise PageFailed(f"not a readable sitemap: {exc}") from None
    kind = etree.QName(root).localname
    if kind not in ("urlset", "sitemapindex"):
        raise PageFailed(f"not a sitemap: its root element is <{kind}>, not <urlset> or <sitemapindex>")
    locs = [(element.text or "").strip() for element in root.iter("{*}loc")]
    return kind, [loc for loc in locs if loc]
