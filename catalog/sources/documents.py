"""The documents a source holds now, and its fingerprint: glob files read as UTF-8 text
(those whose size and mtime match the stored document are not read), upload rows, or
the inline text."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from django.db import transaction

from catalog.indexing.diffing import StoredDocument, stat_unchanged
from catalog.models import Document, ReferenceSource, UploadedFile
from catalog.sources.editors import content_read_locked
from catalog.sources.fingerprints import fingerprint, text_sha256, uploads_fingerprint
from catalog.sources.globs import glob_entries

TEXT_SUFFIXES = {".md", ".markdown", ".txt", ".rst"}


@dataclass
class DocumentInput:
    path: str
    title: str
    text: str | None  # None: not read, unchanged by size and mtime (see catalog.indexing.diffing)
    size: int
    mtime: float | None = None
    sha256: str = ""
    replaces: int | None = None  # the stored document this one supersedes

    def __post_init__(self) -> None:
        if not self.sha256 and self.text is not None:
            self.sha256 = text_sha256(self.text)

    @property
    def loaded_text(self) -> str:
        """The text of a document being indexed or stored: always read by then (a full
        rebuild first reads what the stat cache skipped: _read_unread)."""
        if self.text is None:
            raise RuntimeError(f"{self.path}: its text was never read")
        return self.text


@dataclass
class Collected:
    documents: list[DocumentInput]
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    fingerprint: str = ""
    edits: int = 0  # how many content edits of the source it holds (catalog.sources.editors)


def title_of(path: str, text: str) -> str:
    """A document's title: its first level-one markdown heading, else its file name."""
    for line in text.splitlines()[:50]:
        if line.startswith("# "):
            return line[2:].strip()[:500]
    return PurePosixPath(path).stem.replace("-", " ").replace("_", " ")[:500]


def _glob_stats(source: ReferenceSource) -> tuple[list[tuple[str, Path, os.stat_result]], list[tuple[str, str]]]:
    return glob_entries(source.location)


def source_fingerprint(*, source: ReferenceSource) -> str:
    """The fingerprint a source has now, computed without reading file contents."""
    if source.kind == ReferenceSource.Kind.GLOB:
        files, _ = _glob_stats(source)
        return fingerprint((relative, info.st_size, info.st_mtime) for relative, _, info in files)
    if source.kind == ReferenceSource.Kind.INLINE:
        return text_sha256(source.content)
    return uploads_fingerprint(UploadedFile.objects.filter(source=source).values_list("path", "sha256"))


def _read_glob(source: ReferenceSource, stored: dict[str, StoredDocument]) -> Collected:
    files, skipped = _glob_stats(source)
    documents, stats = [], []
    for relative, real, info in files:
        stats.append((relative, info.st_size, info.st_mtime))
        if real.suffix.lower() not in TEXT_SUFFIXES:
            skipped.append((relative, f"unsupported file type {real.suffix or '(none)'}; md, txt and rst are read"))
            continue
        known = stored.get(relative)
        if known is not None and stat_unchanged(known, info.st_size, info.st_mtime):
            documents.append(DocumentInput(relative, "", None, info.st_size, info.st_mtime, known.sha256))
            continue
        try:
            text = real.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            skipped.append((relative, f"not UTF-8 text (byte {exc.start})"))
            continue
        documents.append(DocumentInput(relative, title_of(relative, text), text, info.st_size, info.st_mtime))
    return Collected(documents, skipped, fingerprint(stats))


def stored_documents(source: ReferenceSource) -> list[StoredDocument]:
    rows = Document.objects.filter(source=source).values_list("pk", "path", "content_sha256", "size", "mtime",
                                                              "chunking")
    return [StoredDocument(*row) for row in rows]


def source_collect(*, source: ReferenceSource, stored: list[StoredDocument] | None = None) -> Collected:
    """The documents a source holds now, with its fingerprint and the count of content
    edits they hold, read together (the pattern, text and upload rows under the
    row's share lock; a glob's files after it, as no person edits them). Glob files
    whose size and mtime match `stored` are not read (their text is None)."""
    with transaction.atomic():
        edits = content_read_locked(source)
        rows = None if source.kind == ReferenceSource.Kind.GLOB else _read_rows(source)
    collected = _read_glob(source, {doc.path: doc for doc in stored or []}) if rows is None else rows
    collected.edits = edits
    return collected


def _read_rows(source: ReferenceSource) -> Collected:
    if source.kind == ReferenceSource.Kind.INLINE:
        path = f"{source.slug}.md"
        doc = DocumentInput(path, source.name or source.slug, source.content, len(source.content.encode()))
        return Collected([doc], [], doc.sha256)
    rows = UploadedFile.objects.filter(source=source).order_by("path")
    documents = [DocumentInput(u.path, u.title, u.text, u.size, None, u.sha256) for u in rows]
    return Collected(documents, [], uploads_fingerprint((d.path, d.sha256) for d in documents))
