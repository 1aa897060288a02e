"""Keeping a catalog's TermBlock rows (BM25's packed postings, its only term-major
index) equal to the postings its forward rows (catalog_postings: each chunk's terms and
tfs) hold, inside the write path's transaction: after chunks are added, each of their
terms' blocks is repacked from the first one the new postings fall into (in practice
the term's last block, new chunks having the highest ids), with the new postings read
from the new chunks' forward rows; after chunks are removed, each block that held one
is unpacked, the removed chunks dropped, and repacked (or goes, left empty).

A block holds up to TERM_BLOCK_POSTINGS consecutive postings of one term, and never
straddles a multiple of 2**31 in chunk ids, so each id less the block's first fits an
int4 however far apart ids drift.
"""

from __future__ import annotations

from django.db.backends.utils import CursorWrapper

from catalog.indexing.pack import term_blocks_pack
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


def _int4(data: str, i: str) -> str:
    """SQL for the i-th big-endian int4 of bytea `data` (as int4send wrote it)."""
    return (f"(get_byte({data}, 4 * {i}) << 24 | get_byte({data}, 4 * {i} + 1) << 16 "
            f"| get_byte({data}, 4 * {i} + 2) << 8 | get_byte({data}, 4 * {i} + 3))")


def unpacked_sql(blocks: str, piece: str) -> str:
    """SELECT of the postings (catalog_id, term_id, piece, chunk_id, tf, dl) that the
    TermBlock rows of relation `blocks` hold, each block's piece being `piece` (an
    expression over the block `g`)."""
    return f"""
        SELECT g.catalog_id, g.term_id, {piece} AS piece, g.first_chunk_id + {_int4('g.chunk_ids', 'i')} AS chunk_id,
               {_int4('g.tfs', 'i')} AS tf, {_int4('g.dls', 'i')} AS dl
        FROM {blocks} g CROSS JOIN LATERAL generate_series(0, g.postings - 1) AS i
    """


def forward_sql(where: str) -> str:
    """SELECT of the postings (catalog_id, term_id, piece 0, chunk_id, tf, dl) that the
    forward rows `p` matching `where` hold."""
    return f"""
        SELECT p.catalog_id, x.term_id, 0::bigint AS piece, p.chunk_id, x.tf, p.length AS dl
        FROM catalog_postings p CROSS JOIN LATERAL unnest(p.terms, p.tfs) AS x(term_id, tf) WHERE {where}
    """


INSERT = ("INSERT INTO catalog_termblock (catalog_id, term_id, first_chunk_id, last_chunk_id, postings, max_tf, "
          "min_dl, chunk_ids, tfs, dls) ")


def term_blocks_extend(cursor: CursorWrapper, catalog_id: int, chunk_ids: list[int]) -> None:
    """Merge the postings of the new chunks `chunk_ids` (their forward rows written) into
    their terms' blocks: for each term, the blocks reaching its least new chunk id, and
    its last block when not full, are unpacked and repacked with the new postings. New
    chunks having the highest ids, that is the term's last block; the blocks taken are
    always a suffix of the term's, so the rest stay in order."""
    if not chunk_ids:
        return
    cursor.execute(f"""
        WITH new AS MATERIALIZED ({forward_sql("p.catalog_id = %(catalog)s AND p.chunk_id = ANY(%(chunks)s)")}),
        least AS (SELECT term_id, min(chunk_id) AS least FROM new GROUP BY term_id),
        gone AS (
            DELETE FROM catalog_termblock b USING least w
            WHERE b.catalog_id = %(catalog)s AND b.term_id = w.term_id
              AND (b.last_chunk_id >= w.least
                   OR b.postings < %(size)s AND b.first_chunk_id = (
                       SELECT max(l.first_chunk_id) FROM catalog_termblock l
                       WHERE l.catalog_id = %(catalog)s AND l.term_id = w.term_id))
            RETURNING b.*
        )
        {INSERT}
        {blocks_sql(f"SELECT * FROM new UNION ALL {unpacked_sql('gone', '0::bigint')}")}
    """, {"catalog": catalog_id, "chunks": chunk_ids, "size": TERM_BLOCK_POSTINGS})


def term_blocks_shrink(cursor: CursorWrapper, catalog_id: int, document_pks: list[int]) -> None:
    """Repack every block that held a posting of the documents' chunks without them
    (call before deleting their catalog_postings rows, which say which terms they held,
    and their chunks)."""
    cursor.execute(f"""
        WITH removed AS MATERIALIZED (
            SELECT c.id FROM catalog_chunk c WHERE c.catalog_id = %(catalog)s AND c.document_id = ANY(%(documents)s)
        ), held AS (
            SELECT DISTINCT b.catalog_id, b.term_id, b.first_chunk_id
            FROM removed c JOIN catalog_postings p ON p.catalog_id = %(catalog)s AND p.chunk_id = c.id,
                 unnest(p.terms) AS x(term_id)
            CROSS JOIN LATERAL (
                SELECT b.catalog_id, b.term_id, b.first_chunk_id FROM catalog_termblock b
                WHERE b.catalog_id = %(catalog)s AND b.term_id = x.term_id AND b.first_chunk_id <= c.id
                ORDER BY b.first_chunk_id DESC LIMIT 1) b
        ), gone AS (
            DELETE FROM catalog_termblock b USING held h
            WHERE b.catalog_id = h.catalog_id AND b.term_id = h.term_id AND b.first_chunk_id = h.first_chunk_id
            RETURNING b.*
        )
        {INSERT}
        {blocks_sql(f'''
            SELECT * FROM ({unpacked_sql("gone", "g.first_chunk_id")}) u
            WHERE NOT EXISTS (SELECT FROM removed r WHERE r.id = u.chunk_id)
        ''')}
    """, {"catalog": catalog_id, "documents": document_pks})


def term_blocks_rebuild(cursor: CursorWrapper, catalog_id: int) -> None:
    """Pack all the catalog's BM25 blocks anew from its forward rows (after a bulk load,
    which does not keep them write by write), in numpy (catalog.indexing.pack): the same
    blocks as blocks_sql packs, in a third of the time."""
    cursor.execute("DELETE FROM catalog_termblock WHERE catalog_id = %s", [catalog_id])
    term_blocks_pack(cursor.cursor, catalog_id, size=TERM_BLOCK_POSTINGS)
