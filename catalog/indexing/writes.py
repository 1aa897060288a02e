"""Switching a source to its new rows in one transaction: documents, chunks (COPY),
forward postings and the BM25 blocks packed from them, term document frequencies and
the catalog's BM25 statistics. Readers see the old rows or the new ones, never a mix."""

from __future__ import annotations

import struct
from collections import Counter

import numpy as np
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.utils import timezone
from psycopg.adapt import Dumper
from psycopg.pq import Format
from psycopg.types.json import Jsonb

from catalog.embedder import get_embedder
from catalog.indexing.blocks import term_blocks_extend, term_blocks_shrink
from catalog.indexing.bulk import catalog_indexes_ensure, catalog_loading_across_writes
from catalog.indexing.chunks import PreparedChunk, chunking_stamp
from catalog.indexing.diffing import Diff
from catalog.models import Catalog, Document, ReferenceSource
from catalog.progress import Progress
from catalog.signals import content_switched
from catalog.sources.documents import Collected, DocumentInput, stored_documents
from catalog.sources.editors import content_editors_hand_over


def delete_document_rows(cursor: CursorWrapper, catalog_id: int, document_pks: list[int]) -> None:
    """Remove documents of the catalog with their chunks and postings, releasing their
    term counts. Every statement names the catalog: Postgres reads its partitions only."""
    if not document_pks:
        return
    params: dict[str, int | list[int]] = {"catalog": catalog_id, "documents": document_pks}
    cursor.execute(
        """
        UPDATE catalog_term t SET df = t.df - x.n
        FROM (SELECT unnest(p.terms) AS term_id, count(*) AS n
              FROM catalog_postings p JOIN catalog_chunk c ON c.catalog_id = p.catalog_id AND c.id = p.chunk_id
              WHERE c.catalog_id = %(catalog)s AND c.document_id = ANY(%(documents)s) GROUP BY 1) x
        WHERE t.id = x.term_id
        """,
        params,
    )
    term_blocks_shrink(cursor, catalog_id, document_pks)
    cursor.execute(
        "DELETE FROM catalog_postings p USING catalog_chunk c WHERE c.catalog_id = %(catalog)s "
        "AND c.document_id = ANY(%(documents)s) AND p.catalog_id = %(catalog)s AND p.chunk_id = c.id",
        params,
    )
    cursor.execute("DELETE FROM catalog_chunk WHERE catalog_id = %(catalog)s AND document_id = ANY(%(documents)s)",
                   params)
    cursor.execute("DELETE FROM catalog_document WHERE id = ANY(%(documents)s)", params)


def _upsert_terms(cursor: CursorWrapper, catalog_id: int, df: Counter[str]) -> dict[str, int]:
    if not df:
        return {}
    texts = sorted(df)  # a fixed order: concurrent writers lock term rows alike
    cursor.execute(
        """
        INSERT INTO catalog_term (catalog_id, text, df)
        SELECT %s, t, d FROM unnest(%s::text[], %s::int[]) AS x(t, d) ORDER BY t
        ON CONFLICT (catalog_id, text) DO UPDATE SET df = catalog_term.df + EXCLUDED.df
        RETURNING id, text
        """,
        [catalog_id, texts, [df[t] for t in texts]],
    )
    return {text: term_id for term_id, text in cursor.fetchall()}


def refresh_catalog_stats(cursor: CursorWrapper, catalog_id: int) -> None:
    """Recompute N, total length and the vocabulary's idf sum (rank_bm25's average idf)."""
    cursor.execute("DELETE FROM catalog_term WHERE catalog_id = %s AND df <= 0", [catalog_id])
    cursor.execute(
        "SELECT count(*), coalesce(sum(length), 0) FROM catalog_postings WHERE catalog_id = %s", [catalog_id]
    )
    n_chunks, total = cursor.fetchone()
    cursor.execute(
        """
        SELECT count(*), coalesce(sum(ln(%s - df + 0.5) - ln(df + 0.5)), 0)
        FROM catalog_term WHERE catalog_id = %s
        """,
        [float(n_chunks), catalog_id],
    )
    n_terms, idf_sum = cursor.fetchone()
    Catalog.objects.filter(pk=catalog_id).update(
        chunk_count=n_chunks, token_total=total, term_count=n_terms, idf_sum=idf_sum, updated_at=timezone.now()
    )


# COPY's binary form of pgvector's vector: dimensions and a reserved word (int16 each),
# then the values as big-endian float4; numpy makes a whole batch's at once, where the
# text form cost about 0.3 ms per vector to format (docs/benchmarks.md, "Bulk builds").
class _VectorBinaryDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj: bytes) -> bytes:
        return obj


class _VectorBytes(bytes):
    """A vector already in COPY's binary form (dumped as is, as type `vector`)."""


def _vector_rows(vectors: np.ndarray | None, count: int) -> list[_VectorBytes | None]:
    if vectors is None:
        return [None] * count
    header = struct.pack(">HH", vectors.shape[1], 0)
    values = np.ascontiguousarray(vectors, dtype=">f4")
    return [_VectorBytes(header + row.tobytes()) for row in values]


