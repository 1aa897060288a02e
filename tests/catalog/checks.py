"""Invariants of the index shared by the write-path tests."""

from __future__ import annotations

import struct

from django.db import connection

from catalog.models import TERM_BLOCK_POSTINGS, Catalog, TermBlock, TermPosting

_TERM_MAJOR = """
    SELECT t.term_id, t.chunk_id, t.tf, t.dl FROM catalog_termposting t
    JOIN catalog_chunk c ON c.id = t.chunk_id WHERE c.catalog_id = %(catalog)s
"""
_PER_CHUNK = """
    SELECT x.term_id, p.chunk_id, x.tf, p.length FROM catalog_postings p
    CROSS JOIN LATERAL unnest(p.terms, p.tfs) AS x(term_id, tf) WHERE p.catalog_id = %(catalog)s
"""


def _unpack(data: bytes) -> list[int]:
    return list(struct.unpack(f">{len(data) // 4}i", data))


def term_blocks_mismatches(catalog: Catalog) -> list[tuple]:
    """What is wrong with `catalog`'s packed postings blocks: a block of the wrong shape
    (empty, over TERM_BLOCK_POSTINGS, out of order, its first, last, count, max tf or
    min dl not what it holds, overlapping the term's block before it, straddling a
    multiple of 2**31), and every posting the blocks hold that catalog_termposting does
    not, or the other way round."""
    problems: list[tuple] = []
    held: set[tuple[int, int, int, int]] = set()
    last_of: dict[int, int] = {}
    for block in TermBlock.objects.filter(catalog=catalog).order_by("term_id", "first_chunk_id"):
        ids = [block.first_chunk_id + offset for offset in _unpack(bytes(block.chunk_ids))]
        tfs, dls = _unpack(bytes(block.tfs)), _unpack(bytes(block.dls))
        shape = (0 < len(ids) <= TERM_BLOCK_POSTINGS and len(ids) == len(tfs) == len(dls) == block.postings
                 and ids == sorted(set(ids)) and ids[0] == block.first_chunk_id and ids[-1] == block.last_chunk_id
                 and max(tfs) == block.max_tf and min(dls) == block.min_dl
                 and ids[0] > last_of.get(block.term_id, -1) and ids[0] >> 31 == ids[-1] >> 31)
        if not shape:
            problems.append(("block", block.term_id, block.first_chunk_id))
        last_of[block.term_id] = block.last_chunk_id
        held.update(zip([block.term_id] * len(ids), ids, tfs, dls, strict=True))
    posted = set(TermPosting.objects.filter(term__catalog=catalog).values_list("term_id", "chunk_id", "tf", "dl"))
    problems += [("blocks only", *row) for row in sorted(held - posted)]
    return problems + [("postings only", *row) for row in sorted(posted - held)]


def term_postings_mismatches(catalog: Catalog) -> list[tuple]:
    """Rows where the term-major postings and the per-chunk arrays of `catalog` disagree,
    term-major rows (of any catalog) whose chunk or term no longer exists, and what is
    wrong with the catalog's packed blocks (term_blocks_mismatches)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            (({_TERM_MAJOR}) EXCEPT ALL ({_PER_CHUNK}))
            UNION ALL (({_PER_CHUNK}) EXCEPT ALL ({_TERM_MAJOR}))
            UNION ALL (
                SELECT t.term_id, t.chunk_id, t.tf, t.dl FROM catalog_termposting t
                LEFT JOIN catalog_chunk c ON c.id = t.chunk_id LEFT JOIN catalog_term m ON m.id = t.term_id
                WHERE c.id IS NULL OR m.id IS NULL
            )
            """,
            {"catalog": catalog.pk},
        )
        return cursor.fetchall() + term_blocks_mismatches(catalog)
