"""A curator's reset reaches every process of a real deployment (`python -m config.serve`:
two gunicorn workers and a django-q2 cluster, on the test database): the worker that
answers it drops its caches at once, the other web worker when it next serves a
request after LECTERN_RUNTIME_POLL_SECONDS, and the task worker before its next task."""

from __future__ import annotations

import http.client
import json
import secrets
import time
from typing import Any

import pytest

from benchmarks.connections import Server, ServerFailed, wait_until
from tests.config.servers import child_env
from tests.factories import agent_with_token

PROMPT = "How should we handle transient failures? Retry with backoff, or open the circuit breaker?"


def call(server: Server, method: str, path: str, token: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """One request on a new connection: gunicorn hands each connection to one of its
    workers, so successive calls reach both."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        conn.request(method, path, json.dumps(body) if body is not None else None,
                     {"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read()
        assert response.status in (200, 202), (method, path, response.status, data[:300])
        return json.loads(data)
    finally:
        conn.close()


@pytest.fixture
def deployment(transactional_db, tmp_path, indexed_catalog):
    _, token = agent_with_token(name="keeper", catalogs=[indexed_catalog], is_curator=True)
    env = child_env(DEBUG="0", SECRET_KEY=secrets.token_urlsafe(50), LECTERN_STATIC_ROOT=str(tmp_path / "static"),
                    LECTERN_WEB_WORKERS="2", LECTERN_WEB_THREADS="1", LECTERN_Q_WORKERS="1",
                    LECTERN_RUNTIME_POLL_SECONDS="1", LOG_LEVEL="INFO")
    server = Server("serve", env=env, log=tmp_path / "serve.log")
    try:
        yield server.start(timeout=180), token, indexed_catalog
    finally:
        if server.process is not None and server.process.poll() is None:
            server.stop()


def web_workers(server: Server, token: str, catalog: str, *, warm: bool) -> dict[int, dict[str, Any]]:
    """Each web worker's own status (its `process` section), from new connections until
    both have answered; `warm`: enrich first on the same worker, filling its caches."""
    seen: dict[int, dict[str, Any]] = {}
    deadline = time.monotonic() + 60
    while len(seen) < 2:
        if time.monotonic() > deadline:
            raise ServerFailed(f"only {sorted(seen)} answered:\n{server.output()}")
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        try:
            if warm:  # the same keep-alive connection: the same worker
                conn.request("POST", "/api/v1/enrich", json.dumps({"text": PROMPT, "surface": "prompt",
                                                                   "catalogs": [catalog]}), headers)
                response = conn.getresponse()
                assert response.status == 200, response.read()[:300]
                response.read()
            conn.request("GET", "/api/v1/status", headers=headers)
            process = json.loads(conn.getresponse().read())["process"]
        finally:
            conn.close()
        seen[process["pid"]] = process
    return seen


def test_a_reset_reaches_the_other_web_worker_and_the_task_worker(deployment):
    server, token, catalog = deployment
    warmed = web_workers(server, token, catalog.slug, warm=True)
    assert all(process["cached_detection_indexes"] == 1 for process in warmed.values()), warmed

    reset = call(server, "POST", "/api/v1/status/reset", token)
    seq = reset["reset"]["seq"]
    assert reset["indexes_dropped"] == 1 and reset["others_within_s"] == 1

    def both_applied() -> dict[int, dict[str, Any]] | None:
        """Each web worker's status, once both report the reset applied (the other
        worker looks on its first request after its interval)."""
        after = web_workers(server, token, catalog.slug, warm=False)
        return after if all(p["applied_reset"] == seq for p in after.values()) else None

    after = wait_until(both_applied, 30, "the other web worker to apply the reset", server)
    assert isinstance(after, dict) and set(after) == set(warmed)
    assert all(p["cached_detection_indexes"] == 0 for p in after.values()), after

    call(server, "POST", f"/api/v1/catalogs/{catalog.slug}/reindex", token)  # a task for the django-q2 worker
    wait_until(lambda: applied_by(server, seq) - set(warmed), 60, "the task worker to apply the reset", server)
    assert len(applied_by(server, seq) - set(warmed)) == 1


def applied_by(server: Server, seq: int) -> set[int]:
    """The processes that logged applying reset `seq` answered by another."""
    lines = [line for line in server.output(tail=None).splitlines()
             if f"applied reset #{seq} answered by another process" in line]
    return {int(line.rsplit("pid ", 1)[1].rstrip(")")) for line in lines}
