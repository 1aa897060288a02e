"""The client's address behind reverse proxies, from X-Forwarded-For: a pure function, no
Django (config/signin.py hands it the request's values and LECTERN_TRUSTED_PROXIES)."""

from __future__ import annotations

from ipaddress import ip_address


def forwarded_client(*, peer: str | None, forwarded_for: str, trusted_proxies: int) -> str | None:
    """The address the outermost trusted proxy saw: X-Forwarded-For's entry `trusted_proxies`
    from the right. Each proxy appends the address it was reached from (nginx's
    $proxy_add_x_forwarded_for), so every entry left of that one is the client's own
    writing. With no proxy trusted, or a header that did not pass through them all (too few
    entries, or no address there), the peer: a header is never believed on its own."""
    if trusted_proxies == 0:
        return peer
    entries = forwarded_for.split(",")
    if len(entries) < trusted_proxies:
        return peer
    try:
        # One spelling per address (2001:DB8::7 and 2001:db8:0::7 are one), so one count.
        return str(ip_address(entries[-trusted_proxies].strip()))
    except ValueError:
        return peer
