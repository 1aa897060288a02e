# Agents move from retrieval to catalog, the ground floor every layer asks who may read
# what. Nothing moves in the database: the table keeps its name (retrieval_agent, and
# its many-to-many tables retrieval_agent_catalogs / retrieval_agent_preselected), so
# the model only enters catalog's state here, and leaves retrieval's in retrieval 0005.
# Its content type moves with it, so permissions granted on agents and admin log
# entries keep pointing at it.

import django.core.validators
from django.db import migrations, models


def content_type_move(apps, schema_editor, *, old, new):
    ContentType = apps.get_model("contenttypes", "ContentType")
    if not ContentType.objects.filter(app_label=new, model="agent").exists():
        ContentType.objects.filter(app_label=old, model="agent").update(app_label=new)


def forwards(apps, schema_editor):
    content_type_move(apps, schema_editor, old="retrieval", new="catalog")


def backwards(apps, schema_editor):
    content_type_move(apps, schema_editor, old="catalog", new="retrieval")


class Migration(migrations.Migration):

    dependencies = [
        ('catalog', '0009_index_run_recovery_trigger'),
        ('contenttypes', '0002_remove_content_type_name'),
        ('retrieval', '0004_trace_retention'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='Agent',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=100, unique=True)),
                        ('token_hash', models.CharField(editable=False, max_length=64, unique=True)),
                        ('token_hint', models.CharField(editable=False, help_text='First characters, to tell tokens apart.', max_length=12)),
                        ('is_active', models.BooleanField(default=True)),
                        ('is_curator', models.BooleanField(default=False, help_text='May trigger reindexing of its catalogs.')),
                        ('strategy', models.CharField(choices=[('preload', 'preload (content in the startup instructions, within the budget)'), ('rag', 'rag (startup instructions list references; content via rag_search)')], default='preload', max_length=8)),
                        ('token_budget', models.PositiveIntegerField(default=12000, help_text='Tokens the startup instructions may use.', validators=[django.core.validators.MinValueValidator(100), django.core.validators.MaxValueValidator(1000000)])),
                        ('default_top_k', models.PositiveSmallIntegerField(default=5, help_text='Results per rag_search call when the caller gives no top_k.', validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(100)])),
                        ('semantic_threshold', models.FloatField(default=0.3, help_text="Lowest cosine similarity between a text and a source's profile for a semantic hint.", validators=[django.core.validators.MinValueValidator(0.0), django.core.validators.MaxValueValidator(1.0)])),
                        ('semantic_margin', models.FloatField(default=0.1, help_text='A semantic hint must also score within this much of the best semantic match.', validators=[django.core.validators.MinValueValidator(0.0), django.core.validators.MaxValueValidator(1.0)])),
                        ('max_hints', models.PositiveSmallIntegerField(default=5, help_text='Most references hinted per enriched text.', validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(50)])),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('last_used_at', models.DateTimeField(blank=True, null=True)),
                        ('catalogs', models.ManyToManyField(blank=True, related_name='agents', to='catalog.catalog')),
                        ('preselected', models.ManyToManyField(blank=True, help_text='References pinned for this agent, beside those whose mode is preselected.', related_name='preselected_by', to='catalog.referencesource')),
                    ],
                    options={
                        'db_table': 'retrieval_agent',
                        'ordering': ['name'],
                    },
                ),
            ],
        ),
        migrations.RunPython(forwards, backwards),
    ]
