"""What catalog announces to the layers above it, and keeping updated_at honest.

The announcement (catalog imports no app above it, so an app that must act on it
connects a receiver in its AppConfig.ready; approvals does, docs/subsystems/governance.md,
"Lapse on reindex"). It is sent with `send`, not `send_robust`: a receiver's failure fails
the write that sent it, inside its transaction.

- `content_switched` (sender ReferenceSource; source_id, old_fingerprint,
  new_fingerprint): inside the transaction that switches a source to a new index
  generation with another fingerprint, after the switch is written.

Every other write of catalog's is audited inline by the service that makes it
(catalog.audit), in its transaction: no signal stands between a change and its entry.

Tags: adding, removing or renaming a source's tags touches the source, so caches keyed
on (count, latest updated_at) of a catalog's sources (the detection index) see tag
edits as changes.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Model
from django.db.models.signals import m2m_changed, post_save, pre_delete
from django.dispatch import Signal
from django.utils import timezone

from catalog.models import ReferenceSource, Tag

content_switched = Signal()


def _touch(source_pks: Iterable[int]) -> None:
    ReferenceSource.objects.filter(pk__in=list(source_pks)).update(updated_at=timezone.now())


def source_tags_changed(sender: type[Model], instance: ReferenceSource | Tag, action: str, reverse: bool,
                        pk_set: set[int] | None, **kwargs: object) -> None:
    if action not in ("post_add", "post_remove", "post_clear", "pre_clear"):
        return
    if isinstance(instance, ReferenceSource):  # source.tags changed (not reverse)
        _touch([instance.pk])
    elif action == "pre_clear":
        _touch(instance.sources.values_list("pk", flat=True))
    elif pk_set:
        _touch(pk_set)


def tag_changed(sender: type[Tag], instance: Tag, **kwargs: object) -> None:
    if instance.pk:
        _touch(instance.sources.values_list("pk", flat=True))


def connect() -> None:
    m2m_changed.connect(source_tags_changed, sender=ReferenceSource.tags.through, dispatch_uid="lectern-source-tags")
    post_save.connect(tag_changed, sender=Tag, dispatch_uid="lectern-tag-saved")
    pre_delete.connect(tag_changed, sender=Tag, dispatch_uid="lectern-tag-deleted")
