"""listReferences, selectReferences and reading a reference's files: the references an id
names, what the gate lets the caller select, and the files it may then read."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from django.conf import settings
from django.db import transaction

from approvals.selectors.gate import injection_decisions
from approvals.services.requests import request_context, withheld_requests_raise
from catalog.errors import ConflictError, ForbiddenError, InvalidError, NotFoundError
from catalog.models import Document, ReferenceSource
from catalog.sources.errors import SourceError
from catalog.sources.extraction import ExtractionError, extract
from catalog.sources.fingerprints import text_sha256
from catalog.sources.globs import SourceChanged, glob_file_read
from catalog.tag_keys import tag_key
from retrieval.enrichment import formatting
from retrieval.enrichment.caller import Caller, caller_indexes, preselected_cards
from retrieval.enrichment.detection import CatalogIndex, SourceCard
from retrieval.enrichment.discovery import discover
from retrieval.enrichment.reference_files import contents_of, documents_paths, source_files
from retrieval.enrichment.selections import selections_grant
from retrieval.models import Selection


def reference_text(card: SourceCard, ref: str, related: list[str] | None = None, *,
                   indexed: list[str] | None = None) -> formatting.ReferenceText:
    """The reference as a block shows it; `indexed`: its documents' paths, when
    documents_paths fetched them for several references at once."""
    paths = source_files(card, indexed)
    return formatting.ReferenceText(source_id=ref, name=card.name, description=card.description, paths=paths,
                                    contents=contents_of(card, paths), related=related or [],
                                    base_dir=card.base_dir, origin=card.origin)


def list_references(*, caller: Caller, tag: str = "", text: str = "") -> list[dict[str, Any]]:
    indexes = caller_indexes(caller)
    cards = [card for index in indexes for card in index.cards.values()]
    if tag:
        wanted = tag_key(tag)
        cards = [card for card in cards if any(tag_key(t) == wanted for t in card.tags)]
    if text:
        needle = text.lower()
        cards = [card for card in cards
                 if needle in f"{card.slug}\n{card.name}\n{card.description}\n{' '.join(card.tags)}".lower()]
    decisions = injection_decisions(agent=caller.agent, sources=cards)
    return [{"source_id": c.slug, "catalog": c.catalog, "name": c.name, "description": c.description,
             "mode": c.mode, "tags": list(c.tags), "requires_approval": c.requires_approval,
             "index_status": c.status, "withheld": not decisions[c.pk].allowed, "reason": decisions[c.pk].reason,
             "request_id": None if decisions[c.pk].allowed else decisions[c.pk].request_id}
            for c in cards]


def cards_named(indexes: list[CatalogIndex], ident: str) -> list[SourceCard]:
    """The references an id names in these catalogs: `source` in any of them, or
    `catalog/source` (with or without `@`, in any case)."""
    catalog, _, slug = ident.lstrip("@").lower().rpartition("/")
    return [index.cards[index.ids[slug]] for index in indexes
            if slug in index.ids and catalog in ("", index.slug.lower())]


def resolve_ids(indexes: list[CatalogIndex], ids: list[str]) -> tuple[list[SourceCard], list[str], list[str]]:
    """(cards, unknown ids, ambiguous ids). An id is `source` or `catalog/source`."""
    cards: list[SourceCard] = []
    unknown: list[str] = []
    ambiguous: list[str] = []
    for ident in ids:
        matches = cards_named(indexes, ident)
        if not matches:
            unknown.append(ident)
        elif len(matches) > 1:
            ambiguous.append(ident)
        else:
            cards.append(matches[0])
    return cards, unknown, ambiguous


def select_references(*, caller: Caller, ids: list[str], tags: list[str]) -> dict[str, Any]:
    """Resolve ids and tags to references, authorise those the gate allows, and return
    for each what the agent may read; those withheld come back with the reason.
    Unknown or ambiguous ids and tags nobody carries are refused before anything is
    recorded."""
    indexes = caller_indexes(caller)
    cards, unknown, ambiguous = resolve_ids(indexes, ids)
    unknown_tags = []
    for tag in tags:
        key = tag_key(tag)
        carriers = [index.cards[slug] for index in indexes for slug in index.key_slugs.get(key, ())]
        if not carriers:
            unknown_tags.append(tag)
        cards += carriers
    if unknown or ambiguous or unknown_tags:
        raise InvalidError("some references could not be resolved", code="unknown_reference",
                          details={"unknown_ids": unknown, "ambiguous_ids": ambiguous, "unknown_tags": unknown_tags})
    cards = list({(card.catalog_id, card.slug): card for card in cards}.values())
    context = request_context("selectReferences", " ".join([*ids, *(f"#{tag}" for tag in tags)]))
    decisions = withheld_requests_raise(agent=caller.agent, decisions=injection_decisions(agent=caller.agent,
                                                                                          sources=cards),
                                        via="select", context=context)
    allowed = [card for card in cards if decisions[card.pk].allowed]
    with transaction.atomic():
        selections_grant(caller, allowed, Selection.Via.SELECT)
    selected = []
    indexed = documents_paths(allowed)
    for card in allowed:
        reference = reference_text(card, caller.ref(card), indexed=indexed[card.pk])
        selected.append({"source_id": card.slug, "catalog": card.catalog, "name": card.name,
                         "description": card.description, "files": reference.paths, "contents": reference.contents,
                         "instructions": formatting.expansion_block(reference)})
    withheld = [{"source_id": c.slug, "catalog": c.catalog, "name": c.name, "reason": decisions[c.pk].reason,
                 "state": decisions[c.pk].state, "request_id": decisions[c.pk].request_id}
                for c in cards if not decisions[c.pk].allowed]
    return {"selected": selected, "withheld": withheld}


@dataclass(frozen=True)
class ReferenceFile:
    path: str
    title: str
    sha256: str
    text: str  # the content, or base64 when `encoding` says so
    encoding: str  # utf-8 | base64
    source_pk: int = 0  # set on an indexed document's text: what a cite names (else none)

    @classmethod
    def of_bytes(cls, path: str, data: bytes) -> ReferenceFile:
        sha256 = hashlib.sha256(data).hexdigest()
        name = PurePosixPath(path).name
        try:
            return cls(path=path, title=name, sha256=sha256, text=data.decode("utf-8"), encoding="utf-8")
        except UnicodeDecodeError:
            return cls(path=path, title=name, sha256=sha256, text=base64.b64encode(data).decode("ascii"),
                       encoding="base64")


def read_reference_file(*, caller: Caller, catalog: str, source_id: str, path: str) -> ReferenceFile:
    """A file of a reference the caller may read (selected or expanded by this agent,
    auto, or preselected for it, and allowed by the gate), as source_files lists it: an
    indexed document as indexed, any other file of a glob source from disk; of a glob
    source, either only while its files on disk are those it was indexed from."""
    indexes = [index for index in caller_indexes(caller) if index.slug == catalog]
    cards, _, _ = resolve_ids(indexes, [source_id])
    if not cards:
        raise NotFoundError(f"no reference {source_id!r} in catalog {catalog!r}", code="not_found")
    card = cards[0]
    decision = withheld_requests_raise(agent=caller.agent, decisions=injection_decisions(agent=caller.agent,
                                                                                         sources=[card]),
                                       via="select", context=request_context(f"read file {path}"))[card.pk]
    if not decision.allowed:
        raise ForbiddenError(decision.reason, code="withheld",
                          details={"state": decision.state, "request_id": decision.request_id})
    granted = card.mode == ReferenceSource.Mode.AUTO or caller.agent is None or \
        Selection.objects.filter(agent=caller.agent, source_id=card.pk).exists()
    if not granted:
        preselected = preselected_cards(caller, indexes)
        granted = card in preselected or card.slug in discover(indexes[0], preselected, agent=caller.agent)
    if not granted:
        raise ForbiddenError("select this reference first (selectReferences)", code="not_selected")
    document = Document.objects.filter(source_id=card.pk, path=path).values_list("title", "content_sha256", "text")
    if card.kind == ReferenceSource.Kind.GLOB:
        return _glob_file(card, path, document.first())
    return _indexed_file(card, path, document.first())


IndexedDocument = tuple[str, str, str]  # title, content sha256, text


def _indexed_file(card: SourceCard, path: str, document: IndexedDocument | None) -> ReferenceFile:
    if document is None:
        raise NotFoundError(f"no file {path!r} in reference {card.slug!r}", code="not_found")
    title, sha256, text = document
    return ReferenceFile(path=path, title=title, sha256=sha256, text=text, encoding="utf-8", source_pk=card.pk)


def _glob_file(card: SourceCard, path: str, document: IndexedDocument | None) -> ReferenceFile:
    """A glob source's file, only while the files on disk are those it was indexed from
    (the fingerprint: paths, sizes, mtimes); an indexed document, as indexed, only while
    its file still holds the indexed text (a rewrite that keeps size and mtime moves no
    fingerprint). Any other file is read from disk."""
    try:
        data = glob_file_read(pattern=card.location, path=path, fingerprint_indexed=card.fingerprint,
                              max_bytes=None if document else settings.LECTERN_MAX_FILE_BYTES)
    except SourceChanged:
        raise _changed(card) from None
    except SourceError:  # the glob no longer resolves (its root left the settings): no disk to compare with
        return _indexed_file(card, path, document)
    if document is None:
        return ReferenceFile.of_bytes(path, data) if data is not None else _indexed_file(card, path, None)
    if data is None or _indexed_sha256(path, data) != document[1]:  # gone, or rewritten in place
        raise _changed(card)
    return _indexed_file(card, path, document)


def _indexed_sha256(path: str, data: bytes) -> str | None:
    """The content hash indexing gives a file of these bytes: that of the text read from
    it (a PDF's or a DOCX's extracted text; a text file's bytes), or None when it can no
    longer be read."""
    try:
        return text_sha256(extract(path, data).text)
    except ExtractionError:
        return None


def _changed(card: SourceCard) -> ConflictError:
    return ConflictError(f"the files of reference {card.slug!r} changed on disk since it was indexed; it can be read "
                       "again once it is reindexed", code="reference_changed")
