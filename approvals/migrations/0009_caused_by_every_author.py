"""A request records every person whose change of the source's content it asks to
approve (catalog.sources.editors), not only the last person to change the source: the
one recorded so far becomes the first of them."""

from django.conf import settings
from django.db import migrations, models

COPY = """
INSERT INTO approvals_approvalrequest_caused_by (approvalrequest_id, user_id)
SELECT id, caused_by_person_id FROM approvals_approvalrequest WHERE caused_by_person_id IS NOT NULL
"""
# Back to one person: the lowest id, for want of an order among them.
UNCOPY = """
UPDATE approvals_approvalrequest r SET caused_by_person_id = (
    SELECT min(c.user_id) FROM approvals_approvalrequest_caused_by c WHERE c.approvalrequest_id = r.id)
"""


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0008_policy_disclose_matches"),
        ("catalog", "0015_content_editors"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RenameField(model_name="approvalrequest", old_name="caused_by", new_name="caused_by_person"),
        migrations.AddField(
            model_name="approvalrequest",
            name="caused_by",
            field=models.ManyToManyField(
                blank=True, related_name="+", to=settings.AUTH_USER_MODEL,
                help_text="The people whose changes of the source's content it asks to approve (its authors when "
                          "it was raised: catalog.sources.editors); none of them decides it unless the policies "
                          "allow self-approval. Empty: no person."),
        ),
        migrations.RunSQL(COPY, reverse_sql=UNCOPY),
        migrations.RemoveField(model_name="approvalrequest", name="caused_by_person"),
    ]
