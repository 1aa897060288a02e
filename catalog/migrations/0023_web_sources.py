"""Web-site sources (catalog.sources.website): the kind, and how deep and how wide a
crawl goes. The database keeps the two limits' defaults, so a web process or worker still
on the previous code creates sources during a rolling deploy (as 0021 keeps '{}')."""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('catalog', '0022_git_sources'),
    ]

    operations = [
        migrations.AddField(
            model_name='referencesource',
            name='max_depth',
            field=models.PositiveSmallIntegerField(default=3, help_text="How many links from its start page a web source's crawl follows (0: the start page alone).", validators=[django.core.validators.MaxValueValidator(10)]),
        ),
        migrations.AddField(
            model_name='referencesource',
            name='max_pages',
            field=models.PositiveIntegerField(default=200, help_text="The most pages a web source's crawl requests.", validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(10000)]),
        ),
        migrations.AlterField(
            model_name='referencesource',
            name='exclude',
            field=models.TextField(blank=True, help_text='Globs of the files a git source leaves out (of the URL paths a web source does not crawl), one per line.'),
        ),
        migrations.AlterField(
            model_name='referencesource',
            name='include',
            field=models.TextField(blank=True, help_text='Globs of the files a git source indexes (of the URL paths a web source crawls), one per line (** matches folders); blank: every file Lectern reads.'),
        ),
        migrations.AlterField(
            model_name='referencesource',
            name='kind',
            field=models.CharField(choices=[('glob', 'files matching a glob under a source root'), ('upload', 'uploaded files'), ('inline', 'inline text'), ('git', 'git repository'), ('web', 'web site')], default='glob', max_length=16),
        ),
        migrations.RunSQL(
            "ALTER TABLE catalog_referencesource ALTER COLUMN max_depth SET DEFAULT 3, "
            "ALTER COLUMN max_pages SET DEFAULT 200",
            migrations.RunSQL.noop,
        ),
    ]
