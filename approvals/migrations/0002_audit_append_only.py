"""The audit log is append-only in the database itself: a trigger refuses UPDATE and
DELETE of any row and TRUNCATE of the table, whoever asks (the ORM, the admin, psql).
A superuser or the table's owner can still disable the trigger; the hash chain is what
shows such an edit afterwards (`manage.py audit_verify`)."""

from django.db import migrations

FORWARD = """
CREATE FUNCTION approvals_audit_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only: % on % refused', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'P0001', HINT = 'audit entries are never changed or removed';
END
$$;
CREATE TRIGGER approvals_audit_no_update_delete BEFORE UPDATE OR DELETE ON approvals_auditentry
    FOR EACH ROW EXECUTE FUNCTION approvals_audit_refuse();
CREATE TRIGGER approvals_audit_no_truncate BEFORE TRUNCATE ON approvals_auditentry
    FOR EACH STATEMENT EXECUTE FUNCTION approvals_audit_refuse();
"""

BACKWARD = """
DROP TRIGGER approvals_audit_no_truncate ON approvals_auditentry;
DROP TRIGGER approvals_audit_no_update_delete ON approvals_auditentry;
DROP FUNCTION approvals_audit_refuse();
"""


class Migration(migrations.Migration):

    dependencies = [
        ("approvals", "0001_initial"),
    ]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
