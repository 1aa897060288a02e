"""config.ports' pure part: the listening sockets of a /proc/net/tcp table, and the
addresses `make serve` and `make run` are given."""

from __future__ import annotations

from config.ports import listening_inodes, split_address

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
    assert split_address("unix:/run/lectern.sock") is None
