"""Chunk-side tables partitioned by catalog: one catalog's search never pays for another's size.

catalog_chunk, catalog_postings and catalog_termposting become LIST-partitioned by
catalog_id, one partition of each per catalog (catalog_chunk_c<id>, ...), and the
catalog is the leading column of every key: chunks (catalog_id, id), postings
(catalog_id, chunk_id), term postings (catalog_id, term_id, chunk_id) INCLUDE (tf, dl).
Each catalog has its own HNSW index (catalog_chunk_c<id>_hnsw), so a small catalog's
vector search no longer walks a large neighbour's graph (docs/decisions/0004-a-partition-per-catalog.md,
"A partition per catalog").

The partitions come and go with the catalog row: triggers on catalog_catalog call
SECURITY DEFINER functions owned by the schema's owner, since only a table's owner may
attach or drop its partitions and the app's role owns nothing. A partition is made with
CREATE TABLE and ATTACH PARTITION (a SHARE UPDATE EXCLUSIVE lock on the parents, which
readers and writers of other catalogs never wait for), not CREATE TABLE ... PARTITION
OF (an ACCESS EXCLUSIVE one). lectern_catalog_indexes_defer / _build let a bulk load
into an empty catalog build its HNSW index and postings key once, after the rows
(catalog.indexing.bulk).

Existing rows move across: the old tables are set aside, the partitioned ones made, one
partition per catalog, the rows copied, then every key and index built in one sorted
pass (compact keys, no row-by-row HNSW inserts), and the old tables dropped. Chunk ids
and the identity sequence's position are kept: traces and evaluations name chunks by id.
"""

from django.db import migrations, models

# --- the partitions and their lifecycle: functions owned by the migrating role ----------------

