"""Lectern beyond one machine, on one machine: a primary, its streaming replica, Redis,
and `make serve` programs on them, configured only by the environment, as a deployment
is (docs/deploying.md). Used by `python -m benchmarks bench_topology` and by the
topology tests (tests/topology.py).

The cluster has a database of its own (a private embedded Postgres under a temporary
folder, migrated by `manage.py migrate` as a deployment does), never the checkout's: its
replica is a copy of the whole server. Redis is Debian's `redis-server` (`make redis`).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.connections import Server, wait_until
from config import embedded_pg

BASE_DIR = Path(__file__).resolve().parent.parent
DATABASE = "lectern"
SAFETY_S = 120


class RedisMissing(Exception):
    pass


def redis_server() -> str:
    found = shutil.which("redis-server")
    if found is None:
        raise RedisMissing("redis-server is not installed: `make redis` installs Debian's (make test does)")
    return found


@dataclass
class Cluster:
    """A primary, its replica and a Redis server under `root`."""

    root: Path
    secret_key: str = field(default_factory=lambda: secrets.token_urlsafe(50))
    redis: subprocess.Popen[bytes] | None = None

    @property
    def primary(self) -> Path:
        return self.root / "primary"

    @property
    def replica(self) -> Path:
        return self.root / "replica"

    @property
    def redis_socket(self) -> Path:
        return self.root / "redis.sock"

    def url(self, server: Path, role: str = embedded_pg.APP_ROLE) -> str:
        return embedded_pg.known_uri(server, DATABASE, role=role)

    def env(self, **extra: str) -> dict[str, str]:
        """A deployment's environment: the primary (the app's role and the owner's), the
        replica, Redis, one SECRET_KEY for every process."""
        return {"DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "0", "SECRET_KEY": self.secret_key,
                "DATABASE_URL": self.url(self.primary),
                "DATABASE_OWNER_URL": self.url(self.primary, embedded_pg.OWNER_ROLE),
                "DATABASE_REPLICA_URL": self.url(self.replica), "REDIS_URL": f"unix://{self.redis_socket}",
                "LECTERN_AUDIT_CHECKPOINT_DIR": str(self.root / "audit-checkpoints"),
                "LECTERN_DECISION_DIR": str(self.root / "decisions"), **extra}

    def superuser(self, server: Path) -> psycopg.Connection[Any]:
        """A connection to `server` as its superuser (replay control, lock barriers)."""
        return psycopg.connect(self.url(server, embedded_pg.SUPERUSER), autocommit=True)

    def server(self, name: str, **extra: str) -> Server:
        """`make serve`'s program (gunicorn and a qcluster) on this cluster, not started;
        `extra`: more environment (LECTERN_WEB_WORKERS, ...)."""
        env = self.env(LECTERN_STATIC_ROOT=str(self.root / f"static-{name}"), **extra)
        return Server("serve", env=env, log=self.root / f"{name}.log")

    def start(self, redis: str) -> None:
        """Steps: the primary, which notices a killed client within a second (so a dead
        worker's backend ends, and its locks with it, instead of finishing a statement
        nobody waits for); migrated as a deployment is; its replica; Redis on a socket."""
        embedded_pg.ensure_running(self.primary, DATABASE)
        with self.superuser(self.primary) as conn:
            conn.execute("ALTER SYSTEM SET client_connection_check_interval = '1s'")
            conn.execute("SELECT pg_reload_conf()")
        migrated = subprocess.run([sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"], cwd=BASE_DIR,
                                  env={**os.environ, **self.env()}, capture_output=True, text=True, timeout=SAFETY_S)
        if migrated.returncode != 0:
            raise RuntimeError(f"migrate failed:\n{migrated.stdout}{migrated.stderr}")
        embedded_pg.replica_ensure(self.primary, self.replica, DATABASE)
        self.redis = subprocess.Popen([redis, "--port", "0", "--unixsocket", str(self.redis_socket), "--save", "",
                                       "--appendonly", "no"], stdout=subprocess.DEVNULL)
        wait_until(self.redis_socket.exists, SAFETY_S, "redis-server to listen")

    def stop(self) -> None:
        if self.redis is not None:
            self.redis.terminate()
            self.redis.wait(timeout=SAFETY_S)
        embedded_pg.stop(self.replica)
        embedded_pg.stop(self.primary)


@contextmanager
def cluster() -> Iterator[Cluster]:
    """A started cluster (Cluster.start), stopped and removed after."""
    redis = redis_server()
    made = Cluster(Path(tempfile.mkdtemp(prefix="lectern-topology-")))
    try:
        made.start(redis)
        yield made
    finally:
        made.stop()
        shutil.rmtree(made.root, ignore_errors=True)


def primary_lsn(cluster: Cluster) -> str:
    with cluster.superuser(cluster.primary) as conn:
        row = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def replayed(cluster: Cluster, lsn: str) -> bool:
    """Whether the replica has replayed the primary's WAL up to `lsn`."""
    with cluster.superuser(cluster.replica) as conn:
        row = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [lsn]).fetchone()
    return bool(row and row[0])


def wait_for_replay(cluster: Cluster) -> None:
    """Until the replica holds everything the primary has written by now."""
    lsn = primary_lsn(cluster)
    wait_until(lambda: replayed(cluster, lsn), SAFETY_S, f"the replica to replay up to {lsn}")


@contextmanager
def replay_paused(cluster: Cluster) -> Iterator[None]:
    """The replica stops applying the primary's WAL in the block (it keeps receiving it):
    a replica as far behind as the test likes, for as long as it likes."""
    with cluster.superuser(cluster.replica) as conn:
        conn.execute("SELECT pg_wal_replay_pause()")
        wait_until(lambda: conn.execute("SELECT pg_get_wal_replay_pause_state()").fetchone() == ("paused",),
                   SAFETY_S, "the replica's replay to pause")
        try:
            yield
        finally:
            conn.execute("SELECT pg_wal_replay_resume()")


