"""config.ports' pure part: the listening sockets of a /proc/net/tcp table, and the
addresses `make serve` and `make run` are given."""

from __future__ import annotations

import socket

import pytest

from config.ports import address_holder, listening_inodes, split_address

TABLE = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0 100 0 0 10 0
   1: 0100007F:1F40 0100007F:D3C2 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0 20 4 30 10 -1
   2: 00000000:1F41 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4444 1 0 100 0 0 10 0
"""


def test_only_the_listening_sockets_on_the_port_are_found():
    assert listening_inodes(TABLE, 8000) == [4242]  # not the connection to it (state 01)
    assert listening_inodes(TABLE, 8001) == [4444]
    assert listening_inodes(TABLE, 9000) == []
    assert listening_inodes("", 8000) == []


def test_addresses_split_as_gunicorn_reads_them():
    assert split_address("127.0.0.1:8000") == ("127.0.0.1", 8000)
    assert split_address("[::1]:8443") == ("::1", 8443)
    assert split_address("localhost") == ("localhost", 8000)
    assert split_address("[::1]") == ("::1", 8000)
    assert split_address("unix:/run/lectern.sock") is None
    assert split_address("8000") == ("8000", 8000)  # a host name to gunicorn


def test_digits_alone_are_a_port_on_loopback_as_runserver_reads_them():
    assert split_address("8000", dev=True) == ("127.0.0.1", 8000)
    assert split_address("0.0.0.0:8001", dev=True) == ("0.0.0.0", 8001)
    assert split_address("[::1]:8002", dev=True) == ("::1", 8002)


@pytest.mark.parametrize("address", ["127.0.0.1:http", "127.0.0.1:", "127.0.0.1:65536", "localhost:²", "70000"])
def test_a_port_that_is_no_port_number_is_refused_by_name(address):
    with pytest.raises(ValueError, match="is not a port number"):
        split_address(address, dev=True)


def test_a_port_alone_that_is_taken_names_its_holder():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]

        assert f"{port} is in use: pid" in (address_holder(str(port), dev=True) or "")
