"""Keeping a catalog's TermBlock rows (BM25's packed postings) equal to its TermPosting
rows, inside the write path's transaction: after postings are added, each term's
blocks are rebuilt from the first one the new postings fall into (in practice the
term's last block, new chunks having the highest ids); after postings are removed, each
block that held one is rebuilt from what is left of it (or goes, left empty).

A block holds up to TERM_BLOCK_POSTINGS consecutive postings of one term, and never
straddles a multiple of 2**31 in chunk ids, so each id less the block's first fits an
int4 however far apart ids drift.
"""

from __future__ import annotations

from django.db.backends.utils import CursorWrapper

from catalog.models import TERM_BLOCK_POSTINGS


def blocks_sql(postings: str) -> str:
    """SELECT of TermBlock rows packing `postings`, a relation of (catalog_id, term_id,
    piece, chunk_id, tf, dl): each term's postings of one piece (a run of them that no
    other block interleaves), in chunk order, cut every TERM_BLOCK_POSTINGS."""
    return f"""
        SELECT catalog_id, term_id, first, max(chunk_id), count(*), max(tf), min(dl),
               string_agg(int4send((chunk_id - first)::int4), '\\x'::bytea ORDER BY chunk_id),
               string_agg(int4send(tf), '\\x'::bytea ORDER BY chunk_id),
               string_agg(int4send(dl), '\\x'::bytea ORDER BY chunk_id)
        FROM (SELECT r.*, min(chunk_id) OVER (PARTITION BY term_id, piece, era, n) AS first
              FROM (SELECT r.*, chunk_id >> 31 AS era,
                           (row_number() OVER (PARTITION BY term_id, piece, chunk_id >> 31 ORDER BY chunk_id) - 1)
                           / {TERM_BLOCK_POSTINGS} AS n
                    FROM ({postings}) r) r) r
        GROUP BY catalog_id, term_id, piece, era, n, first
    """


INSERT = ("INSERT INTO catalog_termblock (catalog_id, term_id, first_chunk_id, last_chunk_id, postings, max_tf, "
          "min_dl, chunk_ids, tfs, dls) ")


def term_blocks_extend(cursor: CursorWrapper, catalog_id: int, least: dict[int, int]) -> None:
    """Rebuild the blocks of each term in `least` (term id -> the least chunk id of the
    postings just added to it) from the first block those postings fall into, or that
    is not yet full, to the term's end: the new chunks, having the highest ids, land at
    the end, so this is the term's last block and its new postings."""
    if not least:
        return
    params: dict[str, int | list[int]] = {"catalog": catalog_id, "terms": list(least), "least": list(least.values()),
              "size": TERM_BLOCK_POSTINGS}
    # The blocks reaching the new postings, and each term's last block when not full:
    # always a suffix of the term's blocks, so the rest stay in order.
    cursor.execute("""
        DELETE FROM catalog_termblock b USING unnest(%(terms)s::int[], %(least)s::bigint[]) AS w(term_id, least)
        WHERE b.catalog_id = %(catalog)s AND b.term_id = w.term_id
          AND (b.last_chunk_id >= w.least
               OR b.postings < %(size)s AND b.first_chunk_id = (
                   SELECT max(l.first_chunk_id) FROM catalog_termblock l
                   WHERE l.catalog_id = %(catalog)s AND l.term_id = w.term_id))
    """, params)
    cursor.execute(INSERT + blocks_sql("""
        SELECT %(catalog)s AS catalog_id, p.term_id, 0 AS piece, p.chunk_id, p.tf, p.dl
        FROM unnest(%(terms)s::int[]) AS w(term_id)
        CROSS JOIN LATERAL (
            SELECT * FROM catalog_termposting p
            WHERE p.catalog_id = %(catalog)s AND p.term_id = w.term_id AND p.chunk_id > coalesce(
                (SELECT max(b.last_chunk_id) FROM catalog_termblock b
                 WHERE b.catalog_id = %(catalog)s AND b.term_id = w.term_id), -1)
            OFFSET 0) p
    """), params)


def term_blocks_shrink(cursor: CursorWrapper, catalog_id: int, document_pks: list[int]) -> None:
    """Rebuild every block that held a posting of the documents' chunks, from its
    postings left in catalog_termposting (call after deleting theirs, before their
    catalog_postings rows, which say which terms they held)."""
    cursor.execute(f"""
        WITH held AS (
            SELECT DISTINCT b.catalog_id, b.term_id, b.first_chunk_id
            FROM catalog_chunk c JOIN catalog_postings p ON p.catalog_id = c.catalog_id AND p.chunk_id = c.id,
                 unnest(p.terms) AS x(term_id)
            CROSS JOIN LATERAL (
                SELECT b.catalog_id, b.term_id, b.first_chunk_id FROM catalog_termblock b
                WHERE b.catalog_id = c.catalog_id AND b.term_id = x.term_id AND b.first_chunk_id <= c.id
                ORDER BY b.first_chunk_id DESC LIMIT 1) b
            WHERE c.catalog_id = %(catalog)s AND c.document_id = ANY(%(documents)s)
        ), gone AS (
            DELETE FROM catalog_termblock b USING held h
            WHERE b.catalog_id = h.catalog_id AND b.term_id = h.term_id AND b.first_chunk_id = h.first_chunk_id
            RETURNING b.catalog_id, b.term_id, b.first_chunk_id, b.last_chunk_id
        )
        {INSERT}
        {blocks_sql('''
            SELECT g.catalog_id, p.term_id, g.first_chunk_id AS piece, p.chunk_id, p.tf, p.dl
            FROM gone g CROSS JOIN LATERAL (
                SELECT * FROM catalog_termposting p
                WHERE p.catalog_id = g.catalog_id AND p.term_id = g.term_id
                  AND p.chunk_id BETWEEN g.first_chunk_id AND g.last_chunk_id OFFSET 0) p
        ''')}
    """, {"catalog": catalog_id, "documents": document_pks})


def term_blocks_rebuild(cursor: CursorWrapper, catalog_id: int) -> None:
    """Pack all the catalog's BM25 blocks anew from its postings, in one sorted pass
    (after a bulk load, which does not keep them write by write)."""
    cursor.execute("DELETE FROM catalog_termblock WHERE catalog_id = %s", [catalog_id])
    cursor.execute(INSERT + blocks_sql("""
        SELECT catalog_id, term_id, 0 AS piece, chunk_id, tf, dl FROM catalog_termposting
        WHERE catalog_id = %(catalog)s
    """), {"catalog": catalog_id})
