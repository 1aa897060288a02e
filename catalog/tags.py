"""Tags of reference sources: the service that makes sure a tag exists for each name.
A tag's identity is its key (catalog.tag_keys)."""

from __future__ import annotations

from catalog.models import Tag
from catalog.tag_keys import tag_key


def tags_ensure(*, names: list[str]) -> list[Tag]:
    """One Tag per distinct key; an existing tag keeps the spelling it was created with."""
    tags = {}
    for name in names:
        tag, _ = Tag.objects.get_or_create(key=tag_key(name), defaults={"name": name.strip()})
        tags[tag.key] = tag
    return list(tags.values())
