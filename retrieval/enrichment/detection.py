"""Reads for reference detection: a per-catalog detection index (tag matcher, source
cards, embedded source profiles), cached per process until the catalog's sources
change (the reference graph discovery walks is discovery.py's).

The index is rebuilt when a catalog's sources change (count or latest updated_at:
tag changes touch their sources, see catalog.signals), so every web process notices
a curator's edit on its next call without any cross-process messaging.

Its last section is what a text points at: `@reference-id` mentions, bare reference
ids, markdown link targets and file paths. Pure functions; the detection passes decide
what they mean.
"""

from __future__ import annotations

import glob as globlib
import logging
import posixpath
import re
import threading
from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from urllib.parse import unquote

import numpy as np
from django.db import connection

from catalog.analysis import STOP_WORDS
from catalog.embedder import Embedder, get_embedder, word_prefix
from catalog.indexing.embedding_cache import embed_texts
from catalog.models import Catalog, ReferenceSource
from catalog.sources.errors import SourceError
from catalog.sources.fingerprints import text_sha256
from catalog.sources.globs import root_and_pattern
from catalog.tag_keys import tag_key
from retrieval.enrichment.tagmatch import TagMatcher
from retrieval.models import SourceProfile

log = logging.getLogger(__name__)


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
    # Where a git or web source reads from, as its expansion block names it ("" for the
    # other kinds): what an agent's citation of its files points at.
    origin: str = ""

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
        """What semantic detection compares a text with: name, description
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


def forget_indexes() -> int:
    """Drop every cached index (the status reset; tests that rewrite the catalog under
    one timestamp); how many there were."""
    with _lock:
        dropped = len(_indexes)
        _indexes.clear()
    return dropped


def cached_indexes(catalog_ids: Collection[int] | None = None) -> int:
    """How many catalogs' detection indexes this process holds (of `catalog_ids`, when given)."""
    return len(_indexes) if catalog_ids is None else len(_indexes.keys() & set(catalog_ids))


def source_cards(sources: Iterable[ReferenceSource]) -> list[SourceCard]:
    return [
        SourceCard(pk=s.pk, catalog_id=s.catalog_id, catalog=s.catalog.slug, slug=s.slug, name=s.name,
                   description=s.description, mode=s.mode, kind=s.kind, location=s.location,
                   requires_approval=s.requires_approval, fingerprint=s.fingerprint, status=s.status,
                   tags=tuple(sorted(t.name for t in s.tags.all())), origin=source_origin(s))
        for s in sources
    ]


def source_origin(source: ReferenceSource) -> str:
    """A git source's repository and the commit it was synced to; a web source's site."""
    if source.kind == ReferenceSource.Kind.GIT:
        commit = str(source.sync.get("commit", ""))
        return f"git repository {source.location}" + (f" at commit {commit[:12]}" if commit else "")
    if source.kind == ReferenceSource.Kind.WEB:
        return f"web site {source.location}"
    return ""


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


# --- what a text points at (pure) ---------------------------------------------------------

# Bump when what `content_ids` finds changes: extractions stored under an older rule
# are redone (retrieval.enrichment.discovery.source_mentions).
EXTRACTION_RULES = 2
# `@id` not glued to a word, an address or a path on either side: "see @circuit-breaker."
# and "(@caching)", not "me@host", "@caching/redis-adapter", "@caching.cached(" or
# "@caching.io". The guard after the id is the tag matcher's (retrieval/tagmatch.py): no
# [\w/-], nor a "." followed by [\w/]; a period that ends a sentence is fine.
# `@catalog/id` names the catalog too (an agent reading several catalogs is hinted so).
_AT_ID = re.compile(r"(?<![\w@./-])@(?:([A-Za-z0-9_-]+)/)?([A-Za-z0-9][A-Za-z0-9_-]*)(?![\w/-])(?!\.[\w/])")
# Bare ids worth following in content: compound tokens (with - or _), guarded like tags.
_BARE_ID = re.compile(r"(?<![\w@./-])([A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)+)(?![\w/-])(?!\.[\w/])")
_INLINE_LINK = re.compile(r"\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'][^\"'\n]*[\"'])?\s*\)")
_REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]\n]+\]:\s*<?(\S+?)>?(?:\s+[\"'(].*)?$", re.MULTILINE)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# A whole run of path characters holding a "/" or a "." (only those can be paths): the
# scan skips plain words, 2.5x faster on prose than taking every run and filtering.
_PATH_TOKEN = re.compile(r"(?<![\w.~/-])[\w.~-]*[./][\w.~/-]*")
_FILE_NAME = re.compile(r"[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,7}$")
MAX_PATHS = 200


def at_mentions(text: str) -> list[str]:
    """Distinct `@id` and `@catalog/id` mentions in order of appearance, lowercased,
    trailing - and _ dropped."""
    seen: dict[str, None] = {}
    for match in _AT_ID.finditer(text):
        catalog, ident = match.group(1), match.group(2).rstrip("-_").lower()
        if ident:
            seen.setdefault(f"{catalog.lower()}/{ident}" if catalog else ident, None)
    return list(seen)


def content_ids(text: str) -> set[str]:
    """Every token of a reference's content that may be another reference's id:
    `@id` mentions and compound identifiers (a single plain word is too common to
    count as a mention unless written `@word`)."""
    ids = set(at_mentions(text))
    ids.update(match.group(1).lower() for match in _BARE_ID.finditer(text))
    return ids


def resolve_link(target: str, document_path: str) -> str | None:
    """A markdown link target as a path relative to the source root, or None for
    external URLs, anchors and targets that climb out of the root. A directory
    target keeps its trailing slash."""
    target = unquote(target.split("#", 1)[0].split("?", 1)[0]).strip()
    if not target or _SCHEME.match(target) or target.startswith("//"):
        return None
    directory = target.endswith("/")
    if target.startswith("/"):
        joined = target.lstrip("/")
    else:
        joined = posixpath.join(posixpath.dirname(document_path), target)
    resolved = posixpath.normpath(joined)
    if resolved in (".", "") or resolved == ".." or resolved.startswith("../"):
        return None
    return resolved + "/" if directory else resolved


def markdown_links(text: str, document_path: str) -> set[str]:
    """Targets of inline and reference-style markdown links, resolved against the
    document's own path."""
    targets = [m.group(1) for m in _INLINE_LINK.finditer(text)]
    targets += [m.group(1) for m in _REFERENCE_LINK.finditer(text)]
    resolved = (resolve_link(target, document_path) for target in targets)
    return {path for path in resolved if path}


def path_candidates(text: str) -> list[str]:
    """Tokens of a tool result that look like file paths (`dir/file`, `file.ext`),
    in order, at most MAX_PATHS. Trailing punctuation is dropped; `./` is not kept."""
    found: dict[str, None] = {}
    for match in _PATH_TOKEN.finditer(text):
        token = match.group(0).rstrip(".")
        if "/" not in token and not _FILE_NAME.search(token):
            continue
        if token.startswith("./"):
            token = token[2:]
        if token and token not in ("/", "~"):
            found.setdefault(token, None)
            if len(found) >= MAX_PATHS:
                break
    return list(found)
