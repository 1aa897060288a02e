"""The API in real processes: Postgres going away and coming back, and a chunked body.

A throwaway embedded Postgres in a tmp dir (`python -m config.embedded_pg start`, i.e.
ensure_running()), migrated as its owner role; the app, as its app role,
served by `manage.py runserver` subprocesses against it, one with DEBUG on (as `make
run` serves it) and one with DEBUG off. The postmaster is SIGKILLed: every API request
and the health endpoint answer a JSON 503 with Retry-After (a plain 503 page outside
/api/), and the server logs one line per request, no traceback. Postgres restarted (its
stale postmaster.pid removed): the next requests answer 200 again. Every wait is on a
condition, bounded by a deadline. A body sent chunked (no Content-Length), which the
server would read as empty, is refused with a JSON 411.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from config.api_errors import RETRY_AFTER_S
from tests.config.servers import private_dir

BASE_DIR = Path(__file__).resolve().parents[2]
DEADLINE_S = 60.0
PROBE_SETUP = """
from catalog.agents import agent_create
from catalog.models import Catalog
catalog = Catalog.objects.create(slug="probe", name="Probe")
_, token = agent_create(name="probe", catalogs=[catalog])
print(token)
"""


def wait_until(condition, what: str):
    deadline = time.monotonic() + DEADLINE_S
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.05)
    return result


def manage_py(*args: str, env: dict) -> str:
    done = subprocess.run([sys.executable, *args], cwd=BASE_DIR, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def embedded_pg(action: str, pgdata: Path) -> str:
    """`python -m config.embedded_pg ACTION` (ensure_running, stop) on `pgdata`, in its own
    process as `make` runs it: this process keeps no server handle to clean up."""
    return manage_py("-m", "config.embedded_pg", action, env={**os.environ, "LECTERN_PGDATA": str(pgdata)}).strip()


@dataclass
class Postgres:
    pgdata: Path
    url: str  # the app's role
    owner_url: str = ""  # the schema owner's, which migrate connects as

    def postmaster(self) -> psutil.Process:
        return psutil.Process(int((self.pgdata / "postmaster.pid").read_text().splitlines()[0]))

    def crash(self) -> None:
        """SIGKILL the postmaster; return once its backends have noticed and exited
        (a new postmaster will not start beside them)."""
        postmaster = self.postmaster()
        children = postmaster.children(recursive=True)
        os.kill(postmaster.pid, signal.SIGKILL)
        _, alive = psutil.wait_procs([postmaster, *children], timeout=DEADLINE_S)
        assert not alive, f"postgres processes outlived their postmaster: {alive}"

    def restart(self) -> None:
        assert (self.pgdata / "postmaster.pid").exists(), "precondition: the crash left its pid file"
        assert embedded_pg("start", self.pgdata) == self.url, "the server must come back where the app looks"


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    with private_dir("pg-down") as root:
        pgdata = root / "pgdata"
        server = Postgres(pgdata, embedded_pg("start", pgdata), embedded_pg("owner-url", pgdata))
        try:
            yield server
        finally:
            embedded_pg("stop", pgdata)


@dataclass
class App:
    url: str
    log: Path
    token: str

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict | None = None) -> tuple[int, dict, bytes]:
        request = urllib.request.Request(self.url + path, data=body, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read()

    def search(self) -> tuple[int, dict, bytes]:
        return self.request("POST", "/api/v1/search", b'{"catalog": "probe", "query": "anything"}',
                            {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def env(postgres, tmp_path_factory) -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DATABASE_URL": postgres.url,
           "DATABASE_OWNER_URL": postgres.owner_url,
           "SECRET_KEY": "test-only-" + "x" * 50, "LECTERN_EMBEDDING_MODEL": "none", "PYTHONUNBUFFERED": "1"}
    manage_py("manage.py", "migrate", "--no-input", "-v", "0", env=env)
    return env


@pytest.fixture(scope="module")
def token(env) -> str:
    return manage_py("manage.py", "shell", "-v", "0", "-c", PROBE_SETUP, env=env).strip().splitlines()[-1]


@pytest.fixture(scope="module", params=["0", "1"], ids=["debug-off", "debug-on"])
def app(request, env, token, tmp_path_factory) -> Iterator[App]:
    port = free_port()
    log = tmp_path_factory.mktemp("app") / "server.log"
    with log.open("w") as out:
        server = subprocess.Popen([sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
                                  cwd=BASE_DIR, env={**env, "DEBUG": request.param}, stdout=out,
                                  stderr=subprocess.STDOUT)
    app = App(f"http://127.0.0.1:{port}", log, token)
    try:
        wait_until(lambda: _answers(app) or server.poll() is not None, "the app server answers")
        assert server.poll() is None, log.read_text()
        yield app
    finally:
        server.terminate()
        server.wait(timeout=DEADLINE_S)


def _answers(app: App) -> bool:
    try:
        app.request("GET", "/api/v1/health")
    except OSError:
        return False
    return True


def error_code(body: bytes) -> str:
    return json.loads(body)["error"]["code"]


def test_the_api_answers_503_while_postgres_is_down_and_200_once_it_is_back(app, postgres):
    assert app.search()[0] == 200
    assert app.request("GET", "/api/v1/health")[0] == 200
    served_before = len(app.log.read_text())

    postgres.crash()
    try:
        search = app.search()
        health = app.request("GET", "/api/v1/health")
        bogus_token = app.request("GET", "/api/v1/catalogs", headers={"Authorization": "Bearer lct_x"})
        page = app.request("GET", "/admin/", headers={"Cookie": "sessionid=abcdefghijklmnopqrstuvwxyz012345"})
    finally:
        postgres.restart()

    for status, headers, body in (search, bogus_token):
        assert (status, headers["Content-Type"], error_code(body)) == (503, "application/json", "database_unavailable")
        assert headers["Retry-After"] == str(RETRY_AFTER_S)
    status, headers, body = health
    assert (status, headers["Content-Type"], headers["Retry-After"]) == (503, "application/json", str(RETRY_AFTER_S))
    assert b'"database":{"up":false}' in body
    status, headers, body = page
    assert (status, headers["Retry-After"]) == (503, str(RETRY_AFTER_S))
    assert headers["Content-Type"].startswith("text/html") and b"Service unavailable" in body and len(body) < 500
    outage_log = app.log.read_text()[served_before:]
    assert outage_log.count("database unavailable, answered 503") == 3  # health answers itself
    assert "Traceback" not in outage_log

    assert app.search()[0] == 200
    status, _, body = app.request("GET", "/api/v1/health")
    assert status == 200 and b'"database":{"up":true' in body


def test_a_chunked_body_is_refused_with_a_json_411(app):
    body = b'{"catalog": "probe", "query": "anything"}'
    port = int(app.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(b"POST /api/v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                     b"Authorization: Bearer " + app.token.encode() + b"\r\n"
                     b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                     + f"{len(body):x}".encode() + b"\r\n" + body + b"\r\n0\r\n\r\n")
        answer = b"".join(iter(lambda: conn.recv(65536), b""))

    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 411"), head
    assert b"Content-Type: application/json" in head
    assert error_code(payload) == "length_required"