FUNCTIONS = """
CREATE FUNCTION lectern_catalog_partitions_attach(catalog bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    parent text;
BEGIN
    -- a catalog gone whose id a restarted sequence hands out again (a test's flush)
    PERFORM lectern_catalog_partitions_drop(catalog);
    FOREACH parent IN ARRAY ARRAY['catalog_chunk', 'catalog_postings', 'catalog_termposting'] LOOP
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)',
                       parent || '_c' || catalog, parent);
        EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES IN (%s)', parent, parent || '_c' || catalog,
                       catalog);
    END LOOP;
END $$;

CREATE FUNCTION lectern_catalog_indexes_build(catalog bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    built boolean := false;
    checks text;
BEGIN
    IF to_regclass(format('catalog_chunk_c%s_hnsw', catalog)) IS NULL THEN
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
        built := true;
    END IF;
    IF to_regclass(format('catalog_termposting_c%s_key', catalog)) IS NULL THEN
        EXECUTE format('CREATE UNIQUE INDEX %I ON %I (catalog_id, term_id, chunk_id) INCLUDE (tf, dl)',
                       'catalog_termposting_c' || catalog || '_key', 'catalog_termposting_c' || catalog);
        built := true;
    END IF;
    IF built THEN
        EXECUTE format('ANALYZE %I, %I, %I', 'catalog_chunk_c' || catalog, 'catalog_postings_c' || catalog,
                       'catalog_termposting_c' || catalog);
    END IF;
    RETURN built;
END $$;

CREATE FUNCTION lectern_catalog_indexes_defer(catalog bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    -- a catalog holding chunks keeps the indexes that serve them
    IF EXISTS (SELECT FROM catalog_chunk WHERE catalog_id = catalog) THEN
        RETURN false;
    END IF;
    EXECUTE format('DROP INDEX IF EXISTS %I', 'catalog_chunk_c' || catalog || '_hnsw');
    EXECUTE format('DROP INDEX IF EXISTS %I', 'catalog_termposting_c' || catalog || '_key');
    RETURN true;
END $$;

CREATE FUNCTION lectern_catalog_partitions_empty(catalog bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    partition text;
BEGIN
    -- TRUNCATE locks the partitions alone; dropping them would lock every catalog's
    -- readers out of the parents meanwhile (lectern_catalog_partitions_prune does, later)
    IF to_regclass(format('catalog_chunk_c%s', catalog)) IS NULL THEN
        RETURN;
    END IF;
    EXECUTE format('TRUNCATE %I, %I, %I', 'catalog_termposting_c' || catalog, 'catalog_postings_c' || catalog,
                   'catalog_chunk_c' || catalog);
EXCEPTION WHEN object_in_use THEN
    -- rows this transaction changed still have checks to run at commit (the ORM's
    -- cascade deleted them first): what is left goes row by row
    FOREACH partition IN ARRAY ARRAY['catalog_termposting_c', 'catalog_postings_c', 'catalog_chunk_c'] LOOP
        EXECUTE format('DELETE FROM %I', partition || catalog);
    END LOOP;
END $$;

CREATE FUNCTION lectern_catalog_partitions_drop(catalog bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    EXECUTE format('DROP TABLE IF EXISTS %I, %I, %I', 'catalog_termposting_c' || catalog,
                   'catalog_postings_c' || catalog, 'catalog_chunk_c' || catalog);
END $$;

CREATE FUNCTION lectern_catalog_partitions_prune() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    gone bigint;
    pruned integer := 0;
BEGIN
    FOR gone IN SELECT substring(c.relname FROM '^catalog_chunk_c([0-9]+)$')::bigint
                FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = 'catalog_chunk'::regclass
                EXCEPT SELECT id FROM catalog_catalog LOOP
        PERFORM lectern_catalog_partitions_drop(gone);
        pruned := pruned + 1;
    END LOOP;
    RETURN pruned;
END $$;

CREATE FUNCTION lectern_catalog_created() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM lectern_catalog_partitions_attach(NEW.id);
    PERFORM lectern_catalog_indexes_build(NEW.id);
    RETURN NULL;
END $$;

CREATE FUNCTION lectern_catalog_deleted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM lectern_catalog_partitions_empty(OLD.id);
    RETURN NULL;
END $$;

REVOKE ALL ON FUNCTION lectern_catalog_partitions_attach(bigint), lectern_catalog_indexes_build(bigint),
    lectern_catalog_indexes_defer(bigint), lectern_catalog_partitions_empty(bigint),
    lectern_catalog_partitions_drop(bigint), lectern_catalog_partitions_prune(), lectern_catalog_created(),
    lectern_catalog_deleted() FROM PUBLIC;
"""

TRIGGERS = """
CREATE TRIGGER catalog_partitions_create AFTER INSERT ON catalog_catalog
    FOR EACH ROW EXECUTE FUNCTION lectern_catalog_created();
CREATE TRIGGER catalog_partitions_empty AFTER DELETE ON catalog_catalog
    FOR EACH ROW EXECUTE FUNCTION lectern_catalog_deleted();
"""

TRIGGERS_DROP = """
DROP TRIGGER catalog_partitions_create ON catalog_catalog;
DROP TRIGGER catalog_partitions_empty ON catalog_catalog;
"""

FUNCTIONS_DROP = """
DROP FUNCTION lectern_catalog_created(), lectern_catalog_deleted(),
    lectern_catalog_partitions_attach(bigint), lectern_catalog_indexes_build(bigint),
    lectern_catalog_indexes_defer(bigint), lectern_catalog_partitions_empty(bigint),
    lectern_catalog_partitions_drop(bigint), lectern_catalog_partitions_prune();
"""

# --- moving the rows across -------------------------------------------------------------------

