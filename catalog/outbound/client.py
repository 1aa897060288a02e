"""Outbound HTTP that cannot be turned against Lectern's own network (server-side request
forgery): webhook deliveries, git sources and web sources.

A URL is checked by `destination_check`: its host is read as an address (any spelling)
or resolved, once, and every address it resolves to must pass addresses.refusal (the
pure core) against LECTERN_OUTBOUND_ALLOWED_NETWORKS. `post` then connects to the
address that was checked, never resolving the name again (a name that answers a public
address to the check and a private one to the connection, DNS rebinding, gets nowhere),
while the Host header and TLS (SNI, certificate) still use the name. No redirect is
followed and no proxy is used: what was checked is what is reached (a caller that follows
redirects, as the web crawler does, checks each hop again). A reply is read up to a bound,
so an internal service's page never lands in Lectern whole, and a `get` refuses a body
longer than its bound rather than keep a truncated one.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from ipaddress import ip_address, ip_network
from urllib.parse import SplitResult, urlsplit

from django.conf import settings

from catalog.outbound.addresses import Address, Network, NotAnAddress, host_address, refusal

SCHEMES = {"http": 80, "https": 443}


class OutboundRefused(Exception):
    """The URL may not be reached: its message says why (a refused address, a bad URL)."""


@dataclass(frozen=True)
class Destination:
    """A checked URL: where to connect (`address`) and what to ask for there (`host`,
    written as in the URL, for the Host header and TLS)."""

    scheme: str
    host: str
    port: int
    target: str  # path and query
    address: Address


@dataclass(frozen=True)
class Reply:
    status: int
    excerpt: bytes  # the start of the body, at most the bound asked for


@dataclass(frozen=True)
class Fetched:
    status: int
    headers: dict[str, str]  # names lower-cased
    body: bytes


class TooLarge(Exception):
    """A reply whose body is longer than the bound asked for; the message says how long."""


def allowed_networks() -> tuple[Network, ...]:
    """LECTERN_OUTBOUND_ALLOWED_NETWORKS (networks, or their CIDR spellings)."""
    return tuple(ip_network(network, strict=False) for network in settings.LECTERN_OUTBOUND_ALLOWED_NETWORKS)


def _split(url: str) -> tuple[SplitResult, str, int]:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise OutboundRefused(f"{url!r} is not a usable URL: {exc}") from None
    if parts.scheme not in SCHEMES or not parts.hostname:
        raise OutboundRefused(f"{url!r} is not an http or https URL with a host")
    return parts, parts.hostname, port or SCHEMES[parts.scheme]


def resolve(host: str, port: int) -> list[Address]:
    """Every address `host` resolves to, in the resolver's order (socket.gaierror when
    none: a failure to reach, not a refusal; OutboundRefused for no valid name at all)."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except ValueError as exc:  # a label too long for IDNA: no name to look up
        raise OutboundRefused(f"{host!r} is not a valid host name: {exc}") from None
    return list(dict.fromkeys(ip_address(sockaddr[0]) for *_, sockaddr in found))


def destination_check(url: str, *, allowed: Sequence[Network] | None = None) -> Destination:
    """The destination of `url`, pinned to its first address once every address its host
    names or resolves to passed the check. Raises OutboundRefused, or OSError when the
    name does not resolve."""
    parts, host, port = _split(url)
    allowed = allowed_networks() if allowed is None else allowed
    try:
        literal = host_address(host)
    except NotAnAddress as exc:
        raise OutboundRefused(str(exc)) from None
    found = [literal] if literal is not None else resolve(host, port)
    for address in found:
        reason = refusal(address, allowed=allowed)
        if reason is not None:
            named = "" if literal is not None else f"{host} resolves to {address}: "
            raise OutboundRefused(f"{named}{reason}, which outbound requests may not reach "
                                  "(LECTERN_OUTBOUND_ALLOWED_NETWORKS)")
    target = parts.path or "/"
    return Destination(parts.scheme, host, port, f"{target}?{parts.query}" if parts.query else target, found[0])


def url_refusal(url: str) -> str | None:
    """Why `url` may not be registered as a destination, or None. A name that does not
    resolve now is no refusal: it is checked again, resolved, before each request."""
    try:
        destination_check(url)
    except OutboundRefused as exc:
        return str(exc)
    except OSError:
        return None
    return None


def _connect_pinned(address: Address, where: tuple[str, int], timeout: float | None,
                    source_address: tuple[str, int] | None = None) -> socket.socket:
    """http.client's connect, to the checked address instead of the name it was given."""
    return socket.create_connection((str(address), where[1]), timeout, source_address)


def _connection(destination: Destination, *, timeout: float,
                tls: ssl.SSLContext | None) -> http.client.HTTPConnection:
    if destination.scheme == "https":
        connection: http.client.HTTPConnection = http.client.HTTPSConnection(
            destination.host, destination.port, timeout=timeout, context=tls or ssl.create_default_context())
    else:
        connection = http.client.HTTPConnection(destination.host, destination.port, timeout=timeout)
    # The one hook http.client has for opening its socket (HTTPSConnection wraps what it
    # returns in TLS for the name): it connects to the address checked, resolving nothing.
    connection._create_connection = partial(_connect_pinned, destination.address)  # type: ignore[attr-defined]
    return connection


def post(destination: Destination, *, body: bytes, headers: dict[str, str], timeout: float, keep: int,
         tls: ssl.SSLContext | None = None) -> Reply:
    """POST `body` to a checked destination; the status and the first `keep` bytes of the
    reply. Raises OSError or http.client.HTTPException when there is no answer."""
    connection = _connection(destination, timeout=timeout, tls=tls)
    try:
        connection.request("POST", destination.target, body=body, headers=headers)
        response = connection.getresponse()
        return Reply(response.status, response.read(keep))
    finally:
        connection.close()


def get(destination: Destination, *, headers: dict[str, str], timeout: float, max_bytes: int,
        tls: ssl.SSLContext | None = None) -> Fetched:
    """GET a checked destination: its status, headers and whole body. `timeout` bounds
    each wait and the exchange as a whole (TimeoutError past it), so a server trickling
    bytes cannot hold a crawl; a body over `max_bytes` raises TooLarge, by its
    Content-Length before any of it is read, else once one byte more than that arrived.
    Raises OSError or http.client.HTTPException when there is no answer."""
    deadline = time.monotonic() + timeout
    connection = _connection(destination, timeout=timeout, tls=tls)
    try:
        connection.request("GET", destination.target, headers=headers)
        response = connection.getresponse()
        found = {name.lower(): value for name, value in response.getheaders()}
        length = found.get("content-length", "").strip()
        if length.isdigit() and int(length) > max_bytes:
            raise TooLarge(f"{int(length):,} bytes")
        body = bytearray()
        while len(body) <= max_bytes:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the reply took longer than {timeout:g} s")
            piece = response.read1(65536)
            if not piece:
                break
            body += piece
        if len(body) > max_bytes:
            raise TooLarge(f"more than {max_bytes:,} bytes")
        return Fetched(response.status, found, bytes(body))
    finally:
        connection.close()
