"""An index run keeps the files it could not read, with why (a per-file error
on the run as on the source page). Earlier runs get an empty list; the database keeps
'[]' as the default so that a worker still on the previous code records its runs during a
rolling deploy."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('catalog', '0023_web_sources'),
    ]

    operations = [
        migrations.AddField(
            model_name='indexrun',
            name='skipped',
            field=models.JSONField(blank=True, default=list, help_text='The files it could not read, each [path, why] (a scanned PDF, an encrypted or corrupt file, a zip bomb, a submodule, a page that failed); the rest of the source indexed.'),
        ),
        migrations.RunSQL("ALTER TABLE catalog_indexrun ALTER COLUMN skipped SET DEFAULT '[]'::jsonb",
                          migrations.RunSQL.noop),
    ]
