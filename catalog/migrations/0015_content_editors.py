"""Who is answerable for a source's content (self-approval and four eyes): every person
who changed it since the content served was read, not only the last person to change
the source. What was recorded before is only `changed_by`, the last person to change
it at all: they are taken as an author of the content served and of a pending edit (the
next reindex makes them a served author), so nobody who may have written it decides on
it; those before them were never recorded."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


BACKFILL = """
INSERT INTO catalog_contenteditor (source_id, user_id, pending, edit)
SELECT s.id, s.changed_by_id, p.pending, 0
FROM catalog_referencesource s CROSS JOIN (VALUES (true), (false)) AS p(pending)
WHERE s.changed_by_id IS NOT NULL
"""


class Migration(migrations.Migration):

    dependencies = [
        ('catalog', '0014_document_chunking'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='referencesource',
            name='content_edits',
            field=models.PositiveBigIntegerField(default=0, help_text='How many times its content was changed: a reindex reads it with the content, so it knows whose edits it switches in (ContentEditor).'),
        ),
        migrations.CreateModel(
            name='ContentEditor',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('pending', models.BooleanField(help_text='Their edit is not in the content served yet.')),
                ('edit', models.PositiveBigIntegerField(help_text="The source's content_edits after their last change.")),
                ('source', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='content_editors', to='catalog.referencesource')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['source', 'user'],
                'constraints': [models.UniqueConstraint(fields=('source', 'user', 'pending'), name='content_editor_unique')],
            },
        ),
        migrations.RunSQL(BACKFILL, reverse_sql=migrations.RunSQL.noop),
    ]
