from django.db import migrations, models


class Migration(migrations.Migration):
    """Documents record how their chunks were cut. Rows written before are left blank,
    which no catalog's stamp equals: the next scan rebuilds them with the current
    chunker (whose boundaries changed with this version)."""

    dependencies = [
        ("catalog", "0013_agent_conversation_profile"),
    ]

    operations = [
        migrations.AddField(
            model_name="document",
            name="chunking",
            field=models.CharField(
                blank=True, default="", max_length=200,
                help_text="How its chunks were cut (catalog.indexing.chunks.chunking_stamp): chunker version, "
                          "size/overlap and model. A run rebuilds a document whose stamp is not its catalog's now; "
                          "blank: cut before stamps were kept."),
            preserve_default=False,
        ),
    ]
