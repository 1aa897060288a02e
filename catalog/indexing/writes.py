"""Switching a source to its new rows in one transaction: documents, chunks (COPY),
forward and term-major postings, term document frequencies and the catalog's BM25
statistics. Readers see the old rows or the new ones, never a mix."""

from __future__ import annotations

from collections import Counter

import numpy as np
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from catalog.embedder import get_embedder, vector_literal
from catalog.indexing.blocks import term_blocks_extend, term_blocks_shrink
from catalog.indexing.chunks import PreparedChunk, chunking_stamp
from catalog.indexing.diffing import Diff
from catalog.models import Catalog, Document, ReferenceSource
from catalog.signals import content_switched
from catalog.sources.documents import Collected, DocumentInput, stored_documents
from catalog.sources.editors import content_editors_hand_over


def delete_document_rows(cursor: CursorWrapper, document_pks: list[int]) -> None:
    """Remove documents with their chunks and postings, releasing their term counts."""
    if not document_pks:
        return
    cursor.execute(
        """
        UPDATE catalog_term t SET df = t.df - x.n
        FROM (SELECT unnest(p.terms) AS term_id, count(*) AS n
              FROM catalog_postings p JOIN catalog_chunk c ON c.id = p.chunk_id
              WHERE c.document_id = ANY(%s) GROUP BY 1) x
        WHERE t.id = x.term_id
        """,
        [document_pks],
    )
    # Term-major rows by their key, from each chunk's term ids (no scan of the index).
    cursor.execute(
        """
        DELETE FROM catalog_termposting t
        USING catalog_chunk c JOIN catalog_postings p ON p.chunk_id = c.id, unnest(p.terms) AS x(term_id)
        WHERE c.document_id = ANY(%s) AND t.term_id = x.term_id AND t.chunk_id = c.id
        """,
        [document_pks],
    )
    term_blocks_shrink(cursor, document_pks)
    cursor.execute(
        "DELETE FROM catalog_postings p USING catalog_chunk c WHERE c.id = p.chunk_id AND c.document_id = ANY(%s)",
        [document_pks],
    )
    cursor.execute("DELETE FROM catalog_chunk WHERE document_id = ANY(%s)", [document_pks])
    cursor.execute("DELETE FROM catalog_document WHERE id = ANY(%s)", [document_pks])


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


def _write_chunks(cursor: CursorWrapper, source: ReferenceSource, documents: list[Document],
                  prepared: list[PreparedChunk], vectors: np.ndarray | None) -> None:
    cursor.execute(
        "SELECT nextval(pg_get_serial_sequence('catalog_chunk', 'id')) FROM generate_series(1, %s)", [len(prepared)]
    )
    ids = [row[0] for row in cursor.fetchall()]
    df: Counter[str] = Counter()
    for item in prepared:
        df.update(item.terms.keys())
    term_ids = _upsert_terms(cursor, source.catalog_id, df)
    prefix = f"{source.catalog.slug}:{source.slug}:"
    raw = cursor.cursor  # psycopg cursor: COPY is far faster than INSERTs here
    columns = ("id, key, catalog_id, source_id, document_id, ordinal, byte_offset, content, heading, token_count, "
               "embedding")
    with raw.copy(f"COPY catalog_chunk ({columns}) FROM STDIN") as copy:
        for i, item in enumerate(prepared):
            doc = documents[item.document]
            vector = vector_literal(vectors[i]) if vectors is not None else None
            copy.write_row((ids[i], f"{prefix}{doc.path}:{item.chunk.byte_offset}", source.catalog_id, source.id,
                            doc.id, item.chunk.ordinal, item.chunk.byte_offset, item.chunk.content,
                            item.heading, item.token_count, vector))
    with raw.copy("COPY catalog_postings (chunk_id, catalog_id, length, terms, tfs) FROM STDIN") as copy:
        for i, item in enumerate(prepared):
            terms = sorted(item.terms.items(), key=lambda kv: term_ids[kv[0]])
            copy.write_row((ids[i], source.catalog_id, item.length,
                            [term_ids[t] for t, _ in terms], [n for _, n in terms]))
    # The same postings term-major, in key order: BM25 reads these.
    cursor.execute(
        """
        INSERT INTO catalog_termposting (term_id, chunk_id, tf, dl)
        SELECT x.term_id, p.chunk_id, x.tf, p.length
        FROM catalog_postings p CROSS JOIN LATERAL unnest(p.terms, p.tfs) AS x(term_id, tf)
        WHERE p.chunk_id = ANY(%s) ORDER BY 1, 2
        """,
        [ids],
    )
    least: dict[int, int] = {}  # each term's least new chunk id: where its blocks change
    for chunk_id, item in zip(ids, prepared, strict=True):
        for term in item.terms:
            least[term_ids[term]] = min(least.get(term_ids[term], chunk_id), chunk_id)
    term_blocks_extend(cursor, source.catalog_id, least)


def source_apply_diff(source: ReferenceSource, collected: Collected, diff: Diff[DocumentInput],
                      prepared: list[PreparedChunk], vectors: np.ndarray | None, *, chunking: str) -> None:
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
            delete_document_rows(cursor, diff.stale_pks)
            documents = Document.objects.bulk_create([
                Document(catalog_id=source.catalog_id, source=source, path=d.path, title=d.title, text=d.loaded_text,
                         content_sha256=d.sha256, size=d.size, mtime=d.mtime, chunking=chunking)
                for d in diff.to_index
            ])
            for pk, size, mtime in diff.restat:
                Document.objects.filter(pk=pk).update(size=size, mtime=mtime)
            if prepared:
                _write_chunks(cursor, source, documents, prepared, vectors)
            refresh_catalog_stats(cursor, source.catalog_id)
        status = ReferenceSource.Status.READY if vectors is not None else ReferenceSource.Status.LEXICAL_ONLY
        ReferenceSource.objects.filter(pk=source.pk).update(
            status=status, fingerprint=collected.fingerprint, last_error=_skipped_note(collected.skipped),
            indexed_at=timezone.now(),
        )
        if old_fingerprint is None:  # deleted meanwhile: its rows went with it
            return
        replaced = old_fingerprint != collected.fingerprint
        content_editors_hand_over(source_id=source.pk, edits=collected.edits, replaced=replaced)
        if replaced:
            content_switched.send(sender=ReferenceSource, source_id=source.pk, old_fingerprint=old_fingerprint,
                                  new_fingerprint=collected.fingerprint)


def source_replace_rows(source: ReferenceSource, collected: Collected, prepared: list[PreparedChunk],
                        vectors: np.ndarray | None) -> None:
    """Replace all of a source's rows by `collected` (chunks prepared from all of it, by
    the catalog's settings and model now: so its documents are stamped)."""
    diff = Diff(added=list(collected.documents), removed=[doc.pk for doc in stored_documents(source)])
    source_apply_diff(source, collected, diff, prepared, vectors,
                      chunking=chunking_stamp(source.catalog, get_embedder()))


def _skipped_note(skipped: list[tuple[str, str]]) -> str:
    return "\n".join(f"skipped {path}: {reason}" for path, reason in skipped)
