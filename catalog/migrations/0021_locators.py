"""Chunks and documents say where they were read from (catalog.sources.locators).

Existing rows get an empty locator: adding a column with a constant default rewrites no
partition, whatever the catalog's size. The database keeps '{}' as the default, so a
web process or worker still on the previous code inserts rows during a rolling deploy.
A document gets its locator when it is next cut: catalog.indexing.chunker's version
moved with this migration, so the next scan re-cuts every document (its vectors come
back from the embedding cache)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('catalog', '0020_auditentry_from_approvals'),
    ]

    operations = [
        migrations.AddField(
            model_name='chunk',
            name='locator',
            field=models.JSONField(blank=True, default=dict, help_text="Where it sits, for citations: its document's locator and its lines, pages or slides and heading path (catalog.sources.locators); empty: cut before chunks were located."),
        ),
        migrations.AddField(
            model_name='document',
            name='locator',
            field=models.JSONField(blank=True, default=dict, help_text="Where it was read from, for citations (catalog.sources.locators): its format, and a git file's commit and web link or a web page's URL."),
        ),
        migrations.RunSQL(
            "ALTER TABLE catalog_chunk ALTER COLUMN locator SET DEFAULT '{}'::jsonb; "
            "ALTER TABLE catalog_document ALTER COLUMN locator SET DEFAULT '{}'::jsonb",
            migrations.RunSQL.noop,
        ),
    ]
