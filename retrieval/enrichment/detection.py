"""Reads for reference detection: a per-catalog detection index (tag matcher, source
cards, embedded source profiles), cached per process until the catalog's sources
change, and the reference graph that transitive discovery walks.

The index is rebuilt when a catalog's sources change (count or latest updated_at:
tag changes touch their sources, see catalog.signals), so every web process notices
a curator's edit on its next call without any cross-process messaging.
"""

from __future__ import annotations

import glob as globlib
import hashlib
import logging
import posixpath
import re
import threading
from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TypedDict

import numpy as np
from django.conf import settings
from django.db import connection

from approvals.selectors import injection_decisions
from catalog.analysis import STOP_WORDS
from catalog.embedder import Embedder, get_embedder, word_prefix
from catalog.indexing.embedding_cache import embed_texts
from catalog.models import Agent, Catalog, Document, ReferenceSource
from catalog.sources.errors import SourceError
from catalog.sources.fingerprints import text_sha256
from catalog.sources.globs import glob_listing, root_and_pattern, source_roots
from catalog.tag_keys import tag_key
from retrieval.enrichment.formatting import CONTENT_KINDS
from retrieval.enrichment.mentions import EXTRACTION_RULES, content_ids, markdown_links
from retrieval.enrichment.tagmatch import TagMatcher
from retrieval.models import SourceMentions, SourceProfile

log = logging.getLogger(__name__)

MAX_DEPTH = 10


@dataclass(frozen=True)
class SourceCard:
    """What detection needs to know about a source, detached from the ORM."""

    pk: int
    catalog_id: int
    catalog: str
    slug: str
    name: str
    description: str
    mode: str
    kind: str
    location: str
    requires_approval: bool
    fingerprint: str
    status: str
    tags: tuple[str, ...]

    @property
    def base_dir(self) -> str:
        """The literal folder a glob source reads under ('' for a file or a root-level
        pattern): a read anywhere below it is a read of this reference."""
        if self.kind != ReferenceSource.Kind.GLOB:
            return ""
        try:
            _, relative = root_and_pattern(self.location)
        except SourceError:
            return ""
        parts = PurePosixPath(relative).parts
        literal = []
        for part in parts:
            if globlib.has_magic(part):
                break
            literal.append(part)
        if len(literal) == len(parts) or not literal:
            return ""
        return "/".join(literal) + "/"

    def profile_text(self, head: str = "") -> str:
        """What semantic detection compares a text with: seed 000's name, description
        and tags as natural language, then the head of the reference's main document
        (a description alone is often too terse to meet a paraphrase)."""
        text = f"{self.name}. {self.description}".strip()
        if self.tags:
            text += " Topics: " + ", ".join(self.tags) + "."
        if head:
            text += " " + " ".join(head.split())
        return text


@dataclass
class CatalogIndex:
    catalog_id: int
    slug: str
    stamp: tuple[object, ...]  # what the index was built from; a change rebuilds it
    cards: dict[str, SourceCard]
    matcher: TagMatcher
    key_slugs: dict[str, tuple[str, ...]]
    ids: dict[str, str] = field(default_factory=dict)  # lowercased id -> slug
    by_pk: dict[int, SourceCard] = field(default_factory=dict)
    preselected_mode: tuple[SourceCard, ...] = ()  # sources whose mode is preselected, by slug
    profile_model: str | None = None
    profile_slugs: list[str] = field(default_factory=list)
    profile_matrix: np.ndarray | None = None

    selectable: np.ndarray | None = None  # per profile row: mode is selectable
    rows: dict[str, int] = field(default_factory=dict)  # slug -> profile row

    def similarities(self, vector: np.ndarray) -> np.ndarray:
        """Cosine similarity of a unit vector to every embedded source profile, by row."""
        if self.profile_matrix is None:
            return np.zeros(0, dtype=np.float32)
        # numpy's stubs type this arithmetic as Any
        similarities: np.ndarray = self.profile_matrix @ vector
        return similarities


_CONTENT_WORD = re.compile(r"(?<![\w-])[^\W\d_][\w-]*")
# Enough of a text for a head of N model tokens once it is reduced to content words.
CHARS_PER_HEAD_TOKEN = 32


def content_words(text: str, head_tokens: int) -> str:
    """The opening of a tool result as the semantic pass embeds it: its words without
    stop words, numbers and punctuation. WordPiece spends a token on every bracket,
    digit group and "the"; without them the head holds more topic words (a reference
    found from a passage of its own text: recall@5 0.80 -> 0.87 at 48 tokens)."""
    head = word_prefix(text, head_tokens * CHARS_PER_HEAD_TOKEN)
    return " ".join(word for word in _CONTENT_WORD.findall(head) if word.lower() not in STOP_WORDS)


_indexes: dict[int, CatalogIndex] = {}
_lock = threading.Lock()


def _stamp(catalog_id: int, embedder: Embedder | None) -> tuple[object, ...]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), max(updated_at), max(indexed_at) FROM catalog_referencesource "
                       "WHERE catalog_id = %s", [catalog_id])
        counts = cursor.fetchone()
    return (*counts, embedder.model_id if embedder else None)