# The old tables, their indexes and identity sequence renamed out of the way (index names
# are the schema's, not the table's).
SET_ASIDE = """
DO $$
DECLARE
    r record;
BEGIN
    EXECUTE format('ALTER SEQUENCE %s RENAME TO catalog_chunk_old_id_seq', pg_get_serial_sequence('catalog_chunk', 'id'));
    ALTER TABLE catalog_termposting RENAME TO catalog_termposting_old;
    ALTER TABLE catalog_postings RENAME TO catalog_postings_old;
    ALTER TABLE catalog_chunk RENAME TO catalog_chunk_old;
    FOR r IN SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
             WHERE x.indrelid IN ('catalog_chunk_old'::regclass, 'catalog_postings_old'::regclass,
                                  'catalog_termposting_old'::regclass) LOOP
        EXECUTE format('ALTER INDEX %I RENAME TO %I', r.relname, left(r.relname, 59) || '_old');
    END LOOP;
END $$;
"""

# Fixed-width columns first, then the variable ones: no padding between them.
PARENTS = """
CREATE TABLE catalog_chunk (
    id bigint GENERATED BY DEFAULT AS IDENTITY,
    catalog_id bigint NOT NULL,
    source_id bigint NOT NULL,
    document_id bigint NOT NULL,
    byte_offset bigint NOT NULL,
    ordinal integer NOT NULL CONSTRAINT catalog_chunk_ordinal_check CHECK (ordinal >= 0),
    token_count integer NOT NULL CONSTRAINT catalog_chunk_token_count_check CHECK (token_count >= 0),
    key varchar(1200) NOT NULL,
    heading varchar(300) NOT NULL,
    content text NOT NULL,
    embedding vector(384)
) PARTITION BY LIST (catalog_id);

CREATE TABLE catalog_postings (
    catalog_id bigint NOT NULL,
    chunk_id bigint NOT NULL,
    length integer NOT NULL,
    terms integer[] NOT NULL,
    tfs integer[] NOT NULL
) PARTITION BY LIST (catalog_id);

CREATE TABLE catalog_termposting (
    catalog_id integer NOT NULL,
    term_id integer NOT NULL,
    chunk_id bigint NOT NULL,
    tf integer NOT NULL,
    dl integer NOT NULL
) PARTITION BY LIST (catalog_id);
"""

COPY_ROWS = """
SELECT lectern_catalog_partitions_attach(id) FROM catalog_catalog ORDER BY id;
INSERT INTO catalog_chunk (id, catalog_id, source_id, document_id, byte_offset, ordinal, token_count, key, heading,
                           content, embedding)
SELECT id, catalog_id, source_id, document_id, byte_offset, ordinal, token_count, key, heading, content, embedding
FROM catalog_chunk_old;
INSERT INTO catalog_postings (catalog_id, chunk_id, length, terms, tfs)
SELECT catalog_id, chunk_id, length, terms, tfs FROM catalog_postings_old;
INSERT INTO catalog_termposting (catalog_id, term_id, chunk_id, tf, dl)
SELECT x.catalog_id, t.term_id, t.chunk_id, t.tf, t.dl
FROM catalog_termposting_old t JOIN catalog_term x ON x.id = t.term_id;
SELECT setval(pg_get_serial_sequence('catalog_chunk', 'id'), last_value, is_called) FROM catalog_chunk_old_id_seq;
"""

# Built on the parents once the rows are in: each partition's index in one sorted pass.
KEYS = """
ALTER TABLE catalog_chunk ADD CONSTRAINT catalog_chunk_pkey PRIMARY KEY (catalog_id, id);
ALTER TABLE catalog_chunk ADD CONSTRAINT chunk_key_unique_per_catalog UNIQUE (catalog_id, key);
CREATE INDEX catalog_chunk_source_id_248f6f02 ON catalog_chunk (source_id);
CREATE INDEX catalog_chunk_document_id_88035bc5 ON catalog_chunk (document_id);
ALTER TABLE catalog_chunk
    ADD CONSTRAINT catalog_chunk_document_id_88035bc5_fk_catalog_document_id FOREIGN KEY (document_id)
        REFERENCES catalog_document (id) DEFERRABLE INITIALLY DEFERRED,
    ADD CONSTRAINT catalog_chunk_source_id_248f6f02_fk_catalog_referencesource_id FOREIGN KEY (source_id)
        REFERENCES catalog_referencesource (id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE catalog_postings ADD CONSTRAINT catalog_postings_pkey PRIMARY KEY (catalog_id, chunk_id);
SELECT lectern_catalog_indexes_build(id) FROM catalog_catalog ORDER BY id;
DROP TABLE catalog_termposting_old, catalog_postings_old, catalog_chunk_old;
"""

