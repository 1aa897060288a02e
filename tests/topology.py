"""The topology tests' side of benchmarks.topology: a cluster (primary, replica, Redis)
whose database the test writes to through a child process, an agent's traffic through a
load balancer the test plays, and an API call.

The cluster has a database of its own, not the suite's test database: its replica is a
copy of the whole server. Redis is Debian's `redis-server` (`make redis` installs it);
the tests that need it are skipped, saying so, where it is missing.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from benchmarks.connections import Server
from benchmarks.topology import (
    BASE_DIR,
    SAFETY_S,
    Cluster,
    RedisMissing,
    redis_server,
    replay_paused,
    wait_for_replay,
)
from tests.config.servers import private_dir

READ_FROM = "Lectern-Read-From"
__all__ = ["READ_FROM", "SAFETY_S", "cluster", "replay_paused", "wait_for_replay"]


@contextmanager
def cluster() -> Iterator[TestCluster]:
    """A started cluster (benchmarks.topology.Cluster.start), stopped after; a skip
    naming how to install Redis where it is missing."""
    try:
        redis = redis_server()
    except RedisMissing as exc:
        pytest.skip(str(exc))
    with private_dir("topology") as root:
        made = TestCluster(root)
        try:
            made.start(redis)
            yield made
        finally:
            made.stop()


class TestCluster(Cluster):
    """The cluster, and a way to write to its database as a command would."""

    __test__ = False  # not a test class, whatever its name

    def call(self, function: str, **kwargs: Any) -> Any:
        """tests.topology_children.`function`(**kwargs) in a child on this cluster's
        database; its JSON answer."""
        code = ("import django, json, sys; django.setup(); from tests import topology_children as c; "
                "print(json.dumps(getattr(c, sys.argv[1])(**json.loads(sys.argv[2]))))")
        done = subprocess.run([sys.executable, "-c", code, function, json.dumps(kwargs)], cwd=BASE_DIR,
                              env={**os.environ, **self.env()}, capture_output=True, text=True, timeout=SAFETY_S)
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    def web(self, name: str) -> Server:
        """A small `make serve`: one web process of 4 threads, one task worker."""
        return self.server(name, LECTERN_WEB_WORKERS="1", LECTERN_WEB_THREADS="4", LECTERN_Q_WORKERS="1")


def api(server: Server, method: str, path: str, token: str, body: dict[str, Any] | None = None,
        ) -> tuple[int, http.client.HTTPMessage, dict[str, Any]]:
    """One API call: status, headers, JSON body."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=SAFETY_S)
    try:
        conn.request(method, path, json.dumps(body) if body is not None else None,
                     {"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.headers, json.loads(response.read() or b"{}")
    finally:
        conn.close()


SEARCH = {"catalog": "kb", "query": "retry backoff", "mode": "bm25"}
ENRICH = {"text": "how should we retry transient failures?", "surface": "prompt"}


@dataclass
class Traffic:
    """An agent's traffic through a load balancer in front of `servers`: memories stored,
    searches and enrichments, round robin. A backend whose connection fails is taken out,
    as a balancer's health check would, and a read it dropped is sent to another; a write
    it dropped was never acknowledged, so the agent cannot count on it. `stored` are the
    memories acknowledged; `errors` every answer but a success."""

    servers: list[Server]
    token: str
    stored: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    dropped: int = 0
    requests: int = 0
    down: set[int] = field(default_factory=set)

    def run(self, stop: Any) -> None:
        """Until `stop` (a threading.Event) is set."""
        turn = 0
        while not stop.is_set():
            turn += 1
            content = f"Memory {turn}: the agent's note number {turn}."
            if self._send("POST", "/api/v1/memory", {"user_id": "traffic", "content": content}, turn, retry=False):
                self.stored.append(content)
            self._send("POST", "/api/v1/search", SEARCH, turn + 1)
            self._send("POST", "/api/v1/enrich", ENRICH, turn + 2)

    def _send(self, method: str, path: str, body: dict[str, Any], turn: int, *, retry: bool = True) -> bool:
        live = [server for server in self.servers if server.port not in self.down]
        for server in (live[turn % len(live):] + live[:turn % len(live)])[: 2 if retry else 1]:
            self.requests += 1
            try:
                status, _, answer = api(server, method, path, self.token, body)
            except (OSError, http.client.HTTPException):
                self.dropped += 1
                self.down.add(server.port)
                continue
            if status >= 300:
                self.errors.append(f"{method} {path} on {server.port}: {status} {answer}")
            return status < 300
        return False
