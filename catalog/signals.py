"""Keep ReferenceSource.updated_at honest about tags: adding, removing or renaming a
source's tags touches the source, so caches keyed on (count, latest updated_at) of a
catalog's sources (the detection index) see tag edits as changes."""

from __future__ import annotations

from django.db.models.signals import m2m_changed, post_save, pre_delete
from django.utils import timezone

from catalog.models import ReferenceSource, Tag


def _touch(source_pks) -> None:
    ReferenceSource.objects.filter(pk__in=list(source_pks)).update(updated_at=timezone.now())


def source_tags_changed(sender, instance, action, reverse, pk_set, **kwargs) -> None:
    if action not in ("post_add", "post_remove", "post_clear", "pre_clear"):
        return
    if not reverse:
        _touch([instance.pk])
    elif action == "pre_clear":
        _touch(instance.sources.values_list("pk", flat=True))
    elif pk_set:
        _touch(pk_set)


def tag_changed(sender, instance: Tag, **kwargs) -> None:
    if instance.pk:
        _touch(instance.sources.values_list("pk", flat=True))


def connect() -> None:
    m2m_changed.connect(source_tags_changed, sender=ReferenceSource.tags.through, dispatch_uid="lectern-source-tags")
    post_save.connect(tag_changed, sender=Tag, dispatch_uid="lectern-tag-saved")
    pre_delete.connect(tag_changed, sender=Tag, dispatch_uid="lectern-tag-deleted")