# --- and back, for a migration to 0015 (the tests' migration checks go back and forth) ----------

BACK = """
DO $$
BEGIN
    EXECUTE format('ALTER SEQUENCE %s RENAME TO catalog_chunk_new_id_seq', pg_get_serial_sequence('catalog_chunk', 'id'));
END $$;
ALTER TABLE catalog_termposting RENAME TO catalog_termposting_new;
ALTER TABLE catalog_postings RENAME TO catalog_postings_new;
ALTER TABLE catalog_chunk RENAME TO catalog_chunk_new;
ALTER INDEX catalog_chunk_pkey RENAME TO catalog_chunk_new_pkey;
ALTER INDEX catalog_postings_pkey RENAME TO catalog_postings_new_pkey;
ALTER INDEX catalog_chunk_source_id_248f6f02 RENAME TO catalog_chunk_new_source_id;
ALTER INDEX catalog_chunk_document_id_88035bc5 RENAME TO catalog_chunk_new_document_id;
CREATE TABLE catalog_chunk (
    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    key varchar(1200) NOT NULL CONSTRAINT catalog_chunk_key_key UNIQUE,
    ordinal integer NOT NULL CHECK (ordinal >= 0),
    byte_offset bigint NOT NULL,
    content text NOT NULL,
    token_count integer NOT NULL CHECK (token_count >= 0),
    embedding vector(384),
    catalog_id bigint NOT NULL,
    document_id bigint NOT NULL,
    source_id bigint NOT NULL,
    heading varchar(300) NOT NULL
);
INSERT INTO catalog_chunk (id, key, ordinal, byte_offset, content, token_count, embedding, catalog_id, document_id,
                           source_id, heading)
SELECT id, key, ordinal, byte_offset, content, token_count, embedding, catalog_id, document_id, source_id, heading
FROM catalog_chunk_new;
SELECT setval(pg_get_serial_sequence('catalog_chunk', 'id'), last_value, is_called) FROM catalog_chunk_new_id_seq;
CREATE INDEX catalog_chunk_catalog_id_e38a225f ON catalog_chunk (catalog_id);
CREATE INDEX catalog_chunk_document_id_88035bc5 ON catalog_chunk (document_id);
CREATE INDEX catalog_chunk_source_id_248f6f02 ON catalog_chunk (source_id);
CREATE INDEX catalog_chunk_key_7217c7ae_like ON catalog_chunk (key varchar_pattern_ops);
CREATE INDEX chunk_embedding_hnsw ON catalog_chunk USING hnsw (embedding vector_cosine_ops)
    WITH (m = 16, ef_construction = 64);
ALTER TABLE catalog_chunk
    ADD CONSTRAINT catalog_chunk_catalog_id_e38a225f_fk_catalog_catalog_id FOREIGN KEY (catalog_id)
        REFERENCES catalog_catalog (id) DEFERRABLE INITIALLY DEFERRED,
    ADD CONSTRAINT catalog_chunk_document_id_88035bc5_fk_catalog_document_id FOREIGN KEY (document_id)
        REFERENCES catalog_document (id) DEFERRABLE INITIALLY DEFERRED,
    ADD CONSTRAINT catalog_chunk_source_id_248f6f02_fk_catalog_referencesource_id FOREIGN KEY (source_id)
        REFERENCES catalog_referencesource (id) DEFERRABLE INITIALLY DEFERRED;
CREATE TABLE catalog_postings (
    chunk_id bigint NOT NULL PRIMARY KEY,
    length integer NOT NULL,
    terms integer[] NOT NULL,
    tfs integer[] NOT NULL,
    catalog_id bigint NOT NULL
);
INSERT INTO catalog_postings (chunk_id, length, terms, tfs, catalog_id)
SELECT chunk_id, length, terms, tfs, catalog_id FROM catalog_postings_new;
CREATE INDEX catalog_postings_catalog_id_eaa0cc02 ON catalog_postings (catalog_id);
ALTER TABLE catalog_postings
    ADD CONSTRAINT catalog_postings_catalog_id_eaa0cc02_fk_catalog_catalog_id FOREIGN KEY (catalog_id)
        REFERENCES catalog_catalog (id) DEFERRABLE INITIALLY DEFERRED,
    ADD CONSTRAINT catalog_postings_chunk_id_aff8575c_fk_catalog_chunk_id FOREIGN KEY (chunk_id)
        REFERENCES catalog_chunk (id) DEFERRABLE INITIALLY DEFERRED;
CREATE TABLE catalog_termposting (term_id integer NOT NULL, chunk_id bigint NOT NULL, tf integer NOT NULL,
                                  dl integer NOT NULL);
INSERT INTO catalog_termposting SELECT term_id, chunk_id, tf, dl FROM catalog_termposting_new ORDER BY 1, 2;
ALTER TABLE catalog_termposting
    ADD CONSTRAINT catalog_termposting_pkey PRIMARY KEY (term_id, chunk_id) INCLUDE (tf, dl);
DROP TABLE catalog_termposting_new, catalog_postings_new, catalog_chunk_new;
"""


