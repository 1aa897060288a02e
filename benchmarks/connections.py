"""Database connections under concurrent load.

Starts a server in a child process whose connections carry their own application_name
(PGAPPNAME), drives concurrent clients at `POST /api/v1/search`, and counts the child's
backends in pg_stat_activity while they run and after they stop. Used by
`python -m benchmarks bench_connections` and `bench_topology` (docs/benchmarks.md) and by
the serving tests.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from django.db import connection

from config.database import default_database_url, owner_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
POLL_SECONDS = 0.05


def server_command(kind: str, address: str) -> list[str]:
    """`runserver` is Lectern's (config/management/commands/runserver.py); `stock-runserver`
    is Django's own, kept for the comparison; `serve` is what `make serve` runs."""
    python = sys.executable
    if kind == "runserver":
        return [python, "manage.py", "runserver", "--noreload", address]
    if kind == "stock-runserver":
        return [python, "-c", "import django; django.setup(); from django.core.management import call_command; "
                "from django.contrib.staticfiles.management.commands.runserver import Command; "
                f"call_command(Command(), {address!r}, use_reloader=False)"]
    if kind == "serve":
        return [python, "-m", "config.serve"]
    raise ValueError(f"unknown server {kind!r}: use runserver, stock-runserver or serve")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class ServerFailed(Exception):
    pass


@dataclass
class Server:
    """A server child on a loopback port; `env` is added to this process's environment."""

    kind: str
    env: dict[str, str] = field(default_factory=dict)
    log: Path | None = None
    port: int = field(default_factory=free_port)
    app: str = field(default_factory=lambda: f"lectern-serve-{uuid.uuid4().hex[:8]}")
    process: subprocess.Popen[bytes] | None = None

    def start(self, *, timeout: float = 120) -> Server:
        # The database named as production needs it named (config.database.server_database):
        # DATABASE_URL's, else the embedded server's, as the settings read them.
        database = {"DATABASE_URL": default_database_url(), "DATABASE_OWNER_URL": owner_database_url()}
        env = {**os.environ, **database, "PGAPPNAME": self.app, "LECTERN_BIND": f"127.0.0.1:{self.port}", **self.env}
        with open(self.log or os.devnull, "wb") as out:
            # A session of its own: TERM goes to the leader, which stops what it started.
            self.process = subprocess.Popen(server_command(self.kind, f"127.0.0.1:{self.port}"), cwd=BASE_DIR,
                                            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(self.answers, timeout, f"{self.kind} to answer on port {self.port}", self)
        return self

    @property
    def child(self) -> subprocess.Popen[bytes]:
        if self.process is None:
            raise ServerFailed(f"{self.kind} was never started")
        return self.process

    def answers(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def output(self, tail: int | None = 4000) -> str:
        text = self.log.read_text(errors="replace") if self.log and self.log.exists() else ""
        return text[-tail:] if tail else text

    def stop(self, *, timeout: float = 60) -> int:
        """TERM, as a service manager or Ctrl-C would; the exit status."""
        if self.child.poll() is None:
            self.child.terminate()
        try:
            return self.child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.child.pid, signal.SIGKILL)
            self.child.wait()
            raise ServerFailed(f"{self.kind} still running {timeout}s after TERM:\n{self.output()}") from None


def wait_until(predicate: Callable[[], object], timeout: float, what: str, server: Server | None = None) -> object:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if server is not None and server.child.poll() is not None:
            raise ServerFailed(f"{server.kind} exited {server.child.returncode} while waiting for {what}:\n"
                               f"{server.output()}")
        if time.monotonic() > deadline:
            raise ServerFailed(f"timed out after {timeout}s waiting for {what}")
        time.sleep(POLL_SECONDS)
    return value


def backends(app: str) -> int:
    """Connections with this application_name to this database."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND application_name = %s", [app])
        row = cursor.fetchone()
    return int(row[0]) if row else 0


@dataclass
class Load:
    requests: int = 0
    failures: list[str] = field(default_factory=list)
    peak_backends: int = 0
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)  # each answered request's, in order
    peaks: dict[str, int] = field(default_factory=dict)  # each counter's highest count
    read_from: dict[str, int] = field(default_factory=dict)  # answers per Lectern-Read-From value


def search_load(server: Server | Sequence[Server], *, token: str, catalog: str, clients: int, keepalive: bool,
                requests_per_client: int | None = None, seconds: float | None = None,
                counters: dict[str, Callable[[], int]] | None = None) -> Load:
    """`clients` threads searching at once, each for `requests_per_client` requests or
    `seconds`; without keep-alive every request comes on a new TCP connection (as from
    curl or a fresh HTTP client), the case that makes runserver start a thread per request.
    Several servers share the clients (client i asks server i mod n, as a load balancer
    spreads them). `counters` are sampled while the load runs (default: the server's
    backends in this database, which is also `peak_backends`)."""
    servers = [server] if isinstance(server, Server) else list(server)
    body = json.dumps({"catalog": catalog, "query": "how should we handle transient failures?", "top_k": 3,
                       "mode": "bm25"})
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    if not keepalive:
        headers["Connection"] = "close"
    load, lock = Load(), threading.Lock()
    started = time.monotonic()
    deadline = started + (seconds or float("inf"))

    def client(port: int) -> None:
        conn, done = None, 0
        while (requests_per_client is None or done < requests_per_client) and time.monotonic() < deadline:
            conn = conn if keepalive and conn is not None else http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            sent, read_from = time.perf_counter(), None
            try:
                conn.request("POST", "/api/v1/search", body, headers)
                response = conn.getresponse()
                response.read()
                read_from = response.headers.get("Lectern-Read-From")
                failure = None if response.status == 200 else f"HTTP {response.status}"
            except OSError as exc:
                failure, conn = f"{type(exc).__name__}: {exc}", None
            took = (time.perf_counter() - sent) * 1000
            done += 1
            with lock:
                load.requests += 1
                if failure:
                    load.failures.append(failure)
                else:
                    load.latencies_ms.append(took)
                if read_from:
                    load.read_from[read_from] = load.read_from.get(read_from, 0) + 1
            if not keepalive and conn is not None:
                conn.close()
        if conn is not None:
            conn.close()

    sample = counters if counters is not None else {"backends": lambda: sum(backends(each.app) for each in servers)}
    threads = [threading.Thread(target=client, args=(servers[i % len(servers)].port,), daemon=True)
               for i in range(clients)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        for name, count in sample.items():
            load.peaks[name] = max(load.peaks.get(name, 0), count())
        time.sleep(POLL_SECONDS)
    load.peak_backends = load.peaks.get("backends", 0)
    load.seconds = time.monotonic() - started
    return load
