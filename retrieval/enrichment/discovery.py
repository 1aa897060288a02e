"""The reference graph transitive discovery walks: id mentions and markdown links in
sources' content (extracted once per content fingerprint), followed breadth-first from
the expanded or pinned references, through sources the gate allows only."""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TypedDict

from approvals.selectors.gate import injection_decisions
from catalog.models import Agent, Document
from retrieval.enrichment.detection import EXTRACTION_RULES, CatalogIndex, SourceCard, content_ids, markdown_links
from retrieval.models import SourceMentions

MAX_DEPTH = 10


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
    """link path -> slug of the source it lands in (a document path or a folder): one
    lookup for the links of a whole level of the walk."""
    return link_sources(catalog_id=index.catalog_id, cards=index.cards.values(), links=links)


def link_sources(*, catalog_id: int, cards: Collection[SourceCard], links: set[str]) -> dict[str, str]:
    """link path -> slug of the catalog's source it lands in: the source holding a
    document at that path, else the glob source reading the folder it names."""
    if not links:
        return {}
    found = dict(Document.objects.filter(catalog_id=catalog_id, path__in=[p.rstrip("/") for p in links])
                 .values_list("path", "source__slug"))
    targets = {}
    for link in links:
        slug = found.get(link.rstrip("/"))
        if slug is None:
            folder = link if link.endswith("/") else link + "/"
            slug = next((c.slug for c in cards if c.base_dir and
                         (c.base_dir.startswith(folder) or link.startswith(c.base_dir))), None)
        if slug is not None:
            targets[link] = slug
    return targets


def own_id(catalog_slug: str, ident: str) -> str:
    """A mention as an id of catalog `catalog_slug`: `@caching` and `@<catalog>/caching`
    alike; `@<another catalog>/caching` names none of its ids ("" matches no id)."""
    catalog, _, slug = ident.rpartition("/")
    return slug if catalog in ("", catalog_slug) else ""


def _own_id(index: CatalogIndex, ident: str) -> str:
    return own_id(index.slug, ident)


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
        targets = _link_targets(index, {link for _, links in mentions.values() for link in links})
        for card in level:
            ids, links = mentions.get(card.pk, (set(), set()))
            edges = [(index.ids[key], "mention", f"@{ident}") for ident in sorted(ids)
                     if (key := _own_id(index, ident)) in index.ids and index.ids[key] != card.slug]
            edges += [(targets[link], "link", link) for link in sorted(links)
                      if link in targets and targets[link] != card.slug]
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
