"""An evaluation run records the ranking settings its catalog ranked with."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('retrieval', '0014_tuning_chunking'),
    ]

    operations = [
        migrations.AddField(
            model_name='evaluationrun',
            name='ranking',
            field=models.JSONField(blank=True, help_text="The catalog's ranking settings it ran with, as Catalog.ranking stores them (their difference from the defaults); null: a run from before runs recorded them.", null=True),
        ),
    ]
