"""Term-major postings for BM25: catalog_termposting (term_id, chunk_id, tf, dl).

The primary key is (term_id, chunk_id) INCLUDE (tf, dl), so scoring reads a term's
postings from the index alone; Django's CompositePrimaryKey cannot say INCLUDE, hence
the SQL beside the model state. Existing catalogs are backfilled from the per-chunk
arrays in catalog_postings before the key is built (one sorted index build instead of
millions of inserts). The GIN index over catalog_postings.terms was the inverted index
that BM25 walked; nothing reads it any more.
"""

import django.db.models.deletion
from django.db import migrations, models

CREATE = """
CREATE TABLE catalog_termposting (
    term_id integer NOT NULL,
    chunk_id bigint NOT NULL,
    tf integer NOT NULL,
    dl integer NOT NULL
)
"""
BACKFILL = """
INSERT INTO catalog_termposting (term_id, chunk_id, tf, dl)
SELECT x.term_id, p.chunk_id, x.tf, p.length
FROM catalog_postings p CROSS JOIN LATERAL unnest(p.terms, p.tfs) AS x(term_id, tf)
ORDER BY 1, 2
"""
KEY = """
ALTER TABLE catalog_termposting
    ADD CONSTRAINT catalog_termposting_pkey PRIMARY KEY (term_id, chunk_id) INCLUDE (tf, dl)
"""


class Migration(migrations.Migration):
    dependencies = [("catalog", "0006_uploads_from_documents")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="TermPosting",
                    fields=[
                        ("pk", models.CompositePrimaryKey("term", "chunk", blank=True, editable=False,
                                                          primary_key=True, serialize=False)),
                        ("term", models.ForeignKey(db_constraint=False, db_index=False,
                                                   on_delete=django.db.models.deletion.CASCADE, related_name="+",
                                                   to="catalog.term")),
                        ("chunk", models.ForeignKey(db_constraint=False, db_index=False,
                                                    on_delete=django.db.models.deletion.CASCADE, related_name="+",
                                                    to="catalog.chunk")),
                        ("tf", models.IntegerField(help_text="Occurrences of the term in the chunk.")),
                        ("dl", models.IntegerField(help_text="The chunk's length in analysed terms (BM25 dl), "
                                                             "repeated for covering.")),
                    ],
                ),
            ],
            database_operations=[
                migrations.RunSQL(CREATE, "DROP TABLE catalog_termposting"),
                migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
                migrations.RunSQL(KEY, migrations.RunSQL.noop),
                migrations.RunSQL("ANALYZE catalog_termposting", migrations.RunSQL.noop),
            ],
        ),
        migrations.RemoveIndex(model_name="postings", name="postings_terms_gin"),
    ]
