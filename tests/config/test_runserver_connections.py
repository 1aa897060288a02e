"""`manage.py runserver` (what `make run` serves with) in a real process on the test
database: its database connections end with the client connections that opened them.

Django's runserver serves each client connection in a thread of its own; a connection
kept for CONN_MAX_AGE by a thread that has ended is reused by no one and closed only
when the garbage collector reaches it, so 16 clients connecting per request piled up
160 idle backends in 20 seconds (docs/benchmarks.md).
"""

from __future__ import annotations

import pytest

from benchmarks.connections import Server, backends, search_load, wait_until
from tests.config.servers import child_env

CLIENTS = 16


@pytest.fixture
def runserver(transactional_db, tmp_path):
    server = Server("runserver", log=tmp_path / "runserver.log", env=child_env(DEBUG="1", DB_CONN_MAX_AGE="60"))
    try:
        yield server.start()
    finally:
        if server.process is not None:
            server.stop()


def test_runserver_backends_stay_bounded_and_close_with_their_clients(runserver, indexed_catalog, agent_token):
    token = agent_token("runserver-load", [indexed_catalog])

    load = search_load(runserver, token=token, catalog=indexed_catalog.slug, clients=CLIENTS, keepalive=False,
                       requests_per_client=8)

    assert load.failures == [] and load.requests == 8 * CLIENTS, runserver.output()
    # At most one connection per client connection in flight (and a few backends still
    # exiting); not one per request served.
    assert 0 < load.peak_backends <= 2 * CLIENTS
    wait_until(lambda: backends(runserver.app) == 0, 10, "the runserver threads' backends to close")
