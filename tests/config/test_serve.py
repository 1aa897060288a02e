"""The production server: what `make serve` runs (python -m config.serve), in a real
process on the test database, configured as a deployment behind a TLS proxy.

gunicorn answers a real search, WhiteNoise serves the collected static files, headers
and cookies are those of an https deployment, and TERM stops the server together with
its django-q2 cluster, leaving no backend behind. `check --deploy` is clean in that
configuration, and the supervisor stops both processes when either one exits.
"""

from __future__ import annotations

import gzip
import http.client
import json
import os
import re
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.connections import Server, backends, wait_until
from tests.config.servers import child_env

BASE_DIR = Path(__file__).resolve().parents[2]
HTTPS = {"X-Forwarded-Proto": "https"}  # as the TLS-terminating proxy sets it


def production_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    # A deployment keeps its audit checkpoints outside var/ (else `check` warns: lectern.W002).
    env = child_env(DEBUG="0", SECRET_KEY=secrets.token_urlsafe(50), LECTERN_HTTPS="1",
                    ALLOWED_HOSTS="127.0.0.1,lectern.example.com", LECTERN_STATIC_ROOT=str(tmp_path / "static"),
                    LECTERN_AUDIT_CHECKPOINT_DIR=str(tmp_path / "audit-checkpoints"),
                    LECTERN_WEB_WORKERS="1", LECTERN_WEB_THREADS="2", LECTERN_Q_WORKERS="1")
    return {**env, **extra}


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=BASE_DIR, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=300)


def request(server: Server, method: str, path: str, *, body: str | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, http.client.HTTPMessage, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        conn.request(method, path, body, headers or {})
        response = conn.getresponse()
        return response.status, response.headers, response.read()
    finally:
        conn.close()


# --- configuration -------------------------------------------------------------------------


def test_check_deploy_is_clean_in_the_production_configuration(db, tmp_path):
    result = manage(production_env(tmp_path), "check", "--deploy", "--fail-level", "WARNING")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_check_deploy_warns_when_not_told_about_https(db, tmp_path):
    env = production_env(tmp_path)
    env.pop("LECTERN_HTTPS")

    result = manage(env, "check", "--deploy", "--fail-level", "WARNING")

    assert result.returncode == 1
    for code in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert code in result.stderr


# --- the server --------------------------------------------------------------------------


@pytest.fixture
def production_server(transactional_db, tmp_path):
    server = Server("serve", env=production_env(tmp_path), log=tmp_path / "serve.log")
    try:
        yield server.start(timeout=180)
    finally:
        if server.process is not None and server.process.poll() is None:
            server.stop()


def test_the_production_server_searches_serves_static_files_and_stops_with_its_worker(
        production_server, tmp_path, indexed_catalog, agent_token):
    server = production_server
    token = agent_token("prod-agent", [indexed_catalog])

    status, headers, body = request(server, "POST", "/api/v1/search", body=json.dumps(
        {"catalog": indexed_catalog.slug, "query": "retry transient failures with backoff", "top_k": 2}), headers={
        **HTTPS, "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    assert status == 200, body
    assert json.loads(body)["results"][0]["document_id"] == "retries.md"
    assert headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    assert (headers["X-Content-Type-Options"], headers["X-Frame-Options"], headers["Referrer-Policy"],
            headers["Cross-Origin-Opener-Policy"]) == ("nosniff", "DENY", "same-origin", "same-origin")

    status, headers, _ = request(server, "GET", "/api/v1/status")  # plain http, as if past the proxy
    assert (status, headers["Location"]) == (301, f"https://127.0.0.1:{server.port}/api/v1/status")

    status, headers, page = request(server, "GET", "/accounts/login/", headers=HTTPS)
    assert status == 200
    assert "; Secure" in headers["Set-Cookie"] and headers["Set-Cookie"].startswith("csrftoken=")
    hashed = json.loads((tmp_path / "static" / "staticfiles.json").read_text())["paths"]["css/lectern.css"]
    assert f"/static/{hashed}".encode() in page  # templates name the collected, hashed file

    status, headers, css = request(server, "GET", f"/static/{hashed}", headers={**HTTPS, "Accept-Encoding": "gzip"})
    assert (status, headers["Content-Encoding"]) == (200, "gzip")
    assert "immutable" in headers["Cache-Control"]
    assert gzip.decompress(css) == (BASE_DIR / "static" / "css" / "lectern.css").read_bytes()

    status, _, _ = request(server, "GET", "/api/v1/memory/export?user_id=steve%40example.com",
                           headers={**HTTPS, "Authorization": f"Bearer {token}"})
    assert status == 200
    wait_until(lambda: "/api/v1/memory/export" in server.output(tail=None), 30, "the access log line", server)
    assert "steve" not in server.output(tail=None)  # the path is logged, not the query with the end user's id

    wait_until(lambda: re.search(r"Q Cluster .+ running\.", server.output(tail=None)), 60, "the worker to run",
               server)  # started alongside
    assert server.stop() == 0
    output = server.output(tail=None)
    assert "Shutting down: Master" in output and "has stopped" in output
    wait_until(lambda: backends(server.app) == 0, 30, "the server's backends to close")


# --- the supervisor ------------------------------------------------------------------------


def supervisor(commands: dict[str, list[str]]) -> subprocess.Popen:
    code = f"import sys; from config.serve import supervise; sys.exit(supervise({commands!r}))"
    return subprocess.Popen([sys.executable, "-c", code], cwd=BASE_DIR)


def sleeper(pid_file: Path) -> list[str]:
    return [sys.executable, "-c", f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
                                  "time.sleep(600)"]


def started_pid(pid_file: Path) -> int:
    wait_until(lambda: pid_file.exists() and pid_file.read_text(), 30, f"{pid_file.name} to be written")
    return int(pid_file.read_text())


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_supervisor_stops_both_on_term(tmp_path):
    running = supervisor({"web": sleeper(tmp_path / "web"), "worker": sleeper(tmp_path / "worker")})
    pids = [started_pid(tmp_path / "web"), started_pid(tmp_path / "worker")]

    running.send_signal(signal.SIGTERM)

    assert running.wait(timeout=30) == 0
    assert all(gone(pid) for pid in pids)


def test_the_supervisor_stops_the_other_when_one_exits(tmp_path):
    running = supervisor({"web": sleeper(tmp_path / "web"), "worker": [sys.executable, "-c", "raise SystemExit(3)"]})
    web = started_pid(tmp_path / "web")

    assert running.wait(timeout=30) == 1
    assert gone(web)
