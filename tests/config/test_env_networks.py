"""LECTERN_OUTBOUND_ALLOWED_NETWORKS is read as networks, and a value that is none fails
loudly when the settings load (config.env.env_networks)."""

from __future__ import annotations

from ipaddress import ip_network

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.env import env_networks


def test_networks_are_read_comma_separated_a_bare_address_a_network_of_one(monkeypatch):
    monkeypatch.setenv("LECTERN_OUTBOUND_ALLOWED_NETWORKS", "127.0.0.0/8, ::1 ,10.1.2.3/8")
    assert env_networks("LECTERN_OUTBOUND_ALLOWED_NETWORKS", []) == [
        ip_network("127.0.0.0/8"), ip_network("::1/128"), ip_network("10.0.0.0/8")]
    monkeypatch.delenv("LECTERN_OUTBOUND_ALLOWED_NETWORKS")
    assert env_networks("LECTERN_OUTBOUND_ALLOWED_NETWORKS", []) == []


@pytest.mark.parametrize("value", ["localhost", "127.0.0.0/33", "10.0.0.0/8,nope"])
def test_a_value_that_is_no_network_fails_loudly(monkeypatch, value):
    monkeypatch.setenv("LECTERN_OUTBOUND_ALLOWED_NETWORKS", value)
    with pytest.raises(ImproperlyConfigured, match="LECTERN_OUTBOUND_ALLOWED_NETWORKS: .* is not a network"):
        env_networks("LECTERN_OUTBOUND_ALLOWED_NETWORKS", [])
