"""Children that serve from the test database."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import psutil
from django.conf import settings
from django.db import connection


def child_database_url(*, owner: bool = False) -> str:
    """This test database as a DATABASE_URL (the app's role; `owner`: the schema owner's,
    as DATABASE_OWNER_URL), for a child process started with
    DJANGO_SETTINGS_MODULE=config.settings (embedded or external Postgres alike)."""
    s = {**connection.settings_dict, **(settings.LECTERN_DATABASE_OWNER if owner else {})}
    query = f"?host={quote(s['HOST'], safe='')}" + (f"&port={s['PORT']}" if s["PORT"] else "")
    return f"postgresql://{quote(s['USER'], safe='')}:{quote(s['PASSWORD'] or '', safe='')}@/{s['NAME']}{query}"


def child_env(**extra: str) -> dict[str, str]:
    """A child's environment on this test database; it anchors the audit chain in this
    test's checkpoint folder, never in var/ (whose checkpoints are the dev database's)."""
    return {"DJANGO_SETTINGS_MODULE": "config.settings", "DATABASE_URL": child_database_url(),
            "DATABASE_OWNER_URL": child_database_url(owner=True),
            "LECTERN_AUDIT_CHECKPOINT_DIR": str(settings.LECTERN_AUDIT_CHECKPOINT_DIR), **extra}


@contextmanager
def private_dir(prefix: str) -> Iterator[Path]:
    """A temporary folder outside pytest's tmp_path, for a server's data directory
    that outlives a test: another pytest session starting meanwhile prunes pytest's
    older numbered folders, and once took a running server's data from under it."""
    root = Path(tempfile.mkdtemp(prefix=f"lectern-{prefix}-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def qcluster(log: Path, **extra: str) -> Iterator[subprocess.Popen[bytes]]:
    """`manage.py qcluster` with production settings on the test database (and `extra`
    environment), its output in `log`; stopped with SIGTERM after, and any database
    backend it left behind ended (one would hold up the test's flush)."""
    app = f"lectern-test-worker-{uuid.uuid4().hex[:8]}"
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=settings.BASE_DIR, stdout=out,
                                   stderr=subprocess.STDOUT, env={**os.environ, **child_env(PGAPPNAME=app, **extra)})
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND application_name = %s", [app])


def gone(pid: int) -> bool:
    """The process has exited: its /proc entry is gone, or it is a zombie nobody reaps
    (an orphan's exit status waits for an init that may not collect it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def descendants(pid: int) -> list[int]:
    return [child.pid for child in psutil.Process(pid).children(recursive=True)]


def kill_survivors(pids: list[int]) -> None:
    """What a failing test left running (only the processes it started)."""
    for pid in pids:
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)
