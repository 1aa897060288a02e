"""Tags of reference sources: the service that makes sure a tag exists for each name, what
a tag name may be, and the existing tags a curator is offered while typing one. A tag's
identity is its key (catalog.tag_keys)."""

from __future__ import annotations

from django.db.models import Count, Q

from catalog.models import Tag
from catalog.tag_keys import tag_key

TAG_NAME_MAX_CHARS = 100  # Tag.name
MAX_TAGS_PER_SOURCE = 30
SUGGESTIONS = 8


def tags_ensure(*, names: list[str]) -> list[Tag]:
    """One Tag per distinct key; an existing tag keeps the spelling it was created with."""
    tags = {}
    for name in names:
        tag, _ = Tag.objects.get_or_create(key=tag_key(name), defaults={"name": name.strip()})
        tags[tag.key] = tag
    return list(tags.values())


def tag_name_problem(name: str) -> str | None:
    """Why `name` cannot be a tag, or None."""
    if len(name.strip()) > TAG_NAME_MAX_CHARS:
        return f"a tag is at most {TAG_NAME_MAX_CHARS} characters"
    if not tag_key(name):
        return "a tag needs at least one letter or digit"
    return None


def tags_suggested(*, typed: str, chosen: list[str], limit: int = SUGGESTIONS) -> list[Tag]:
    """Existing tags whose name or key holds what was typed (most used first), except
    those already chosen: a curator reuses a tag rather than spelling a near twin."""
    key = tag_key(typed)
    if not key:
        return []
    chosen_keys = {tag_key(name) for name in chosen}
    found = Tag.objects.filter(Q(key__contains=key) | Q(name__icontains=typed.strip())) \
        .exclude(key__in=chosen_keys).annotate(uses=Count("sources")).order_by("-uses", "key")
    return list(found[:limit])
