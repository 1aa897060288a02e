"""A reference's files: every file it holds (what the file endpoint serves), grouped by
conventional sub-folder, and the reference a path written by a tool lies in (path
containment)."""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Iterable
from pathlib import PurePosixPath

from django.conf import settings

from catalog.models import Document, ReferenceSource
from catalog.sources.errors import SourceError
from catalog.sources.globs import glob_listing, source_roots
from retrieval.enrichment.detection import SourceCard
from retrieval.enrichment.formatting import CONTENT_KINDS


def root_relative(path: str) -> str | None:
    """A path as written by a tool, relative to the source root it lies under
    (absolute paths) or as is (relative ones); None when it climbs out."""
    path = path.strip()
    if path.startswith("/"):
        for root in source_roots():
            try:
                return str(PurePosixPath(posixpath.normpath(path)).relative_to(root))
            except ValueError:
                continue
        return None
    normal = posixpath.normpath(path)
    if normal == ".." or normal.startswith("../") or normal == ".":
        return None
    return normal


def containing_source(cards: list[SourceCard], paths: list[str]) -> tuple[SourceCard, str] | None:
    """The first (card, path) where a path is one of the card's documents or lies in
    its folder."""
    relative = [(p, r) for p in paths if (r := root_relative(p))]
    if not relative or not cards:
        return None
    for _, rel in relative:
        for card in cards:
            if card.base_dir and rel.startswith(card.base_dir):
                return card, rel
    documents = dict(Document.objects.filter(source_id__in=[c.pk for c in cards],
                                              path__in=[rel for _, rel in relative])
                     .values_list("path", "source_id"))
    by_pk = {card.pk: card for card in cards}
    for _, rel in relative:
        if rel in documents:
            return by_pk[documents[rel]], rel
    return None


def documents_paths(cards: Iterable[SourceCard]) -> dict[int, list[str]]:
    """The indexed documents' paths of each reference, in one query for all of them."""
    paths: dict[int, list[str]] = {card.pk: [] for card in cards}
    if paths:
        for source_id, path in Document.objects.filter(source_id__in=list(paths)).order_by() \
                .values_list("source_id", "path"):
            paths[source_id].append(path)
    return paths


def source_files(card: SourceCard, indexed: Iterable[str] | None = None) -> list[str]:
    """Every file of a reference, indexed or not (templates and scripts in other
    formats are still part of the reference), in path order: exactly what the file
    endpoint serves (indexed documents, and the glob's files up to LECTERN_MAX_FILE_BYTES).
    `indexed`: its documents' paths, when documents_paths fetched them for several
    references at once."""
    paths = set(documents_paths([card])[card.pk] if indexed is None else indexed)
    if card.kind == ReferenceSource.Kind.GLOB:
        try:
            paths.update(glob_listing(card.location, max_bytes=settings.LECTERN_MAX_FILE_BYTES))
        except SourceError:
            pass
    return sorted(paths)


def contents_of(card: SourceCard, paths: list[str]) -> dict[str, list[str]]:
    """Files per conventional sub-folder (templates, validation, ...) of the reference."""
    base = card.base_dir
    contents: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        if base and not path.startswith(base):
            continue
        first = path[len(base):].split("/", 1)
        if len(first) == 2 and first[0] in CONTENT_KINDS:
            contents[first[0]].append(path)
    return dict(contents)
