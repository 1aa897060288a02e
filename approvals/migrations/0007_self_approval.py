"""Self-approval: a request records the person whose change it asks to approve
(`caused_by`), who may not decide it unless every policy covering the source says
`allow_self_approval`. Pending requests take the source's last changer now: the person
whose edit their content came from, as far as anything recorded it."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

BACKFILL = """
UPDATE approvals_approvalrequest r SET caused_by_id = s.changed_by_id
FROM catalog_referencesource s
WHERE s.id = r.source_id AND r.state = 'pending' AND r.fingerprint = s.fingerprint
"""


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0006_gate_indexes"),
        ("catalog", "0011_source_changed_by"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="approvalpolicy",
            name="allow_self_approval",
            field=models.BooleanField(
                default=False, help_text="The person whose change raised a request may decide it (only if every "
                                         "policy covering the source allows it; otherwise another reviewer decides)."),
        ),
        migrations.AddField(
            model_name="approvalrequest",
            name="caused_by",
            field=models.ForeignKey(
                blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+",
                to=settings.AUTH_USER_MODEL,
                help_text="The person whose change of the source it asks to approve (who last changed it when it "
                          "was raised); they never decide it unless the policies allow self-approval. Empty: no "
                          "person."),
        ),
        migrations.RunSQL(BACKFILL, reverse_sql=migrations.RunSQL.noop),
    ]
