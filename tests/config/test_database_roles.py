"""The app's database role (DESIGN.md: "The app connects as a role that cannot disable
triggers; migrations run as the owner"). The suite runs as that role (tests/conftest.py
makes the test database as the owner, then connects as the app), so every other test
proves the app works without more; these prove what it cannot do: be a superuser, own a
table, lift or go around the audit log's guard."""

from __future__ import annotations

import psycopg
import pytest
from django.conf import settings
from django.db import DatabaseError, connection, transaction

from catalog.audit.log import Actor, AuditEvent, audit_append
from catalog.models import AuditEntry

pytestmark = pytest.mark.django_db


def one(sql: str, params: list | None = None) -> tuple:
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])
        return cursor.fetchone()


def refused(statement: str) -> DatabaseError:
    """Run `statement` as the app; it must fail for want of a privilege (SQLSTATE 42501),
    not for another reason (the audit trigger's own refusal is P0001)."""
    with pytest.raises(DatabaseError) as error, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement)
    assert isinstance(error.value.__cause__, psycopg.errors.InsufficientPrivilege), error.value
    return error.value


def test_the_app_connects_as_a_plain_role_that_owns_nothing():
    role, = one("SELECT current_user")
    assert role == settings.LECTERN_DATABASE_APP_ROLE != settings.LECTERN_DATABASE_OWNER["USER"]
    attributes = one("SELECT rolsuper, rolcreaterole, rolcreatedb, rolreplication, rolbypassrls "
                     "FROM pg_roles WHERE rolname = current_user")
    assert attributes == (False, False, False, False, False)

    owned = one("SELECT count(*) FROM pg_class WHERE pg_has_role(current_user, relowner, 'USAGE')")
    assert owned == (0,), "the app's role owns (or is a member of the owner of) a table, index or sequence"
    assert one("SELECT count(*) FROM pg_proc WHERE pg_has_role(current_user, proowner, 'USAGE')") == (0,)
    assert one("SELECT pg_has_role(current_user, datdba, 'USAGE') FROM pg_database "
               "WHERE datname = current_database()") == (False,)
    assert one("SELECT has_schema_privilege(current_schema(), 'CREATE')") == (False,)


def test_the_app_may_append_to_the_audit_log_and_read_it_only():
    privileges = one("SELECT has_table_privilege('approvals_auditentry', 'SELECT'), "
                     "has_table_privilege('approvals_auditentry', 'INSERT'), "
                     "has_table_privilege('approvals_auditentry', 'UPDATE'), "
                     "has_table_privilege('approvals_auditentry', 'DELETE'), "
                     "has_table_privilege('approvals_auditentry', 'TRUNCATE'), "
                     "has_table_privilege('approvals_auditentry', 'TRIGGER')")
    assert privileges == (True, True, False, False, False, False)


@pytest.mark.parametrize("statement", [
    "SET session_replication_role = replica",
    "SET LOCAL session_replication_role = replica",
    "SELECT set_config('session_replication_role', 'replica', true)",
    "ALTER TABLE approvals_auditentry DISABLE TRIGGER approvals_audit_no_update_delete",
    "ALTER TABLE approvals_auditentry DISABLE TRIGGER USER",
    "ALTER TABLE approvals_auditentry DISABLE TRIGGER ALL",
    "DROP TRIGGER approvals_audit_no_truncate ON approvals_auditentry",
    "CREATE OR REPLACE FUNCTION approvals_audit_refuse() RETURNS trigger LANGUAGE plpgsql "
    "AS $$ BEGIN RETURN OLD; END $$",
    "ALTER TABLE approvals_auditentry OWNER TO CURRENT_USER",
    "UPDATE approvals_auditentry SET actor_name = 'mallory'",
    "DELETE FROM approvals_auditentry",
    "TRUNCATE approvals_auditentry",
    "CREATE TABLE approvals_auditentry_copy (seq bigint)",
])
def test_the_app_cannot_lift_or_go_around_the_audit_logs_guard(statement):
    entry = audit_append(AuditEvent("test.event", Actor.of(None, system="tests")))

    refused(statement)

    assert AuditEntry.objects.get().hash == entry.hash
    assert one("SELECT current_setting('session_replication_role')") == ("origin",)