class Migration(migrations.Migration):
    dependencies = [("catalog", "0016_agent_read_fence")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name="chunk", name="chunk_embedding_hnsw"),
                migrations.AlterField(
                    model_name="chunk", name="catalog",
                    field=models.ForeignKey(db_constraint=False, db_index=False,
                                            on_delete=models.deletion.CASCADE, related_name="+",
                                            to="catalog.catalog"),
                ),
                migrations.AlterField(
                    model_name="chunk", name="key",
                    field=models.CharField(help_text="catalog:source:path:byte_offset", max_length=1200),
                ),
                migrations.AddConstraint(
                    model_name="chunk",
                    constraint=models.UniqueConstraint(fields=("catalog", "key"), name="chunk_key_unique_per_catalog"),
                ),
                migrations.AlterField(
                    model_name="postings", name="chunk",
                    field=models.OneToOneField(db_constraint=False, on_delete=models.deletion.CASCADE,
                                               primary_key=True, related_name="postings", serialize=False,
                                               to="catalog.chunk"),
                ),
                migrations.AlterField(
                    model_name="postings", name="catalog",
                    field=models.ForeignKey(db_constraint=False, db_index=False,
                                            on_delete=models.deletion.CASCADE, related_name="+",
                                            to="catalog.catalog"),
                ),
                migrations.AddField(
                    model_name="termposting", name="catalog_id",
                    field=models.IntegerField(default=0, help_text="The catalog: the partition and the key's "
                                                                   "first column (int4, as term ids are)."),
                    preserve_default=False,
                ),
                migrations.AlterField(
                    model_name="termposting", name="pk",
                    field=models.CompositePrimaryKey("catalog_id", "term", "chunk", blank=True, editable=False,
                                                     primary_key=True, serialize=False),
                ),
            ],
            database_operations=[
                migrations.RunSQL(FUNCTIONS, FUNCTIONS_DROP),
                migrations.RunSQL(SET_ASIDE + PARENTS + COPY_ROWS + KEYS, BACK),
                migrations.RunSQL(TRIGGERS, TRIGGERS_DROP),
            ],
        ),
    ]
