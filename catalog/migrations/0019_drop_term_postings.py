"""The packed BM25 blocks (catalog_termblock) become the only term-major index:
catalog_termposting and its partitions go. The blocks are kept as they are (migration
0018 packed them from it, and the write path has kept them since); from here on the
write path packs them from the forward rows (catalog_postings), and the partition
functions make, empty, drop and index only catalog_chunk and catalog_postings
partitions. Backwards, the term-major rows are unpacked from the forward rows again
and the functions of migration 0017 restored, which build each partition's key.
"""

import importlib

from django.db import migrations

# lectern_catalog_indexes_build also packs no blocks here: the write path does, after it.
FUNCTIONS = """
CREATE OR REPLACE FUNCTION lectern_catalog_partitions_attach(catalog bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    parent text;
BEGIN
    -- a catalog gone whose id a restarted sequence hands out again (a test's flush)
    PERFORM lectern_catalog_partitions_drop(catalog);
    FOREACH parent IN ARRAY ARRAY['catalog_chunk', 'catalog_postings'] LOOP
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)',
                       parent || '_c' || catalog, parent);
        EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES IN (%s)', parent, parent || '_c' || catalog,
                       catalog);
    END LOOP;
END $$;

CREATE OR REPLACE FUNCTION lectern_catalog_indexes_build(catalog bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    checks text;
BEGIN
    IF to_regclass(format('catalog_chunk_c%s_hnsw', catalog)) IS NOT NULL THEN
        RETURN false;
    END IF;
    -- An index cannot be built on a table whose rows this transaction wrote while
    -- their (deferred) foreign key checks wait for the commit: those run now.
    SELECT string_agg(quote_ident(conname), ', ') INTO checks FROM pg_constraint
    WHERE conrelid = 'catalog_chunk'::regclass AND contype = 'f' AND condeferred;
    IF checks IS NOT NULL THEN
        EXECUTE format('SET CONSTRAINTS %s IMMEDIATE', checks);
    END IF;
    EXECUTE format('CREATE INDEX %I ON %I USING hnsw (embedding vector_cosine_ops) '
                   'WITH (m = 16, ef_construction = 64)', 'catalog_chunk_c' || catalog || '_hnsw',
                   'catalog_chunk_c' || catalog);
    IF checks IS NOT NULL THEN
        EXECUTE format('SET CONSTRAINTS %s DEFERRED', checks);
    END IF;
    EXECUTE format('ANALYZE %I, %I', 'catalog_chunk_c' || catalog, 'catalog_postings_c' || catalog);
    RETURN true;
END $$;

CREATE OR REPLACE FUNCTION lectern_catalog_indexes_defer(catalog bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    -- a catalog holding chunks keeps the index that serves them
    IF EXISTS (SELECT FROM catalog_chunk WHERE catalog_id = catalog) THEN
        RETURN false;
    END IF;
    EXECUTE format('DROP INDEX IF EXISTS %I', 'catalog_chunk_c' || catalog || '_hnsw');
    RETURN true;
END $$;

CREATE OR REPLACE FUNCTION lectern_catalog_partitions_empty(catalog bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    partition text;
BEGIN
    -- TRUNCATE locks the partitions alone; dropping them would lock every catalog's
    -- readers out of the parents meanwhile (lectern_catalog_partitions_prune does, later)
    IF to_regclass(format('catalog_chunk_c%s', catalog)) IS NULL THEN
        RETURN;
    END IF;
    EXECUTE format('TRUNCATE %I, %I', 'catalog_postings_c' || catalog, 'catalog_chunk_c' || catalog);
EXCEPTION WHEN object_in_use THEN
    -- rows this transaction changed still have checks to run at commit (the ORM's
    -- cascade deleted them first): what is left goes row by row
    FOREACH partition IN ARRAY ARRAY['catalog_postings_c', 'catalog_chunk_c'] LOOP
        EXECUTE format('DELETE FROM %I', partition || catalog);
    END LOOP;
END $$;

CREATE OR REPLACE FUNCTION lectern_catalog_partitions_drop(catalog bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    EXECUTE format('DROP TABLE IF EXISTS %I, %I', 'catalog_postings_c' || catalog, 'catalog_chunk_c' || catalog);
END $$;
"""

# Back: 0017's functions, as they were (a migration's own text does not change).
FUNCTIONS_0017 = importlib.import_module("catalog.migrations.0017_catalog_partitions").FUNCTIONS.replace(
    "CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")

DROP = "DROP TABLE catalog_termposting"

# The term-major rows again, a partition per catalog, from the forward rows.
RECREATE = """
CREATE TABLE catalog_termposting (
    catalog_id integer NOT NULL,
    term_id integer NOT NULL,
    chunk_id bigint NOT NULL,
    tf integer NOT NULL,
    dl integer NOT NULL
) PARTITION BY LIST (catalog_id);
DO $$
DECLARE
    catalog bigint;
BEGIN
    FOR catalog IN SELECT id FROM catalog_catalog ORDER BY id LOOP
        EXECUTE format('CREATE TABLE %I (LIKE catalog_termposting INCLUDING DEFAULTS INCLUDING CONSTRAINTS '
                       'INCLUDING STORAGE)', 'catalog_termposting_c' || catalog);
        EXECUTE format('ALTER TABLE catalog_termposting ATTACH PARTITION %I FOR VALUES IN (%s)',
                       'catalog_termposting_c' || catalog, catalog);
    END LOOP;
END $$;
INSERT INTO catalog_termposting (catalog_id, term_id, chunk_id, tf, dl)
SELECT p.catalog_id, x.term_id, p.chunk_id, x.tf, p.length
FROM catalog_postings p CROSS JOIN LATERAL unnest(p.terms, p.tfs) AS x(term_id, tf) ORDER BY 1, 2, 3;
"""

# Back, once 0017's functions are in place: each catalog's term postings key.
KEYS_BACK = """
DO $$
DECLARE
    catalog bigint;
BEGIN
    FOR catalog IN SELECT id FROM catalog_catalog ORDER BY id LOOP
        EXECUTE format('CREATE UNIQUE INDEX %I ON %I (catalog_id, term_id, chunk_id) INCLUDE (tf, dl)',
                       'catalog_termposting_c' || catalog || '_key', 'catalog_termposting_c' || catalog);
    END LOOP;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [("catalog", "0018_term_blocks")]

    # Reversed in the opposite order: the table back, 0017's functions, then the keys.
    operations = [
        migrations.RunSQL(migrations.RunSQL.noop, KEYS_BACK),
        migrations.RunSQL(FUNCTIONS, FUNCTIONS_0017),
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="TermPosting")],
            database_operations=[migrations.RunSQL(DROP, RECREATE)],
        ),
    ]
