-- pgvector + pg_trgm + popcount/crc32c workload; every result printed so that two runs can be diffed.
\set ON_ERROR_STOP on
\pset footer off
CREATE EXTENSION vector;
CREATE EXTENSION pg_trgm;
SELECT extversion AS vector_version FROM pg_extension WHERE extname = 'vector';
SELECT setseed(0.42);
CREATE TABLE items (id int PRIMARY KEY, v vector(384), t text);
INSERT INTO items
SELECT i, l2_normalize((SELECT array_agg(random() - 0.5)::real[] FROM generate_series(1, 384) WHERE i > 0)::vector),
       md5(i::text) || ' reference ' || (i % 97)
FROM generate_series(1, 3000) i;
ALTER TABLE items ADD COLUMN h halfvec(384), ADD COLUMN b bit(384), ADD COLUMN s sparsevec(384);
UPDATE items SET h = v::halfvec(384), b = binary_quantize(v)::bit(384), s = v::sparsevec(384);
CREATE INDEX ON items USING hnsw (v vector_cosine_ops);
CREATE INDEX ON items USING hnsw (v vector_l2_ops);
CREATE INDEX ON items USING hnsw (h halfvec_cosine_ops);
CREATE INDEX ON items USING hnsw (b bit_hamming_ops);
CREATE INDEX ON items USING ivfflat (v vector_ip_ops) WITH (lists = 20);
CREATE INDEX ON items USING gin (t gin_trgm_ops);
SET enable_seqscan = off;
SET hnsw.ef_search = 100;
SET ivfflat.probes = 20;
-- Index scans are approximate and HNSW graphs differ from build to build, so each index
-- query prints only whether it found at least 4 of the exact top 5; the exact top 5 (an
-- expression no index matches: "+ 0") is printed in full and must match between runs.
\echo exact top 5 by cosine, l2, halfvec cosine, hamming, inner product
SELECT id, round((v <=> (SELECT v FROM items WHERE id = 7))::numeric, 6) FROM items ORDER BY (v <=> (SELECT v FROM items WHERE id = 7)) + 0, id LIMIT 5;
SELECT id, round((v <-> (SELECT v FROM items WHERE id = 11))::numeric, 6) FROM items ORDER BY (v <-> (SELECT v FROM items WHERE id = 11)) + 0, id LIMIT 5;
SELECT id, round((h <=> (SELECT h FROM items WHERE id = 13))::numeric, 4) FROM items ORDER BY (h <=> (SELECT h FROM items WHERE id = 13)) + 0, id LIMIT 5;
SELECT id, b <~> (SELECT b FROM items WHERE id = 17) FROM items ORDER BY (b <~> (SELECT b FROM items WHERE id = 17)) + 0, id LIMIT 5;
SELECT id, round((v <#> (SELECT v FROM items WHERE id = 19))::numeric, 6) FROM items ORDER BY (v <#> (SELECT v FROM items WHERE id = 19)) + 0, id LIMIT 5;
\echo index scans (HNSW cosine, l2, halfvec cosine, bit hamming; IVFFlat inner product) find >= 4 of the exact top 5
EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY v <=> (SELECT v FROM items WHERE id = 7) LIMIT 5;
SELECT count(*) >= 4 AS hnsw_cosine FROM (SELECT id FROM items ORDER BY v <=> (SELECT v FROM items WHERE id = 7) LIMIT 5) i
  JOIN (SELECT id FROM items ORDER BY (v <=> (SELECT v FROM items WHERE id = 7)) + 0 LIMIT 5) e USING (id);
SELECT count(*) >= 4 AS hnsw_l2 FROM (SELECT id FROM items ORDER BY v <-> (SELECT v FROM items WHERE id = 11) LIMIT 5) i
  JOIN (SELECT id FROM items ORDER BY (v <-> (SELECT v FROM items WHERE id = 11)) + 0 LIMIT 5) e USING (id);
SELECT count(*) >= 4 AS hnsw_halfvec FROM (SELECT id FROM items ORDER BY h <=> (SELECT h FROM items WHERE id = 13) LIMIT 5) i
  JOIN (SELECT id FROM items ORDER BY (h <=> (SELECT h FROM items WHERE id = 13)) + 0 LIMIT 5) e USING (id);
SELECT count(*) >= 1 AS hnsw_hamming_finds_itself FROM (SELECT id FROM items ORDER BY b <~> (SELECT b FROM items WHERE id = 17) LIMIT 5) i
  WHERE id = 17;
SELECT count(*) >= 4 AS ivfflat_ip FROM (SELECT id FROM items ORDER BY v <#> (SELECT v FROM items WHERE id = 19) LIMIT 5) i
  JOIN (SELECT id FROM items ORDER BY (v <#> (SELECT v FROM items WHERE id = 19)) + 0 LIMIT 5) e USING (id);
SET enable_seqscan = on; SET enable_indexscan = off; SET enable_bitmapscan = off;
\echo exact sums over all pairs with row 23 (vector, halfvec, sparsevec, bit)
SELECT round(sum(i.v <=> q.v)::numeric, 4) AS cos, round(sum(i.v <-> q.v)::numeric, 4) AS l2, round(sum(i.v <#> q.v)::numeric, 4) AS ip,
       round(sum(l1_distance(i.v, q.v))::numeric, 3) AS l1, round(sum(i.h <-> q.h)::numeric, 3) AS half_l2,
       round(sum(i.h <=> q.h)::numeric, 3) AS half_cos, round(sum(i.s <-> q.s)::numeric, 4) AS sparse_l2,
       round(sum(i.s <=> q.s)::numeric, 4) AS sparse_cos, sum(i.b <~> q.b) AS hamming, round(sum(i.b <%> q.b)::numeric, 4) AS jaccard
FROM items i, (SELECT v, h, s, b FROM items WHERE id = 23) q;
\echo norms, averages, subvector
SELECT round(sum(vector_norm(v))::numeric, 4), round(vector_norm(avg(v))::numeric, 6), round(vector_norm(sum(v))::numeric, 4),
       round(sum(vector_norm(subvector(v, 1, 100)))::numeric, 4), round(l2_norm(avg(h))::numeric, 3) FROM items;
\echo pg_trgm
SELECT id, round(similarity(t, 'reference 42')::numeric, 4) FROM items WHERE t % 'c4ca4238 reference 1' ORDER BY 2 DESC, id LIMIT 3;
\echo popcount (pg_popcount) and crc32c
SELECT sum(bit_count(decode(md5(i::text) || md5((i * 7)::text), 'hex'))) AS popcount,
       sum(bit_count(decode(repeat(md5(i::text), 40), 'hex'))) AS popcount_long,
       sum(crc32c(decode(repeat(md5(i::text), 40), 'hex'))) AS crc32c_sum FROM generate_series(1, 2000) i;
\echo WAL written and read back (CRC on every record)
CHECKPOINT;
SELECT count(*) FROM items;
