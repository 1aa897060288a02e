"""A tag's identity, its key: the one definition (pure: no Django), shared by the Tag
model, which stores it, and the tag matcher of enrichment (retrieval.enrichment.tagmatch),
which finds tags in text by it."""

from __future__ import annotations

import re

_TAG_SEPARATORS = re.compile(r"[\s_\-]+")


def tag_key(name: str) -> str:
    """Case and separator-insensitive identity: 'Circuit Breaker' == 'circuit_breaker'."""
    return _TAG_SEPARATORS.sub("-", name.strip().lower()).strip("-")