def catalog_index(catalog: Catalog) -> CatalogIndex:
    """The catalog's detection index, rebuilt only when its sources changed."""
    embedder = get_embedder()
    stamp = _stamp(catalog.pk, embedder)
    index = _indexes.get(catalog.pk)
    if index is not None and index.stamp == stamp:
        return index
    with _lock:
        index = _indexes.get(catalog.pk)
        if index is None or index.stamp != stamp:
            index = _build(catalog, stamp, embedder)
            _indexes[catalog.pk] = index
    return index


def forget_indexes() -> None:
    """Drop every cached index (tests that rewrite the catalog under one timestamp)."""
    with _lock:
        _indexes.clear()


def source_cards(sources: Iterable[ReferenceSource]) -> list[SourceCard]:
    return [
        SourceCard(pk=s.pk, catalog_id=s.catalog_id, catalog=s.catalog.slug, slug=s.slug, name=s.name,
                   description=s.description, mode=s.mode, kind=s.kind, location=s.location,
                   requires_approval=s.requires_approval, fingerprint=s.fingerprint, status=s.status,
                   tags=tuple(sorted(t.name for t in s.tags.all())))
        for s in sources
    ]


def _build(catalog: Catalog, stamp: tuple[object, ...], embedder: Embedder | None) -> CatalogIndex:
    sources = ReferenceSource.objects.filter(catalog=catalog).select_related("catalog").prefetch_related("tags")
    cards = {card.slug: card for card in source_cards(sources)}
    key_slugs: dict[str, list[str]] = defaultdict(list)
    names: dict[str, str] = {}
    for card in cards.values():
        for tag in card.tags:
            key = tag_key(tag)
            key_slugs[key].append(card.slug)
            names.setdefault(key, tag)
    index = CatalogIndex(catalog_id=catalog.pk, slug=catalog.slug, stamp=stamp, cards=cards,
                         matcher=TagMatcher(names.values()),
                         key_slugs={key: tuple(slugs) for key, slugs in key_slugs.items()},
                         ids={slug.lower(): slug for slug in cards},
                         by_pk={card.pk: card for card in cards.values()},
                         preselected_mode=tuple(card for card in cards.values()
                                                if card.mode == ReferenceSource.Mode.PRESELECTED))
    if embedder is not None and cards:
        index.profile_model = embedder.model_id
        heads = _document_heads(catalog.pk)
        index.profile_slugs, index.profile_matrix = source_profiles(list(cards.values()), embedder, heads)
        index.rows = {slug: row for row, slug in enumerate(index.profile_slugs)}
        index.selectable = np.array([cards[slug].mode == ReferenceSource.Mode.SELECTABLE
                                     for slug in index.profile_slugs], dtype=bool)
    return index


PROFILE_HEAD_CHARS = 600


