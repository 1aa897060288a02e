"""Who is answerable for a source's content: every person whose edit of it is pending
(not read by a reindex yet) or served (the content agents are served came from it).
Approvals keeps them from deciding on that content (self-approval, four eyes), so the
set only grows by a person's edit and only shrinks when a reindex switches in the
content their edits produced; what changes a source's settings, or an edit by no person
(an agent, a command, an import), leaves it alone.

The three steps, each in the transaction of its caller:

1. an edit of the content counts itself on the source row (`content_edits`) and, made
   by a person, records them as pending with that count (content_edit_record);
2. a reindex reads the content with the count it includes (content_read_locked): a
   share lock on the source row makes an edit that wrote the row commit first and an
   edit that did not wait, so the rows it reads hold exactly the counted edits;
3. the switch to that content hands the pending editors up to the count over to the
   served ones (content_editors_hand_over); an edit made while it indexed stays pending.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.models import User
from django.db import connection
from django.db.models import F

from catalog.models import ContentEditor, ReferenceSource
from catalog.sources.errors import SourceError

# What an edit's `fields` name when it changed what a source's content is read from.
CONTENT_FIELDS = frozenset({"created", "content", "files", "kind", "location", "ref", "include", "exclude",
                            "secret", "max_depth", "max_pages"})


def is_content_edit(fields: Iterable[str]) -> bool:
    return not CONTENT_FIELDS.isdisjoint(fields)


def content_edit_record(*, source_id: int, by: User | None) -> None:
    """Count an edit of the source's content and remember `by` as pending (no person:
    nobody is added, nobody removed). The row's update holds its lock to the commit,
    which is what content_read_locked waits on."""
    ReferenceSource.objects.filter(pk=source_id).update(content_edits=F("content_edits") + 1)
    if by is None:
        return
    edit = ReferenceSource.objects.values_list("content_edits", flat=True).get(pk=source_id)
    ContentEditor.objects.bulk_create([ContentEditor(source_id=source_id, user=by, pending=True, edit=edit)],
                                      update_conflicts=True, unique_fields=["source", "user", "pending"],
                                      update_fields=["edit"])


def content_read_locked(source: ReferenceSource) -> int:
    """Reload what `source`'s content is read from (kind, glob pattern, inline text)
    and return how many content edits it includes, share-locking the row until the
    caller's transaction ends: read the upload rows inside that transaction."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT content_edits, kind, location, content FROM catalog_referencesource "
                       "WHERE id = %s FOR SHARE", [source.pk])
        row = cursor.fetchone()
    if row is None:
        raise SourceError(f"source {source.slug!r} was deleted")
    edits, source.kind, source.location, source.content = row
    return int(edits)


def content_editors_hand_over(*, source_id: int, edits: int, replaced: bool) -> None:
    """The switch of `source_id` to content holding its first `edits` content edits:
    whoever made them is served now, no longer pending. When the content was replaced
    (its fingerprint moved) by people's edits, the authors before them no longer are;
    content that moved with no person's edit among those handed over (an agent's, an
    import's, a file changed on disk) keeps its authors: no such edit removes anyone."""
    handed = ContentEditor.objects.filter(source_id=source_id, pending=True, edit__lte=edits)
    people = list(handed.values_list("user_id", "edit"))
    if replaced and people:
        ContentEditor.objects.filter(source_id=source_id, pending=False).delete()
    ContentEditor.objects.bulk_create(
        [ContentEditor(source_id=source_id, user_id=user_id, pending=False, edit=edit) for user_id, edit in people],
        update_conflicts=True, unique_fields=["source", "user", "pending"], update_fields=["edit"])
    handed.delete()
