"""The two database roles at work (docs/subsystems/governance.md, "Database roles").

The app connects as a role that owns nothing: it reads and writes rows, appends to the
audit log and reads it, and can neither change nor remove an audit entry, disable a
trigger, set session_replication_role, nor create a table. The schema's owner runs the
migrations (`manage.py migrate`, config/management/commands/migrate.py, switches the
connection to it) and, after them, grants the app's role what it needs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

# Rows the app only appends to and reads: the audit log (approvals migration 0002 adds
# the triggers, which only an owner could disable); Django's record of migrations.
APPEND_ONLY_TABLES = ("approvals_auditentry",)
READ_ONLY_TABLES = ("django_migrations",)
# What the app may do to a catalog's partitions, which only their owner could do itself
# (catalog migration 0017, SECURITY DEFINER): empty them with the catalog, and defer and
# build a bulk load's indexes (catalog.indexing.bulk). No other function is the app's.
APP_FUNCTIONS = ("lectern_catalog_partitions_empty(bigint)", "lectern_catalog_indexes_defer(bigint)",
                 "lectern_catalog_indexes_build(bigint)")


@contextmanager
def connected_as_owner(alias: str = "default") -> Iterator[BaseDatabaseWrapper]:
    """The alias's connection, reconnected as the schema's owner for the block (the
    settings' USER and PASSWORD swapped, nothing else), and as before after it."""
    connection = connections[alias]
    before = {key: connection.settings_dict[key] for key in ("USER", "PASSWORD")}
    connection.close()
    connection.settings_dict.update(settings.LECTERN_DATABASE_OWNER)
    try:
        yield connection
    finally:
        connection.close()
        connection.settings_dict.update(before)


def app_role_grant(*, connection: BaseDatabaseWrapper) -> bool:
    """As the owner, after migrating: the app's role may use every row of every table and
    sequence, but only read and append to the audit log and only read the migrations.
    No default privileges: a table made outside `migrate` (say, the audit log dropped
    and made again by hand) stays closed to the app until the next migrate grants it,
    rather than open to UPDATE and DELETE. False, granting nothing, when the app
    connects as the owner itself (one DATABASE_URL: config.checks warns)."""
    app = settings.LECTERN_DATABASE_APP_ROLE
    if not app or app == settings.LECTERN_DATABASE_OWNER["USER"]:
        return False
    quote = connection.ops.quote_name
    role = quote(app)
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_schema()")
        schema = quote(cursor.fetchone()[0])
        # those the schema has: a database migrated back before them (the migration tests) has none
        cursor.execute("SELECT f FROM unnest(%s::text[]) f WHERE to_regprocedure(f) IS NOT NULL", [list(APP_FUNCTIONS)])
        functions = [row[0] for row in cursor.fetchall()]
        for statement in (
            f"GRANT USAGE ON SCHEMA {schema} TO {role}",
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}",
            f"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}",
            *(f"REVOKE UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON {quote(t)} FROM {role}"
              for t in APPEND_ONLY_TABLES),
            *(f"REVOKE INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON {quote(t)} FROM {role}"
              for t in READ_ONLY_TABLES),
            *(f"GRANT EXECUTE ON FUNCTION {schema}.{f} TO {role}" for f in functions),
        ):
            cursor.execute(statement)
    return True
