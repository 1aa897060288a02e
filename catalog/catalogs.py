"""Creating and changing catalogs (the dashboard; the admin edits the same fields). The
slug never changes: it is in every chunk key and in agents' `@catalog/id` mentions.
Deleting lives with the write path (catalog.indexing.removal)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import IntegrityError, transaction

from catalog.audit.log import Action, Actor, AuditEvent, audit_append
from catalog.models import Agent, Catalog
from catalog.ranking import ranking_problems

# Chunking settings: a change re-chunks every document at its source's next run (each
# document records how it was cut: catalog.indexing.chunks.chunking_stamp).
CHUNKING = ("chunk_size", "chunk_overlap")


@dataclass
class CatalogSettings:
    name: str
    description: str = ""
    chunk_size: int = 1000
    chunk_overlap: int = 100


def catalog_create(*, slug: str, settings: CatalogSettings) -> Catalog:
    """A new, empty catalog; ValidationError names each field at fault."""
    catalog = Catalog(slug=slug, name=settings.name, description=settings.description,
                      chunk_size=settings.chunk_size, chunk_overlap=settings.chunk_overlap)
    catalog.full_clean()
    try:
        with transaction.atomic():
            catalog.save()
    except IntegrityError:  # created by someone else since full_clean looked
        raise ValidationError({"slug": f"A catalog {slug!r} already exists."}) from None
    return catalog


def catalog_update(*, catalog: Catalog, settings: CatalogSettings) -> list[str]:
    """Change a catalog's name, description or chunking; the fields that changed. When
    the chunking changed, the caller asks for runs (catalog.indexing.runs); chunks
    already written keep the old size until their source's next run (or the scan's) cuts
    them again."""
    with transaction.atomic():
        current = Catalog.objects.select_for_update(no_key=True).get(pk=catalog.pk)
        wanted = {"name": settings.name, "description": settings.description,
                  "chunk_size": settings.chunk_size, "chunk_overlap": settings.chunk_overlap}
        changed = [name for name, value in wanted.items() if getattr(current, name) != value]
        for name in changed:
            setattr(current, name, wanted[name])
        current.full_clean()
        if changed:
            current.save(update_fields=[*changed, "updated_at"])
    catalog.refresh_from_db()
    return changed


def catalog_ranking_update(*, catalog: Catalog, values: Mapping[str, Any],
                           by: AbstractBaseUser | AnonymousUser | Agent | None,
                           tuning_run: int | None = None, seen: str | None = None) -> dict[str, list[Any]]:
    """Set some of `catalog`'s ranking settings (catalog.ranking); {setting: [before,
    after]} for each that changed, audited in the same transaction with who changed it
    (and the tuning run it came from). ValidationError names each setting at fault;
    nothing changes then. `seen`: the ranking_stamp of the settings the change was made
    from (a form's); refused, naming no field, when they changed since. Searches read
    the settings at their start: the next one ranks with them, no reindex needed."""
    if problems := ranking_problems(values):
        raise ValidationError({name: [message] for name, message in problems.items()})
    with transaction.atomic():
        current = Catalog.objects.select_for_update(no_key=True).get(pk=catalog.pk)
        if seen is not None and seen != ranking_stamp(current):
            raise ValidationError({NON_FIELD_ERRORS: [
                "Another change to these settings was saved since this form was opened: reload it to see them, "
                "then make yours again."]})
        before = current.ranking_settings
        after = before.with_values(values)
        if problems := ranking_problems(asdict(after)):
            raise ValidationError({name: [message] for name, message in problems.items()})
        changed = before.changes(after)
        if changed:
            current.ranking = after.stored()
            current.save(update_fields=["ranking", "updated_at"])
            payload: dict[str, Any] = {"catalog": current.slug, "changed": changed}
            if tuning_run is not None:
                payload["tuning_run"] = tuning_run
            audit_append(AuditEvent(Action.RANKING_CHANGED, Actor.of(by), payload=payload))
    catalog.refresh_from_db()
    return changed


def ranking_stamp(catalog: Catalog) -> str:
    """What a form remembers of the settings it shows: saving it is refused once they
    changed (one curator's stale form never reverts another's change unseen)."""
    return hashlib.sha256(json.dumps(catalog.ranking, sort_keys=True).encode()).hexdigest()[:16]
