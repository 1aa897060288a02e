"""Bringing one source's index up to date: resolve its files, chunk, embed, write.

source_index() orchestrates:
  1. collect the source's documents (glob files under a source root, upload rows, inline text)
  2. chunk each document to fit the embedding model; analyse each chunk into postings
  3. embed all chunks in length-sorted batches (outside any transaction)
  4. in one transaction: replace the source's documents, chunks and postings, adjust
     term document frequencies and recompute the catalog's BM25 statistics
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from catalog.embedder import get_embedder
from catalog.indexing.chunks import current_cut, prepare_chunks
from catalog.indexing.diffing import diff_documents
from catalog.indexing.embedding_cache import embed_texts
from catalog.indexing.writes import source_apply_diff
from catalog.models import Document, ReferenceSource
from catalog.progress import Progress
from catalog.sources.documents import DocumentInput, source_collect, stored_documents

logger = logging.getLogger(__name__)


@dataclass
class IndexReport:
    documents: int  # in the source now
    chunks: int  # written by this run
    embedded: bool
    skipped: list[tuple[str, str]]
    timings: dict[str, float]
    reused_embeddings: int = 0
    added: int = 0
    changed: int = 0
    removed: int = 0
    unchanged: int = 0

    @property
    def counts(self) -> dict[str, int]:
        return {"documents_added": self.added, "documents_changed": self.changed,
                "documents_removed": self.removed, "documents_unchanged": self.unchanged,
                "chunks_embedded": self.chunks - self.reused_embeddings if self.embedded else 0,
                "chunks_reused": self.reused_embeddings, "chunks_written": self.chunks}


def source_index(*, source: ReferenceSource, progress: Progress | None = None, full: bool = False) -> IndexReport:
    """Bring a source's index up to date; see the module docstring for the steps.

    Only added and changed documents are chunked and embedded (`full` re-does all); a
    document cut otherwise than this run would cut it counts as changed (with no model
    loaded, only a change of chunker, size or overlap does: CurrentCut).
    On failure the source keeps its previous rows and records the error.
    """
    timings: dict[str, float] = {}
    started = time.perf_counter()
    ReferenceSource.objects.filter(pk=source.pk).update(status=ReferenceSource.Status.INDEXING)
    try:
        embedder = get_embedder()
        cut = current_cut(source.catalog, embedder)
        stored = stored_documents(source)
        collected = source_collect(source=source, stored=stored)
        diff = diff_documents(stored, collected.documents, cut_as_now=cut.holds, full=full)
        _read_unread(source, diff.changed)
        timings["collect"] = time.perf_counter() - started
        _report(progress, "collect")
        prepared = prepare_chunks(source.catalog, diff.to_index, embedder)
        timings["chunk"] = time.perf_counter() - started - sum(timings.values())
        _report(progress, "chunk")
        vectors, reused = None, 0
        if embedder is not None:
            vectors, reused = embed_texts(embedder, [p.text for p in prepared], progress)
        timings["embed"] = time.perf_counter() - started - sum(timings.values())
        source_apply_diff(source, collected, diff, prepared, vectors, chunking=cut.stamp, progress=progress)
        timings["write"] = time.perf_counter() - started - sum(timings.values())
        _report(progress, "write")
    except Exception as exc:
        ReferenceSource.objects.filter(pk=source.pk).update(status=ReferenceSource.Status.ERROR,
                                                             last_error=f"{type(exc).__name__}: {exc}")
        raise
    logger.info("indexed %s: +%d ~%d -%d =%d documents, %d chunks in %.2fs", source, len(diff.added),
                len(diff.changed), len(diff.removed), diff.unchanged, len(prepared), time.perf_counter() - started)
    return IndexReport(len(collected.documents), len(prepared), embedder is not None, collected.skipped, timings,
                       reused, len(diff.added), len(diff.changed), len(diff.removed), diff.unchanged)


def _report(progress: Progress | None, stage: str) -> None:
    if progress:
        progress(stage, 1, 1)


def _read_unread(source: ReferenceSource, documents: list[DocumentInput]) -> None:
    """Re-indexing an unchanged document (a full run, or one cut otherwise) needs the
    text of files the stat cache skipped."""
    unread = {doc.replaces: doc for doc in documents if doc.text is None and doc.replaces is not None}
    for old in Document.objects.filter(pk__in=list(unread)):
        unread[old.pk].text, unread[old.pk].title, unread[old.pk].locator = old.text, old.title, old.locator
