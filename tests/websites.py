"""Web sites for tests: a ThreadingHTTPServer on 127.0.0.1 serving a dict of pages, each
with an ETag and a Last-Modified that move when the page changes (and a 304 to a request
that names them), and noting every request it saw, so a test asserts what a crawl asked."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.utils import formatdate, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler

from tests.local_http import base_url, http_served

HTML = "text/html; charset=utf-8"
EPOCH = 1_700_000_000  # the first version's Last-Modified; each change is a minute later


@dataclass
class Reply:
    body: str | bytes = ""
    status: int = 200
    content_type: str = HTML
    headers: dict[str, str] = field(default_factory=dict)
    validators: bool = True  # send ETag and Last-Modified, and answer 304 to them


@dataclass
class Seen:
    path: str
    headers: dict[str, str]

    @property
    def conditional(self) -> bool:
        return "If-None-Match" in self.headers or "If-Modified-Since" in self.headers


class Site:
    """The pages a server serves, by path (and query), changed by the test as it goes."""

    def __init__(self, pages: dict[str, Reply | str | None]) -> None:
        self.pages: dict[str, Reply] = {}
        self.modified: dict[str, int] = {}
        self.requests: list[Seen] = []
        self.base = ""
        self._changes = 0
        self.set(pages)

    def set(self, pages: dict[str, Reply | str | None]) -> None:
        """Add, change or (None) remove pages; a changed page gets a later Last-Modified."""
        for path, reply in pages.items():
            if reply is None:
                self.pages.pop(path, None)
                continue
            self._changes += 1
            self.pages[path] = reply if isinstance(reply, Reply) else Reply(reply)
            self.modified[path] = EPOCH + 60 * self._changes

    def seen(self, path: str) -> list[Seen]:
        return [request for request in self.requests if request.path == path]

    def url(self, path: str) -> str:
        return f"{self.base}{path}"


class _Handler(BaseHTTPRequestHandler):
    site: Site

    def do_GET(self) -> None:
        self.site.requests.append(Seen(self.path, dict(self.headers.items())))
        reply = self.site.pages.get(self.path)
        if reply is None:
            self._send(404, {"Content-Type": "text/plain"}, b"not found")
            return
        body = reply.body.encode() if isinstance(reply.body, str) else reply.body
        headers = {"Content-Type": reply.content_type, **reply.headers}
        if reply.validators and reply.status == 200:
            etag = f'"{hashlib.sha256(body).hexdigest()[:16]}"'
            modified = self.site.modified[self.path]
            headers |= {"ETag": etag, "Last-Modified": formatdate(modified, usegmt=True)}
            if self._unchanged(etag, modified):
                self._send(304, {"ETag": etag}, b"")
                return
        self._send(reply.status, headers, body)

    def _unchanged(self, etag: str, modified: int) -> bool:
        if (match := self.headers.get("If-None-Match")) is not None:
            return etag in [tag.strip() for tag in match.split(",")]
        if (since := self.headers.get("If-Modified-Since")) is not None:
            return parsedate_to_datetime(since).timestamp() >= modified
        return False

    def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        if status != 304:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


@contextmanager
def web_server(site: Site) -> Iterator[Site]:
    """Serve `site` on 127.0.0.1 (a free port) while the block runs; its `base` is set."""
    with http_served(type("Handler", (_Handler,), {"site": site})) as server:
        site.base = base_url(server)
        yield site


def html_page(title: str, body: str, links: Sequence[str] = ()) -> str:
    """A page as sites make them: a header and navigation (to `links`), the main text,
    a footer and a script, of which a crawl should keep only the main text."""
    nav = "".join(f'<li><a href="{link}">{link}</a></li>' for link in links)
    return (f"<!doctype html><html><head><title>{title}</title><script>var tracker = 'boilerplate-script';"
            f"</script></head><body><header>Acme Docs site header</header><nav><ul>{nav}</ul></nav>"
            f"<main><h1>{title}</h1>{body}</main><footer>Copyright Acme footer boilerplate</footer></body></html>")
