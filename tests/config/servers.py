"""Children that serve from the test database."""

from __future__ import annotations

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
