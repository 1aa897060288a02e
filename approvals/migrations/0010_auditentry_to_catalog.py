"""The audit log moves to catalog, the floor every app stands on, so each service
writes its entries inline (catalog's own writes too). Only Django's idea of the model
moves: the table keeps its name, its rows and the append-only trigger (0002)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("approvals", "0009_caused_by_every_author"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel(name="AuditEntry")]),
    ]
