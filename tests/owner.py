"""The schema owner's connection, for what only the owner may do in tests: the
transactional tests' flush (tests/conftest.py) and tampering with the audit log to prove
that audit_verify sees it. The app's own connection can do neither
(tests/config/test_database_roles.py)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from django.conf import settings
from django.db import connections


@contextmanager
def owner_connection(alias: str = "default") -> Iterator[psycopg.Connection]:
    """A psycopg connection of its own to the alias's database (the test database), as
    the owner. It sees only what the app's connection committed: use it from
    transactional tests."""
    database = connections[alias].settings_dict
    owner = settings.LECTERN_DATABASE_OWNER
    params = {"dbname": database["NAME"], "user": owner["USER"], "password": owner["PASSWORD"],
              "host": database["HOST"], "port": database["PORT"], **database["OPTIONS"]}
    with psycopg.connect(**{key: value for key, value in params.items() if value not in ("", None)}) as conn:
        yield conn


def owner_execute(statements: Sequence[tuple[str, Sequence[Any]]], alias: str = "default") -> None:
    """Run `statements` ((sql, params) pairs) as the owner, in one transaction."""
    with owner_connection(alias) as conn, conn.transaction(), conn.cursor() as cursor:
        for sql, params in statements:
            cursor.execute(sql, params)


def audit_tamper(sql: str, params: Sequence[Any] = ()) -> None:
    """Edit the audit log as its owner could (a superuser likewise): trigger off, edit,
    trigger on, in one transaction. What audit_verify and the checkpoints must catch."""
    owner_execute([("ALTER TABLE approvals_auditentry DISABLE TRIGGER USER", ()), (sql, params),
                   ("ALTER TABLE approvals_auditentry ENABLE TRIGGER USER", ())])
