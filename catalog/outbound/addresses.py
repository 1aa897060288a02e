"""Which addresses an outbound request may reach: the pure core of catalog.outbound, no
Django and no network, so every spelling is tested in microseconds.

Refused: loopback, private, shared (carrier-grade NAT), link-local (where cloud metadata
services answer, 169.254.169.254), unspecified, multicast, reserved, documentation and
benchmarking ranges, IPv6 unique-local and site-local; and whatever else the standard
library does not call global. An IPv6 address that carries an IPv4 one (IPv4-mapped
::ffff:a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16) is judged by the IPv4 address it
reaches. A host written as a number is read as the C resolver reads it (inet_aton:
2130706433, 0177.0.0.1, 0x7f.1, 127.1 are all 127.0.0.1), so no spelling slips past.
An address inside one of the `allowed` networks (a setting) is never refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network

Address = IPv4Address | IPv6Address
Network = IPv4Network | IPv6Network

# (network, what it is), most specific first where they nest; every one is refused.
REFUSED: tuple[tuple[Network, str], ...] = tuple((ip_network(net), what) for net, what in (
    ("0.0.0.0/8", "an unspecified address"),
    ("10.0.0.0/8", "a private address"),
    ("100.64.0.0/10", "a shared (carrier-grade NAT) address"),
    ("127.0.0.0/8", "a loopback address"),
    ("169.254.169.254/32", "the cloud metadata address"),
    ("169.254.0.0/16", "a link-local address"),
    ("172.16.0.0/12", "a private address"),
    ("192.0.0.0/24", "a reserved (IETF protocol) address"),
    ("192.0.2.0/24", "a documentation address"),
    ("192.88.99.0/24", "a reserved (6to4 relay) address"),
    ("192.168.0.0/16", "a private address"),
    ("198.18.0.0/15", "a reserved (benchmarking) address"),
    ("198.51.100.0/24", "a documentation address"),
    ("203.0.113.0/24", "a documentation address"),
    ("224.0.0.0/4", "a multicast address"),
    ("240.0.0.0/4", "a reserved address"),
    ("::/128", "an unspecified address"),
    ("::1/128", "a loopback address"),
    ("::/96", "a reserved (IPv4-compatible) address"),
    ("64:ff9b:1::/48", "a reserved (local NAT64) address"),
    ("100::/64", "a reserved (discard) address"),
    ("2001:db8::/32", "a documentation address"),
    ("2001::/23", "a reserved (IETF protocol) address"),
    ("3fff::/20", "a documentation address"),
    ("5f00::/16", "a reserved (segment routing) address"),
    ("fd00:ec2::254/128", "the cloud metadata address"),
    ("fc00::/7", "a unique-local (private) address"),
    ("fe80::/10", "a link-local address"),
    ("fec0::/10", "a site-local (private) address"),
    ("ff00::/8", "a multicast address"),
))
NAT64 = IPv6Network("64:ff9b::/96")

# One part of a numeric IPv4 host as inet_aton reads it: hex (0x..), octal (0..), decimal.
_IPV4_PART = re.compile(r"0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*")


class NotAnAddress(ValueError):
    """A host written as a number (or in brackets) that is no valid address."""


def ipv4_spelling(host: str) -> IPv4Address | None:
    """The IPv4 address a host written as numbers names (one to four parts, each decimal,
    octal or hex, the last filling the bytes left: what inet_aton and so every resolver
    call accepts); None for a host that is not written as numbers."""
    parts = host.split(".")
    if len(parts) > 1 and parts[-1] == "":
        parts.pop()  # a trailing dot, as in an absolute name
    if not 1 <= len(parts) <= 4 or not all(_IPV4_PART.fullmatch(part) for part in parts):
        return None
    values = [_ipv4_part(part) for part in parts]
    *leading, last = values
    if any(value > 255 for value in leading) or last >= 256 ** (5 - len(parts)):
        raise NotAnAddress(f"{host!r} is written as an IPv4 address but is not one")
    number = last
    for index, value in enumerate(leading):
        number += value << (8 * (3 - index))
    return IPv4Address(number)


def _ipv4_part(part: str) -> int:
    if part[:2].lower() == "0x":
        return int(part[2:] or "0", 16)
    if len(part) > 1 and part.startswith("0"):
        return int(part, 8)
    return int(part)


def host_address(host: str) -> Address | None:
    """The address a URL's host names itself (IPv6 with or without its brackets, IPv4 in
    any spelling), or None for a name, which must be resolved."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if ":" in bare:
        try:
            return IPv6Address(bare)
        except ValueError:
            raise NotAnAddress(f"{host!r} is not a valid IPv6 address") from None
    return ipv4_spelling(bare)


def reached(address: Address) -> Address:
    """The IPv4 address an IPv6 one carries and leads to (IPv4-mapped, NAT64, 6to4), else
    the address itself."""
    if isinstance(address, IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in NAT64:
            return IPv4Address(int(address) & 0xFFFFFFFF)
        if address.sixtofour is not None:
            return address.sixtofour
    return address


def refusal(address: Address | str, *, allowed: Iterable[Network] = ()) -> str | None:
    """Why `address` may not be reached (a phrase: "127.0.0.1 is a loopback address"), or
    None when it may: a global address, or one inside an `allowed` network."""
    address = ip_address(address) if isinstance(address, str) else address
    target = reached(address)
    if any(candidate in network for network in allowed for candidate in {address, target}
           if candidate.version == network.version):
        return None
    what = next((what for network, what in REFUSED if target.version == network.version and target in network), None)
    if what is None and (target.is_multicast or not target.is_global):
        what = "a reserved address"  # a special range newer than the table above
    if what is None:
        return None
    carried = f" (it leads to {target})" if target != address else ""
    return f"{address} is {what}{carried}"