class _Int4ArrayBytes(bytes):
    """An int4[] already in COPY's binary form (dumped as is)."""


class _Int4ArrayDumper(_VectorBinaryDumper):
    oid = 1007  # int4[]


_INT4_ARRAY_HEAD = struct.Struct(">iiiii")  # dimensions, has nulls, element type, size, lower bound


def _int4_array(values: np.ndarray) -> _Int4ArrayBytes:
    """`values` as an int4[] in COPY's binary form: its header, then each element's
    length (4) and value; numpy lays them out, where psycopg's list dumper looks at
    every element (about a third of a bulk write's time in Python)."""
    elements = np.empty((len(values), 2), dtype=">i4")
    elements[:, 0] = 4
    elements[:, 1] = values
    return _Int4ArrayBytes(_INT4_ARRAY_HEAD.pack(1, 0, 23, len(values), 1) + elements.tobytes())


DOCUMENT_COLUMNS = ("id", "catalog_id", "source_id", "path", "title", "text", "content_sha256", "size", "mtime",
                    "chunking", "created_at", "locator")
DOCUMENT_TYPES = ("int8", "int8", "int8", "text", "text", "text", "text", "int8", "float8", "text", "timestamptz",
                  "jsonb")


def _copy_documents(cursor: CursorWrapper, source: ReferenceSource, inputs: list[DocumentInput],
                    chunking: str) -> list[Document]:
    """Insert the documents by COPY (ids drawn from their sequence first); the rows as
    models. The ORM's bulk INSERT spent more in Python than Postgres spent storing them."""
    if not inputs:
        return []
    cursor.execute("SELECT nextval(pg_get_serial_sequence('catalog_document', 'id')) FROM generate_series(1, %s)",
                   [len(inputs)])
    ids = [row[0] for row in cursor.fetchall()]
    now = timezone.now()
    documents = [Document(id=pk, catalog_id=source.catalog_id, source=source, path=d.path, title=d.title,
                          text=d.loaded_text, content_sha256=d.sha256, size=d.size, mtime=d.mtime, chunking=chunking,
                          created_at=now, locator=d.locator) for pk, d in zip(ids, inputs, strict=True)]
    for document in documents:
        document._state.adding, document._state.db = False, connection.alias  # stored below, as bulk_create marks them
    statement = f"COPY catalog_document ({', '.join(DOCUMENT_COLUMNS)}) FROM STDIN (FORMAT BINARY)"
    with cursor.cursor.copy(statement) as copy:
        copy.set_types(DOCUMENT_TYPES)
        for d in documents:
            copy.write_row((d.pk, d.catalog_id, d.source_id, d.path, d.title, d.text, d.content_sha256, d.size,
                            d.mtime, d.chunking, now, Jsonb(d.locator)))
    return documents


CHUNK_COLUMNS = ("id", "catalog_id", "source_id", "document_id", "byte_offset", "ordinal", "token_count", "key",
                 "heading", "content", "locator", "embedding")
CHUNK_TYPES = ("int8", "int8", "int8", "int8", "int8", "int4", "int4", "text", "text", "text", "jsonb")
# Rows per COPY statement, each followed by a progress report: a bar moves without a
# call per row. A report is never made inside a COPY: the run's progress is written on
# this same connection, which the COPY holds until it ends (a report there waited for
# it forever: a run of 10,000 chunks or more hung).
PROGRESS_ROWS = 10_000


