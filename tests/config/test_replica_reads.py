"""Reads from a streaming replica (catalog.reads), in real processes: two
web processes (`make serve`'s program) on a primary and its replica (tests/topology.py).

An agent's search is served by the replica while it holds what the search must see, and
by the primary otherwise: a revoked approval is never honoured from a replica that has
not replayed the revocation, and an agent that stores a memory through one web process
finds it at once through the other. The replica is held behind the primary by pausing
its replay (pg_wal_replay_pause), for as long as the test needs, never by a race.
"""

from __future__ import annotations

import pytest

from benchmarks.topology import DATABASE
from config import embedded_pg
from tests.topology import READ_FROM, api, cluster, replay_paused, wait_for_replay
from tests.topology_children import CATALOG, LEDGER, LEDGER_CATALOG, NOTES, VAULT

SEARCH = "/api/v1/search"
VAULT_QUERY = {"catalog": CATALOG, "query": "zebrafish protocol vault door", "mode": "bm25", "top_k": 5}


@pytest.fixture(scope="module")
def topology():
    with cluster() as made:
        seeded = made.call("seed")
        first, second = made.web("web-a"), made.web("web-b")
        try:
            first.start(timeout=180)
            second.start(timeout=180)
            yield made, first, second, seeded
        finally:
            for server in (first, second):
                if server.process is not None:
                    server.stop()


def sources_found(body):
    return [hit["source"] for hit in body["results"]]


def test_a_revoked_approval_is_never_honoured_from_a_replica_that_lags(topology):
    cluster, web, _, seeded = topology
    token = seeded["token"]
    wait_for_replay(cluster)
    status, headers, body = api(web, "POST", SEARCH, token, VAULT_QUERY)
    assert (status, headers[READ_FROM], sources_found(body)) == (200, "replica", [VAULT]), body
    wait_for_replay(cluster)  # past what that request wrote (the token's last use, once a minute)

    with replay_paused(cluster):
        # a replica behind the primary, with nothing it must hold since: still read
        status, headers, body = api(web, "POST", SEARCH, token, VAULT_QUERY)
        assert (status, headers[READ_FROM], sources_found(body)) == (200, "replica", [VAULT])

        assert cluster.call("revoke", request=seeded["request"]) == "revoked"

        # the replica still holds the approval: the search goes to the primary, which withholds
        status, headers, body = api(web, "POST", SEARCH, token, VAULT_QUERY)
        assert (status, headers[READ_FROM], sources_found(body)) == (200, "primary", [])
        assert [entry["source"] for entry in body["withheld"]["sources"]] == [VAULT]

    wait_for_replay(cluster)
    status, headers, body = api(web, "POST", SEARCH, token, VAULT_QUERY)
    assert (status, headers[READ_FROM], sources_found(body)) == (200, "replica", [])


def test_an_agent_finds_what_it_stored_through_the_other_web_process_at_once(topology):
    cluster, first, second, seeded = topology
    token = seeded["token"]
    wait_for_replay(cluster)
    recall = "/api/v1/memory?user_id=steve&q=keyboard+layout"
    status, headers, body = api(second, "GET", recall, token)
    assert (status, headers[READ_FROM], body["count"]) == (200, "replica", 0)

    with replay_paused(cluster):
        status, _, _ = api(first, "POST", "/api/v1/memory", token,
                           {"user_id": "steve", "content": "Types on a Dvorak keyboard layout."})
        assert status == 201

        # the replica has not replayed the memory: this agent's reads go to the primary
        status, headers, body = api(second, "GET", recall, token)
        assert (status, headers[READ_FROM], body["count"]) == (200, "primary", 1)
        assert body["hits"][0]["content"] == "Types on a Dvorak keyboard layout."

    wait_for_replay(cluster)
    status, headers, body = api(second, "GET", recall, token)
    assert (status, headers[READ_FROM], body["count"]) == (200, "replica", 1)


def test_searches_are_answered_from_the_primary_while_the_replica_is_down(topology):
    cluster, web, _, seeded = topology
    query = {"catalog": CATALOG, "query": "retry transient failures", "mode": "bm25"}
    embedded_pg.stop(cluster.replica)
    try:
        status, headers, body = api(web, "POST", SEARCH, seeded["token"], query)
        assert (status, headers[READ_FROM], sources_found(body)) == (200, "primary", [NOTES])
    finally:
        embedded_pg.replica_ensure(cluster.primary, cluster.replica, DATABASE)

    wait_for_replay(cluster)  # the web process reconnects to it on its next request
    status, headers, body = api(web, "POST", SEARCH, seeded["token"], query)
    assert (status, headers[READ_FROM], sources_found(body)) == (200, "replica", [NOTES])


def test_a_request_a_search_from_the_replica_raises_reaches_the_webhook_outbox(topology):
    """The search reads from the replica; the request it calls for is written on the
    primary, and so is its webhook event (the event is made from the request row, which
    only the primary holds until it commits)."""
    cluster, web, _, seeded = topology
    cluster.call("ledger_disclosed")
    wait_for_replay(cluster)
    query = {"catalog": LEDGER_CATALOG, "query": "ledger reconciliation accruals", "mode": "bm25"}

    status, headers, body = api(web, "POST", SEARCH, seeded["token"], query)

    assert (status, headers[READ_FROM], sources_found(body)) == (200, "replica", []), body
    (entry,) = body["withheld"]["sources"]
    assert (entry["source"], entry["state"]) == (LEDGER, "pending") and entry["request_id"] is not None
    assert cluster.call("webhook_events", request=entry["request_id"]) == ["approval.requested"]
