"""BM25's packed postings: catalog_termblock, up to 128 consecutive postings of a term
per row (chunk ids less the block's first, tfs, dls: int4 arrays as bytea), keyed by
catalog first. Existing catalogs are backfilled from catalog_termposting in one sorted
pass; from here on the write path keeps the blocks (catalog.indexing.blocks). The SQL
is the write path's, copied: a migration must not change when the code it ran does.
"""

import django.db.models.deletion
from django.db import migrations, models

BACKFILL = """
INSERT INTO catalog_termblock (catalog_id, term_id, first_chunk_id, last_chunk_id, postings, max_tf, min_dl,
                               chunk_ids, tfs, dls)
SELECT catalog_id, term_id, first, max(chunk_id), count(*), max(tf), min(dl),
       string_agg(int4send((chunk_id - first)::int4), '\\x'::bytea ORDER BY chunk_id),
       string_agg(int4send(tf), '\\x'::bytea ORDER BY chunk_id),
       string_agg(int4send(dl), '\\x'::bytea ORDER BY chunk_id)
FROM (SELECT r.*, min(chunk_id) OVER (PARTITION BY term_id, era, n) AS first
      FROM (SELECT t.catalog_id, p.term_id, p.chunk_id, p.tf, p.dl, p.chunk_id >> 31 AS era,
                   (row_number() OVER (PARTITION BY p.term_id, p.chunk_id >> 31 ORDER BY p.chunk_id) - 1) / 128 AS n
            FROM catalog_termposting p JOIN catalog_term t ON t.id = p.term_id) r) r
GROUP BY catalog_id, term_id, era, n, first
"""


class Migration(migrations.Migration):
    dependencies = [("catalog", "0017_catalog_partitions")]

    operations = [
        migrations.CreateModel(
            name="TermBlock",
            fields=[
                ("pk", models.CompositePrimaryKey("catalog", "term", "first_chunk_id", blank=True, editable=False,
                                                  primary_key=True, serialize=False)),
                ("first_chunk_id", models.BigIntegerField()),
                ("last_chunk_id", models.BigIntegerField()),
                ("postings", models.IntegerField(help_text="How many postings the block holds.")),
                ("max_tf", models.IntegerField(help_text="The largest tf in the block.")),
                ("min_dl", models.IntegerField(help_text="The smallest dl in the block.")),
                ("chunk_ids", models.BinaryField(help_text="Each chunk id less first_chunk_id, int4 big-endian.")),
                ("tfs", models.BinaryField(help_text="Each posting's tf, int4 big-endian.")),
                ("dls", models.BinaryField(help_text="Each posting's chunk length (BM25 dl), int4 big-endian.")),
                ("catalog", models.ForeignKey(db_constraint=False, db_index=False,
                                              on_delete=django.db.models.deletion.CASCADE, related_name="+",
                                              to="catalog.catalog")),
                ("term", models.ForeignKey(db_constraint=False, db_index=False,
                                           on_delete=django.db.models.deletion.CASCADE, related_name="+",
                                           to="catalog.term")),
            ],
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
        migrations.RunSQL("ANALYZE catalog_termblock", migrations.RunSQL.noop),
    ]
