"""The audit log's model moves here from approvals (its 0010): state only, the table
keeps its name, rows and append-only trigger. The content type follows, so the view
permission the roles hold on audit entries (approvals 0003) still names the model."""

from django.db import migrations, models


def content_type_follows(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    if not ContentType.objects.filter(app_label="catalog", model="auditentry").exists():
        ContentType.objects.filter(app_label="approvals", model="auditentry").update(app_label="catalog")


def content_type_returns(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    if not ContentType.objects.filter(app_label="approvals", model="auditentry").exists():
        ContentType.objects.filter(app_label="catalog", model="auditentry").update(app_label="approvals")


class Migration(migrations.Migration):

    dependencies = [
        ("catalog", "0019_drop_term_postings"),
        ("approvals", "0010_auditentry_to_catalog"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.CreateModel(
                name="AuditEntry",
                fields=[
                    ("seq", models.BigIntegerField(primary_key=True, serialize=False)),
                    ("at", models.DateTimeField()),
                    ("actor_kind", models.CharField(choices=[("user", "User"), ("agent", "Agent"), ("system", "System"),
                                                             ("channel", "Channel")], max_length=8)),
                    ("actor_id", models.BigIntegerField(blank=True, help_text="The user's or agent's id.", null=True)),
                    ("actor_name", models.CharField(help_text="Username, agent name, system task or channel.",
                                                    max_length=150)),
                    ("action", models.CharField(max_length=40)),
                    ("request_id", models.BigIntegerField(blank=True, null=True)),
                    ("policy_id", models.BigIntegerField(blank=True, null=True)),
                    ("source_id", models.BigIntegerField(blank=True, null=True)),
                    ("agent_id", models.BigIntegerField(blank=True, null=True)),
                    ("fingerprint", models.CharField(blank=True, max_length=64)),
                    ("payload", models.JSONField(default=dict)),
                    ("prev_hash", models.CharField(max_length=64)),
                    ("hash", models.CharField(max_length=64, unique=True)),
                ],
                options={
                    "verbose_name_plural": "audit entries",
                    "db_table": "approvals_auditentry",
                    "ordering": ["seq"],
                    "indexes": [models.Index(fields=["action", "seq"], name="audit_action"),
                                models.Index(fields=["request_id"], name="audit_request"),
                                models.Index(fields=["source_id"], name="audit_source"),
                                models.Index(fields=["agent_id"], name="audit_agent"),
                                models.Index(fields=["at"], name="audit_at")],
                },
            ),
        ]),
        migrations.RunPython(content_type_follows, content_type_returns),
    ]
