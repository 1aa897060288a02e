"""The documents a source holds now, and its fingerprint: glob files read as text
(catalog.sources.extraction: text, Markdown, HTML, PDF, DOCX, PPTX; those whose size
and mtime match the stored document are not read; one that cannot be read is skipped
with the reason), upload rows, the inline text, a git repository's files
(catalog.sources.repository) or a web site's pages (catalog.sources.website)."""

from __future__ import annotations

import os
from pathlib import Path

from django.db import transaction

from catalog.indexing.diffing import StoredDocument, stat_unchanged
from catalog.models import Document, ReferenceSource, UploadedFile
from catalog.sources.editors import content_read_locked
from catalog.sources.extraction import ExtractionError, extract, file_format
from catalog.sources.fingerprints import fingerprint, text_sha256, uploads_fingerprint
from catalog.sources.globs import glob_entries
from catalog.sources.inputs import Collected, DocumentInput, document_input, title_of
from catalog.sources.repository import git_collect, git_fingerprint_now
from catalog.sources.website import web_collect, web_fingerprint_now

__all__ = ["Collected", "DocumentInput", "document_input", "source_collect", "source_fingerprint",
           "stored_documents", "title_of"]


def _glob_stats(source: ReferenceSource) -> tuple[list[tuple[str, Path, os.stat_result]], list[tuple[str, str]]]:
    return glob_entries(source.location)


def source_fingerprint(*, source: ReferenceSource) -> str:
    """The fingerprint a source has now, computed without reading file contents."""
    if source.kind == ReferenceSource.Kind.GLOB:
        files, _ = _glob_stats(source)
        return fingerprint((relative, info.st_size, info.st_mtime) for relative, _, info in files)
    if source.kind == ReferenceSource.Kind.INLINE:
        return text_sha256(source.content)
    if source.kind == ReferenceSource.Kind.GIT:
        return git_fingerprint_now(source)
    if source.kind == ReferenceSource.Kind.WEB:
        return web_fingerprint_now(source)
    return uploads_fingerprint(UploadedFile.objects.filter(source=source).values_list("path", "sha256"))


def _read_glob(source: ReferenceSource, stored: dict[str, StoredDocument]) -> Collected:
    files, skipped = _glob_stats(source)
    documents, stats = [], []
    for relative, real, info in files:
        stats.append((relative, info.st_size, info.st_mtime))
        known = stored.get(relative)
        if file_format(relative) is not None and known is not None and stat_unchanged(known, info.st_size,
                                                                                      info.st_mtime):
            documents.append(DocumentInput(relative, "", None, info.st_size, info.st_mtime, known.sha256))
            continue
        if file_format(relative) is None:  # refused by its name, unread (a video a glob matched)
            skipped.append((relative, f"unsupported file type {real.suffix or '(none)'}"))
            continue
        try:
            extracted = extract(relative, real.read_bytes())
        except ExtractionError as exc:
            skipped.append((relative, str(exc)))
            continue
        documents.append(document_input(relative, extracted, info.st_size, info.st_mtime))
    return Collected(documents, skipped, fingerprint(stats))


def stored_documents(source: ReferenceSource) -> list[StoredDocument]:
    rows = Document.objects.filter(source=source).values_list("pk", "path", "content_sha256", "size", "mtime",
                                                              "chunking", "locator")
    return [StoredDocument(*row) for row in rows]


def source_collect(*, source: ReferenceSource, stored: list[StoredDocument] | None = None) -> Collected:
    """The documents a source holds now, with its fingerprint and the count of content
    edits they hold, read together (the pattern, text and upload rows under the
    row's share lock; a glob's files after it, as no person edits them). Glob files
    whose size and mtime match `stored` are not read (their text is None)."""
    with transaction.atomic():
        edits = content_read_locked(source)
        rows = _read_rows(source) if source.kind in _ROW_KINDS else None
    by_path = {doc.path: doc for doc in stored or []}
    if rows is not None:
        collected = rows
    elif source.kind == ReferenceSource.Kind.GIT:
        collected = git_collect(source, by_path)
    elif source.kind == ReferenceSource.Kind.WEB:
        collected = web_collect(source, by_path)
    else:
        collected = _read_glob(source, by_path)
    collected.edits = edits
    return collected


_ROW_KINDS = (ReferenceSource.Kind.INLINE, ReferenceSource.Kind.UPLOAD)  # read from the database


def _read_rows(source: ReferenceSource) -> Collected:
    if source.kind == ReferenceSource.Kind.INLINE:
        path = f"{source.slug}.md"
        doc = DocumentInput(path, source.name or source.slug, source.content, len(source.content.encode()),
                            locator={"format": "markdown"})
        return Collected([doc], [], doc.sha256)
    rows = UploadedFile.objects.filter(source=source).order_by("path")
    # an upload's text was read from its file when it was uploaded (catalog.sources.uploads)
    documents = [DocumentInput(u.path, u.title, u.text, u.size, None, u.sha256,
                               locator={"format": file_format(u.path) or "text"}) for u in rows]
    return Collected(documents, [], uploads_fingerprint((d.path, d.sha256) for d in documents))