def _copy_chunks(cursor: CursorWrapper, source: ReferenceSource, documents: list[Document],
                 prepared: list[PreparedChunk], ids: list[int], vectors: np.ndarray | None,
                 progress: Progress | None) -> None:
    raw = cursor.cursor  # psycopg cursor: COPY is far faster than INSERTs here
    cursor.execute("SELECT 'vector'::regtype::oid")
    vector_oid = cursor.fetchone()[0]
    raw.adapters.register_dumper(_VectorBytes, type("VectorDumper", (_VectorBinaryDumper,), {"oid": vector_oid}))
    prefix = f"{source.catalog.slug}:{source.slug}:"
    embeddings = _vector_rows(vectors, len(prepared))
    for start in range(0, len(prepared), PROGRESS_ROWS):
        end = min(start + PROGRESS_ROWS, len(prepared))
        with raw.copy(f"COPY catalog_chunk ({', '.join(CHUNK_COLUMNS)}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types([*CHUNK_TYPES, vector_oid])
            for i in range(start, end):
                item = prepared[i]
                doc = documents[item.document]
                copy.write_row((ids[i], source.catalog_id, source.id, doc.id, item.chunk.byte_offset,
                                item.chunk.ordinal, item.token_count, f"{prefix}{doc.path}:{item.chunk.byte_offset}",
                                item.heading, item.chunk.content, Jsonb(item.locator), embeddings[i]))
        if progress and end < len(prepared):
            progress("write", end, len(prepared))


def _write_chunks(cursor: CursorWrapper, source: ReferenceSource, documents: list[Document],
                  prepared: list[PreparedChunk], vectors: np.ndarray | None,
                  progress: Progress | None) -> list[int]:
    """Write the chunks and their forward postings; the new chunks' ids."""
    cursor.execute(
        "SELECT nextval(pg_get_serial_sequence('catalog_chunk', 'id')) FROM generate_series(1, %s)", [len(prepared)]
    )
    ids = [row[0] for row in cursor.fetchall()]
    df: Counter[str] = Counter()
    for item in prepared:
        df.update(item.terms.keys())
    term_ids = _upsert_terms(cursor, source.catalog_id, df)
    _copy_chunks(cursor, source, documents, prepared, ids, vectors, progress)
    raw = cursor.cursor
    raw.adapters.register_dumper(_Int4ArrayBytes, _Int4ArrayDumper)
    statement = "COPY catalog_postings (catalog_id, chunk_id, length, terms, tfs) FROM STDIN (FORMAT BINARY)"
    with raw.copy(statement) as copy:
        copy.set_types(["int8", "int8", "int4", "int4[]", "int4[]"])
        for i, item in enumerate(prepared):
            pairs = np.array(sorted((term_ids[t], n) for t, n in item.terms.items()), dtype=np.int64).reshape(-1, 2)
            copy.write_row((source.catalog_id, ids[i], item.length, _int4_array(pairs[:, 0]),
                            _int4_array(pairs[:, 1])))
    if progress:
        progress("write", len(prepared), len(prepared))
    return ids


def source_apply_diff(source: ReferenceSource, collected: Collected, diff: Diff[DocumentInput],
                      prepared: list[PreparedChunk], vectors: np.ndarray | None, *, chunking: str,
                      progress: Progress | None = None) -> None:
    """Switch the source to its new state in one transaction: readers see the old rows
    or the new ones, never a mix; unchanged documents and their chunks are untouched,
    new ones record `chunking`, how `prepared` was cut. The people whose edits it holds
    become its authors (catalog.sources.editors). When the fingerprint moves,
    `content_switched` is sent before the commit, so what acts on it (approvals lapse,
    which reads those authors) commits or fails with the switch."""
    with transaction.atomic():
        # One writer per catalog at a time: term frequencies and statistics stay exact.
        # no_key: rows that reference the catalog (runs, sources) can still be inserted.
        Catalog.objects.select_for_update(no_key=True).filter(pk=source.catalog_id).first()
        old_fingerprint = ReferenceSource.objects.filter(pk=source.pk).values_list("fingerprint", flat=True).first()
        with connection.cursor() as cursor:
            delete_document_rows(cursor, source.catalog_id, diff.stale_pks)
            documents = _copy_documents(cursor, source, diff.to_index, chunking)
            for pk, size, mtime in diff.restat:
                Document.objects.filter(pk=pk).update(size=size, mtime=mtime)
            for pk, locator in diff.relocated:
                Document.objects.filter(pk=pk).update(locator=locator)
            new_ids = _write_chunks(cursor, source, documents, prepared, vectors, progress) if prepared else []
            refresh_catalog_stats(cursor, source.catalog_id)
            # A build of the catalog's indexes packs all its BM25 blocks (catalog.indexing.bulk);
            # else the new chunks' postings are merged into them here, or once the load
            # across writes ends.
            built = catalog_indexes_ensure(cursor, source.catalog_id)
            if not built and not catalog_loading_across_writes(source.catalog_id):
                term_blocks_extend(cursor, source.catalog_id, new_ids)
        status = ReferenceSource.Status.READY if vectors is not None else ReferenceSource.Status.LEXICAL_ONLY
        ReferenceSource.objects.filter(pk=source.pk).update(
            status=status, fingerprint=collected.fingerprint, last_error=_skipped_note(collected.skipped),
            indexed_at=timezone.now(), **({"sync": collected.sync} if collected.sync else {}),
        )
        if old_fingerprint is None:  # deleted meanwhile: its rows went with it
            return
        replaced = old_fingerprint != collected.fingerprint
        content_editors_hand_over(source_id=source.pk, edits=collected.edits, replaced=replaced)
        if replaced:
            content_switched.send(sender=ReferenceSource, source_id=source.pk, old_fingerprint=old_fingerprint,
                                  new_fingerprint=collected.fingerprint)


def source_replace_rows(source: ReferenceSource, collected: Collected, prepared: list[PreparedChunk],
                        vectors: np.ndarray | None, progress: Progress | None = None) -> None:
    """Replace all of a source's rows by `collected` (chunks prepared from all of it, by
    the catalog's settings and model now: so its documents are stamped)."""
    diff = Diff(added=list(collected.documents), removed=[doc.pk for doc in stored_documents(source)])
    source_apply_diff(source, collected, diff, prepared, vectors,
                      chunking=chunking_stamp(source.catalog, get_embedder()), progress=progress)


def _skipped_note(skipped: list[tuple[str, str]]) -> str:
    return "\n".join(f"skipped {path}: {reason}" for path, reason in skipped)
