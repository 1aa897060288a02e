"""Children that serve from the test database."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from django.db import connection


def child_database_url() -> str:
    """This test database as a DATABASE_URL, for a child process started with
    DJANGO_SETTINGS_MODULE=config.settings (embedded or external Postgres alike)."""
    s = connection.settings_dict
    query = f"?host={quote(s['HOST'], safe='')}" + (f"&port={s['PORT']}" if s["PORT"] else "")
    return f"postgresql://{quote(s['USER'], safe='')}:{quote(s['PASSWORD'] or '', safe='')}@/{s['NAME']}{query}"


def child_env(**extra: str) -> dict[str, str]:
    return {"DJANGO_SETTINGS_MODULE": "config.settings", "DATABASE_URL": child_database_url(), **extra}


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
