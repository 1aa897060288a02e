"""A catalog's ranking settings (catalog.ranking), stored as those that differ from the
defaults: every catalog starts with none, and ranks as before. The database keeps '{}'
as the default so that a web process still on the previous code can create catalogs
during a rolling deploy."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('catalog', '0024_index_run_skipped'),
    ]

    operations = [
        migrations.AddField(
            model_name='catalog',
            name='ranking',
            field=models.JSONField(blank=True, default=dict, help_text='Its ranking settings that differ from the defaults (catalog.ranking.RankingSettings).'),
        ),
        migrations.RunSQL("ALTER TABLE catalog_catalog ALTER COLUMN ranking SET DEFAULT '{}'::jsonb",
                          migrations.RunSQL.noop),
    ]
