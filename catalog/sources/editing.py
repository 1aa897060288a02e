"""What curators write into sources: the files of upload sources (one at a time, or all of
them at once for an import) and the text of inline sources. The next index run reads it."""

from __future__ import annotations

from django.db import transaction

from catalog.models import Catalog, ReferenceSource, UploadedFile
from catalog.sources.documents import DocumentInput
from catalog.sources.errors import SourceError
from catalog.sources.upload_paths import upload_path_problem


def upload_source_ensure(*, catalog: Catalog, slug: str) -> ReferenceSource:
    """The upload source `slug` of `catalog`, created if missing."""
    source, _ = ReferenceSource.objects.get_or_create(
        catalog=catalog, slug=slug,
        defaults={"name": slug, "kind": ReferenceSource.Kind.UPLOAD, "location": slug},
    )
    if source.kind != ReferenceSource.Kind.UPLOAD:
        raise SourceError(f"source {slug!r} exists and is a {source.kind} source, not an upload")
    return source


def uploads_replace(*, source: ReferenceSource, documents: list[DocumentInput]) -> None:
    with transaction.atomic():
        UploadedFile.objects.filter(source=source).delete()
        UploadedFile.objects.bulk_create([
            UploadedFile(source=source, path=d.path, title=d.title, text=d.loaded_text, sha256=d.sha256, size=d.size)
            for d in documents
        ])


def upload_put(*, source: ReferenceSource, path: str, title: str, text: str) -> UploadedFile:
    """Add or replace one file of an upload source (the next run indexes it). The API
    refuses a bad path with a 400 first: here it is an invariant."""
    if source.kind != ReferenceSource.Kind.UPLOAD:
        raise SourceError(f"source {source.slug!r} is a {source.kind} source; only upload sources take files")
    if problem := upload_path_problem(path):
        raise ValueError(f"invalid upload path {path!r}: {problem}")
    doc = DocumentInput(path, title, text, len(text.encode("utf-8")))
    upload, _ = UploadedFile.objects.update_or_create(
        source=source, path=path, defaults={"title": title, "text": text, "sha256": doc.sha256, "size": doc.size})
    return upload


def upload_delete(*, source: ReferenceSource, path: str) -> bool:
    """Remove one file of an upload source; False when it has no such file."""
    if source.kind != ReferenceSource.Kind.UPLOAD:
        raise SourceError(f"source {source.slug!r} is a {source.kind} source; only upload sources have files to delete")
    return UploadedFile.objects.filter(source=source, path=path).delete()[0] > 0


def inline_set(*, source: ReferenceSource, content: str) -> ReferenceSource:
    if source.kind != ReferenceSource.Kind.INLINE:
        raise SourceError(f"source {source.slug!r} is a {source.kind} source, not inline")
    source.content = content
    source.full_clean()
    source.save(update_fields=["content", "updated_at"])
    return source
