# Agents now live in catalog (catalog 0010): traces and selections point at
# catalog.Agent, and retrieval's own Agent leaves the state. State only: the foreign
# keys already reference the table, which keeps its name.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('catalog', '0010_agent'),
        ('retrieval', '0004_trace_retention'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.AlterField(
                    model_name='trace',
                    name='agent',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='traces', to='catalog.agent'),
                ),
                migrations.AlterField(
                    model_name='selection',
                    name='agent',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='selections', to='catalog.agent'),
                ),
                migrations.DeleteModel(
                    name='Agent',
                ),
            ],
        ),
    ]