def _document_heads(catalog_id: int) -> dict[int, str]:
    """The opening of each source's main document: the shallowest, then first by path
    (a folder reference's README.md before its templates)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT ON (source_id) source_id, left(text, %s) FROM catalog_document WHERE catalog_id = %s "
            "ORDER BY source_id, length(path) - length(replace(path, '/', '')), path",
            [PROFILE_HEAD_CHARS, catalog_id])
        return dict(cursor.fetchall())


def source_profiles(cards: list[SourceCard], embedder: Embedder,
                    heads: dict[int, str] | None = None) -> tuple[list[str], np.ndarray]:
    """(slugs, unit vectors) of the cards' profiles; stale or missing ones are embedded
    (through the embedding cache) and stored."""
    heads = heads or {}
    stored = {p.source_id: p for p in SourceProfile.objects.filter(source_id__in=[c.pk for c in cards])}
    texts = {card.pk: card.profile_text(heads.get(card.pk, "")) for card in cards}
    stale = [card for card in cards
             if (p := stored.get(card.pk)) is None or p.model != embedder.model_id
             or p.text_sha256 != text_sha256(texts[card.pk])]
    vectors: dict[int, np.ndarray] = {pk: np.asarray(p.embedding, dtype=np.float32) for pk, p in stored.items()}
    if stale:
        fresh, _ = embed_texts(embedder, [texts[card.pk] for card in stale])
        rows = [SourceProfile(source_id=card.pk, model=embedder.model_id, text_sha256=text_sha256(texts[card.pk]),
                              embedding=vector) for card, vector in zip(stale, fresh, strict=True)]
        SourceProfile.objects.bulk_create(rows, update_conflicts=True, unique_fields=["source"],
                                          update_fields=["model", "text_sha256", "embedding", "updated_at"])
        vectors.update({card.pk: vector for card, vector in zip(stale, fresh, strict=True)})
        log.info("embedded %d source profiles", len(stale))
    slugs = [card.slug for card in cards]
    matrix = np.vstack([vectors[card.pk] for card in cards]).astype(np.float32)
    return slugs, matrix


# --- paths -----------------------------------------------------------------------------


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


def source_files(card: SourceCard) -> list[str]:
    """Every file of a reference, indexed or not (templates and scripts in other
    formats are still part of the reference), in path order: exactly what the file
    endpoint serves (indexed documents, and the glob's files up to LECTERN_MAX_FILE_BYTES)."""
    paths = set(Document.objects.filter(source_id=card.pk).values_list("path", flat=True))
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


# --- the reference graph ---------------------------------------------------------------


class Parent(TypedDict):
    """A source pointing at a discovered one: by an id mention or a markdown link."""

    source_id: str
    via: str  # mention | link
    evidence: str  # the @id or the link target as written


@dataclass
class Discovered:
    card: SourceCard
    depth: int
    parents: list[Parent] = field(default_factory=list)


def extraction_stamp(fingerprint: str) -> str:
    """What a stored extraction was made from: the content's fingerprint under the
    current extraction rules (a change of rules redoes every extraction once)."""
    return hashlib.sha256(f"rules {EXTRACTION_RULES}: {fingerprint}".encode()).hexdigest()


def source_mentions(cards: list[SourceCard]) -> dict[int, tuple[set[str], set[str]]]:
    """(ids mentioned, link targets) per source pk, extracted once per fingerprint."""
    if not cards:
        return {}
    stored = {m.source_id: m for m in SourceMentions.objects.filter(source_id__in=[c.pk for c in cards])}
    out: dict[int, tuple[set[str], set[str]]] = {}
    stale = []
    for card in cards:
        row = stored.get(card.pk)
        if row is not None and row.fingerprint == extraction_stamp(card.fingerprint):
            out[card.pk] = (set(row.ids), set(row.links))
        else:
            stale.append(card)
    if stale:
        extracted: dict[int, tuple[set[str], set[str]]] = {card.pk: (set(), set()) for card in stale}
        for source_id, path, text in Document.objects.filter(source_id__in=[c.pk for c in stale]) \
                .values_list("source_id", "path", "text").iterator(chunk_size=200):
            ids, links = extracted[source_id]
            ids.update(content_ids(text))
            links.update(markdown_links(text, path))
        fingerprints = {card.pk: extraction_stamp(card.fingerprint) for card in stale}
        SourceMentions.objects.bulk_create(
            [SourceMentions(source_id=pk, fingerprint=fingerprints[pk], ids=sorted(ids), links=sorted(links))
             for pk, (ids, links) in extracted.items()],
            update_conflicts=True, unique_fields=["source"],
            update_fields=["fingerprint", "ids", "links", "updated_at"])
        out.update(extracted)
    return out


def _link_targets(index: CatalogIndex, links: set[str]) -> dict[str, str]:
    """link path -> slug of the source it lands in (a document path or a folder)."""
    if not links:
        return {}
    found = dict(Document.objects.filter(catalog_id=index.catalog_id, path__in=[p.rstrip("/") for p in links])
                 .values_list("path", "source__slug"))
    targets = {}
    for link in links:
        slug = found.get(link.rstrip("/"))
        if slug is None:
            folder = link if link.endswith("/") else link + "/"
            slug = next((c.slug for c in index.cards.values() if c.base_dir and
                         (c.base_dir.startswith(folder) or link.startswith(c.base_dir))), None)
        if slug is not None:
            targets[link] = slug
    return targets


def _own_id(index: CatalogIndex, ident: str) -> str:
    """A mention as this catalog's id: `@caching` and `@<this catalog>/caching` alike;
    `@<another catalog>/caching` names none of this catalog's ("" matches no id)."""
    catalog, _, slug = ident.rpartition("/")
    return slug if catalog in ("", index.slug) else ""


def discover(index: CatalogIndex, roots: list[SourceCard], *, agent: Agent | None,
             max_depth: int = MAX_DEPTH) -> dict[str, Discovered]:
    """Breadth-first over id mentions and markdown links in the roots' content, at
    most `max_depth` hops. Returns every source reached (roots excluded), each with
    all the parents that point at it.

    Only the content of sources the gate lets reach `agent` is read: a withheld source
    (a root or one reached) is itself reported, but what it mentions or links is not
    discovered through it, since that would disclose its content.
    """
    seen: dict[str, Discovered] = {}
    root_slugs = {card.slug for card in roots}
    frontier = deque(roots)
    depth = 0
    while frontier and depth < max_depth:
        depth += 1
        decisions = injection_decisions(agent=agent, sources=frontier)
        level = [card for card in frontier if decisions[card.pk].allowed]
        frontier.clear()
        mentions = source_mentions(level)
        for card in level:
            ids, links = mentions.get(card.pk, (set(), set()))
            edges = [(index.ids[key], "mention", f"@{ident}") for ident in sorted(ids)
                     if (key := _own_id(index, ident)) in index.ids and index.ids[key] != card.slug]
            edges += [(slug, "link", link) for link, slug in sorted(_link_targets(index, links).items())
                      if slug != card.slug]
            for slug, via, evidence in edges:
                if slug in root_slugs:
                    continue
                node = seen.get(slug)
                if node is None:
                    node = seen[slug] = Discovered(card=index.cards[slug], depth=depth)
                    frontier.append(node.card)
                parent = Parent(source_id=card.slug, via=via, evidence=evidence)
                if parent not in node.parents:
                    node.parents.append(parent)
    return seen
