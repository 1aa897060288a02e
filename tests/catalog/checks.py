"""Invariants of the index shared by the write-path tests."""

from __future__ import annotations

from django.db import connection

from catalog.models import Catalog

_TERM_MAJOR = """
    SELECT t.term_id, t.chunk_id, t.tf, t.dl FROM catalog_termposting t
    JOIN catalog_chunk c ON c.id = t.chunk_id WHERE c.catalog_id = %(catalog)s
"""
_PER_CHUNK = """
    SELECT x.term_id, p.chunk_id, x.tf, p.length FROM catalog_postings p
    CROSS JOIN LATERAL unnest(p.terms, p.tfs) AS x(term_id, tf) WHERE p.catalog_id = %(catalog)s
"""


def term_postings_mismatches(catalog: Catalog) -> list[tuple]:
    """Rows where the term-major postings and the per-chunk arrays of `catalog` disagree,
    and term-major rows (of any catalog) whose chunk or term no longer exists."""
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
        return cursor.fetchall()
