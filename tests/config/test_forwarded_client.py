"""The client's address behind LECTERN_TRUSTED_PROXIES proxies (config.forwarded.forwarded_client,
a pure function): the entry of X-Forwarded-For the outermost trusted proxy added, counted
from the right, where no client can write; the peer when no proxy is trusted or the header
did not come through them all."""

from __future__ import annotations

import pytest

from config.forwarded import forwarded_client


@pytest.mark.parametrize(("forwarded_for", "proxies", "client"), [
    ("", 0, "10.0.0.2"),  # no proxy trusted: the peer, whatever the header says
    ("203.0.113.5", 0, "10.0.0.2"),
    ("203.0.113.5", 1, "203.0.113.5"),  # the address the one proxy saw
    ("198.51.100.1, 203.0.113.5", 1, "203.0.113.5"),  # the client's own entries come first
    ("198.51.100.1, 203.0.113.5, 192.0.2.9", 2, "203.0.113.5"),  # a CDN, then nginx
    ("203.0.113.5", 2, "10.0.0.2"),  # fewer entries than proxies: not passed through them all
    ("", 1, "10.0.0.2"),  # the proxy set no header
    ("not-an-address", 1, "10.0.0.2"),
    (" 2001:DB8:0:0::7 ", 1, "2001:db8::7"),  # one spelling per address, so one count
])
def test_the_client_is_the_entry_the_outermost_trusted_proxy_added(forwarded_for, proxies, client):
    assert forwarded_client(peer="10.0.0.2", forwarded_for=forwarded_for, trusted_proxies=proxies) == client
