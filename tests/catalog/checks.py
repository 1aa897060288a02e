"""Invariants of the index shared by the write-path tests."""

from __future__ import annotations

import struct

from django.db import connection
from django.db.models import Sum

from catalog.models import TERM_BLOCK_POSTINGS, Catalog, TermBlock

_FORWARD = """
    SELECT x.term_id, p.chunk_id, x.tf, p.length FROM catalog_postings p
    CROSS JOIN LATERAL unnest(p.terms, p.tfs) AS x(term_id, tf) WHERE p.catalog_id = %(catalog)s
"""


def _unpack(data: bytes) -> list[int]:
    return list(struct.unpack(f">{len(data) // 4}i", data))


def forward_postings(catalog: Catalog) -> set[tuple[int, int, int, int]]:
    """Every (term, chunk, tf, dl) that `catalog`'s forward rows (catalog_postings) hold."""
    with connection.cursor() as cursor:
        cursor.execute(_FORWARD, {"catalog": catalog.pk})
        rows = cursor.fetchall()
    postings = set(rows)
    assert len(postings) == len(rows), "a chunk holds a term twice"
    return postings


def term_blocks_mismatches(catalog: Catalog) -> list[tuple]:
    """What is wrong with `catalog`'s packed postings blocks: a block of the wrong shape
    (empty, over TERM_BLOCK_POSTINGS, out of order, its first, last, count, max tf or
    min dl not what it holds, overlapping the term's block before it, straddling a
    multiple of 2**31), and every posting the blocks hold that the catalog's forward
    rows do not, or the other way round."""
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
    posted = forward_postings(catalog)
    problems += [("blocks only", *row) for row in sorted(held - posted)]
    return problems + [("postings only", *row) for row in sorted(posted - held)]


def term_postings_mismatches(catalog: Catalog) -> list[tuple]:
    """Forward rows of `catalog` whose chunk no longer exists, that name a term which
    does not exist in the catalog, or whose tfs do not match their terms one for one,
    and what is wrong with the catalog's packed blocks (term_blocks_mismatches)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT 'forward row', p.chunk_id, x.term_id FROM catalog_postings p
            LEFT JOIN catalog_chunk c ON c.catalog_id = p.catalog_id AND c.id = p.chunk_id
            LEFT JOIN LATERAL unnest(p.terms) AS x(term_id) ON true
            LEFT JOIN catalog_term m ON m.id = x.term_id AND m.catalog_id = p.catalog_id
            WHERE p.catalog_id = %(catalog)s AND (c.id IS NULL OR x.term_id IS NOT NULL AND m.id IS NULL
                  OR cardinality(p.terms) <> cardinality(p.tfs))
            """,
            {"catalog": catalog.pk},
        )
        return cursor.fetchall() + term_blocks_mismatches(catalog)


def block_postings(catalog: Catalog | None = None) -> int:
    """How many postings the packed blocks hold: `catalog`'s, or every catalog's."""
    blocks = TermBlock.objects.filter(catalog=catalog) if catalog else TermBlock.objects.all()
    return blocks.aggregate(n=Sum("postings"))["n"] or 0


# Columns the migrations after 0020 add, which today's write path and searches read and
# write. A test of an older migration builds its database with today's code: it adds
# them while the schema is older (later_columns_add) and takes them away before
# migrating to the last migration again (later_columns_drop), which adds them for real.
LATER_COLUMNS = (
    ("catalog_chunk", "locator", "jsonb NOT NULL DEFAULT '{}'"),
    ("catalog_document", "locator", "jsonb NOT NULL DEFAULT '{}'"),
    ("catalog_referencesource", "ref", "varchar(255) NOT NULL DEFAULT ''"),
    ("catalog_referencesource", "include", "text NOT NULL DEFAULT ''"),
    ("catalog_referencesource", "exclude", "text NOT NULL DEFAULT ''"),
    ("catalog_referencesource", "secret_sealed", "text NOT NULL DEFAULT ''"),
    ("catalog_referencesource", "secret_hint", "varchar(16) NOT NULL DEFAULT ''"),
    ("catalog_referencesource", "sync", "jsonb NOT NULL DEFAULT '{}'"),
    ("catalog_indexrun", "skipped", "jsonb NOT NULL DEFAULT '[]'"),
    ("catalog_referencesource", "max_depth", "smallint NOT NULL DEFAULT 3"),
    ("catalog_referencesource", "max_pages", "integer NOT NULL DEFAULT 200"),
    ("catalog_catalog", "ranking", "jsonb NOT NULL DEFAULT '{}'"),
    ("catalog_catalog", "shadow_of_id", "bigint NULL"),
)


def later_columns_add() -> None:
    with connection.cursor() as cursor:
        for table, column, definition in LATER_COLUMNS:
            cursor.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {definition}")


def later_columns_drop() -> None:
    """Take them away, unless the database is at a schema that has them (a test that
    failed before it migrated back)."""
    from django.db.migrations.recorder import MigrationRecorder

    if ("catalog", "0021_locators") in MigrationRecorder(connection).applied_migrations():
        return
    with connection.cursor() as cursor:
        for table, column, _ in LATER_COLUMNS:
            cursor.execute(f"ALTER TABLE {table} DROP COLUMN IF EXISTS {column}")
