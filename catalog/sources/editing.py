"""What curators write into sources: the files of upload sources (one at a time, or all of
them at once for an import) and the text of inline sources. The next index run reads it.

Each edit records who made it (`ReferenceSource.changed_by`: the person, or None for a
command, an import or an agent), and an edit of the content counts itself and keeps its
person among the source's content editors until a reindex switches it in
(catalog.sources.editors), which self-approval and four eyes read. A person's edit, and
any change of what governs a source, is audited in the edit's transaction."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.models import User
from django.db import transaction

from catalog.audit.log import Action, Actor, AuditEvent, audit_append
from catalog.models import Catalog, ReferenceSource, UploadedFile
from catalog.sources.documents import DocumentInput
from catalog.sources.editors import content_edit_record, is_content_edit
from catalog.sources.errors import SourceError
from catalog.sources.upload_paths import upload_path_problem
from catalog.sources.uploads import text_size_problem

# Edits that change what governs a source: audited even when no person made them.
GOVERNING_FIELDS = {"requires_approval", "catalog", "tags"}


def upload_source_ensure(*, catalog: Catalog, slug: str) -> ReferenceSource:
    """The upload source `slug` of `catalog`, created if missing."""
    source, _ = ReferenceSource.objects.get_or_create(
        catalog=catalog, slug=slug,
        defaults={"name": slug, "kind": ReferenceSource.Kind.UPLOAD, "location": slug},
    )
    if source.kind != ReferenceSource.Kind.UPLOAD:
        raise SourceError(f"source {slug!r} exists and is a {source.kind} source, not an upload")
    return source


@transaction.atomic
def source_changed_by(*, source: ReferenceSource, by: User | None, fields: Iterable[str]) -> None:
    """Record who last changed `source` (None: no person), and who changed its content
    when `fields` name it; audit a person's edit (four eyes remembers who) or a change
    of what governs the source. Inside the edit's transaction."""
    changed = sorted(fields)
    ReferenceSource.objects.filter(pk=source.pk).update(changed_by=by)
    if is_content_edit(changed):
        content_edit_record(source_id=source.pk, by=by)
    source.changed_by = by
    if by is None and not GOVERNING_FIELDS.intersection(changed):
        return
    audit_append(AuditEvent(Action.SOURCE_CHANGED, Actor.of(by), source_id=source.pk, payload={
        "source": f"{source.catalog.slug}/{source.slug}", "fields": changed,
        "requires_approval": source.requires_approval}))


def uploads_write(*, source: ReferenceSource, documents: list[DocumentInput]) -> None:
    """Add or replace these files of an upload source, announcing nothing: for a caller
    that announces the whole edit once (uploads_add, uploads_replace, creating a source)."""
    UploadedFile.objects.bulk_create(
        [UploadedFile(source=source, path=d.path, title=d.title, text=d.loaded_text, sha256=d.sha256, size=d.size)
         for d in documents],
        update_conflicts=True, unique_fields=["source", "path"], update_fields=["title", "text", "sha256", "size",
                                                                                "updated_at"])


def uploads_replace(*, source: ReferenceSource, documents: list[DocumentInput], by: User | None = None) -> None:
    with transaction.atomic():
        UploadedFile.objects.filter(source=source).delete()
        uploads_write(source=source, documents=documents)
        source_changed_by(source=source, by=by, fields=["files"])


@transaction.atomic
def uploads_add(*, source: ReferenceSource, documents: list[DocumentInput], by: User | None = None) -> int:
    """Add or replace several files of an upload source at once (the dashboard's upload):
    one change, announced once; how many files. Each was read by
    catalog.sources.uploads.upload_text."""
    if source.kind != ReferenceSource.Kind.UPLOAD:
        raise SourceError(f"source {source.slug!r} is a {source.kind} source; only upload sources take files")
    uploads_write(source=source, documents=documents)
    source_changed_by(source=source, by=by, fields=["files"])
    return len(documents)


@transaction.atomic
def upload_put(*, source: ReferenceSource, path: str, title: str, text: str, by: User | None = None) -> UploadedFile:
    """Add or replace one file of an upload source (the next run indexes it). The API
    refuses a bad path or a text too large with a 400 first: here they are invariants."""
    if source.kind != ReferenceSource.Kind.UPLOAD:
        raise SourceError(f"source {source.slug!r} is a {source.kind} source; only upload sources take files")
    if problem := upload_path_problem(path):
        raise ValueError(f"invalid upload path {path!r}: {problem}")
    doc = DocumentInput(path, title, text, len(text.encode("utf-8")))
    if problem := text_size_problem(doc.size):
        raise ValueError(f"upload {path!r} {problem}")
    upload, _ = UploadedFile.objects.update_or_create(
        source=source, path=path, defaults={"title": title, "text": text, "sha256": doc.sha256, "size": doc.size})
    source_changed_by(source=source, by=by, fields=["files"])
    return upload


@transaction.atomic
def upload_delete(*, source: ReferenceSource, path: str, by: User | None = None) -> bool:
    """Remove one file of an upload source; False when it has no such file."""
    if source.kind != ReferenceSource.Kind.UPLOAD:
        raise SourceError(f"source {source.slug!r} is a {source.kind} source; only upload sources have files to delete")
    deleted = UploadedFile.objects.filter(source=source, path=path).delete()[0] > 0
    if deleted:
        source_changed_by(source=source, by=by, fields=["files"])
    return deleted


@transaction.atomic
def inline_set(*, source: ReferenceSource, content: str, by: User | None = None) -> ReferenceSource:
    if source.kind != ReferenceSource.Kind.INLINE:
        raise SourceError(f"source {source.slug!r} is a {source.kind} source, not inline")
    if problem := text_size_problem(len(content.encode("utf-8"))):
        raise ValueError(f"the text {problem}")
    source.content = content
    source.full_clean()
    source.save(update_fields=["content", "updated_at"])
    source_changed_by(source=source, by=by, fields=["content"])
    return source
