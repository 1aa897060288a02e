"""Reads for citations: each served passage's cite with the approval that let it
through (the gate's answer, one statement), and a cite resolved for a curator to the
text that was served, the traces that served it and whether the text is still current."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from approvals.selectors.gate import injection_decisions
from catalog.auth import RequestUser, is_curator, visible_catalogs
from catalog.errors import ForbiddenError, NotFoundError
from catalog.models import Agent, Catalog, Document
from retrieval.citations.grammar import Cite, byte_range, cite_string, fingerprint
from retrieval.models import ServedPassage, ServedText

SERVINGS_SHOWN = 50  # the newest traces a resolution names


class Citable(Protocol):
    """A passage as search and conversation retrieval return it."""

    source_pk: int
    source: str
    document_id: str
    byte_offset: int
    content: str


@dataclass(frozen=True)
class Citation:
    """What a served passage carries to be quoted and found again: its cite, the full
    fingerprint of its text, its bytes in the document and the approval that let it
    through (None: its source needs none)."""

    cite: str
    fingerprint: str
    byte_start: int
    byte_end: int
    approval_id: int | None
    catalog_pk: int = 0
    source: str = ""
    path: str = ""
    text: str = ""

    def fields(self) -> dict[str, Any]:
        """What a hit or an injected passage shows of it."""
        return {"cite": self.cite, "fingerprint": self.fingerprint, "byte_start": self.byte_start,
                "byte_end": self.byte_end, "approval_id": self.approval_id}


@dataclass(frozen=True)
class _Pk:
    pk: int


def approval_ids(*, agent: Agent | None, source_pks: Sequence[int]) -> dict[int, int]:
    """The approval request that lets each governed source through to `agent` now, by
    source pk (the gate's answer; ungoverned sources are not in it). A person is never
    approved, so nothing is asked for one."""
    if agent is None or not source_pks:
        return {}
    decisions = injection_decisions(agent=agent, sources=[_Pk(pk) for pk in source_pks])
    return {pk: decision.request_id for pk, decision in decisions.items()
            if decision.allowed and decision.request_id is not None}


def citations_of(*, catalog: Catalog, hits: Sequence[Citable], agent: Agent | None) -> list[Citation]:
    """Each hit's citation, in order: one statement (the gate's) for an agent, none for a person."""
    approved = approval_ids(agent=agent, source_pks=sorted({hit.source_pk for hit in hits}))
    citations = []
    for hit in hits:
        start, end = byte_range(hit.byte_offset, hit.content)
        printed = fingerprint(hit.content)
        citations.append(Citation(
            cite=cite_string(catalog=catalog.slug, source=hit.source, path=hit.document_id, start=start, end=end,
                             fingerprint=printed),
            fingerprint=printed, byte_start=start, byte_end=end, approval_id=approved.get(hit.source_pk),
            catalog_pk=catalog.pk, source=hit.source, path=hit.document_id, text=hit.content))
    return citations


# --- resolving a cite ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Serving:
    """One trace that served the cited text."""

    trace_id: UUID
    served_at: datetime
    caller: str
    agent: str | None
    surface: str
    approval_id: int | None


@dataclass
class Resolution:
    cite: Cite
    fingerprint: str  # the full fingerprint of `text`
    text: str  # exactly what was served
    current: str | None  # what the document holds at those bytes now; None: no such document or range
    served: list[Serving] = field(default_factory=list)

    @property
    def current_fingerprint(self) -> str | None:
        return fingerprint(self.current) if self.current is not None else None

    @property
    def changed(self) -> bool:
        """The document no longer holds the served text at those bytes."""
        return self.current_fingerprint != self.fingerprint


def cited_catalog(caller: RequestUser, cite: Cite) -> Catalog:
    """The cite's catalog if `caller` curates it, and may read the cited source now.
    A catalog the caller cannot see is 404; one they see without curating it, 403. A
    curator agent reads a governed source only while the gate lets it through (else 404,
    as for a source that does not exist); a person in the curator group reads every
    source, as the source pages show them."""
    catalog = visible_catalogs(caller).filter(slug=cite.catalog).first()
    if catalog is None:
        raise NotFoundError(f"No catalog {cite.catalog!r}.")
    if not is_curator(caller):
        raise ForbiddenError("Resolving a cite needs a curator of its catalog (a curator's session or token).")
    if isinstance(caller, Agent):
        source = catalog.sources.filter(slug=cite.source).first()
        if source is None or not injection_decisions(agent=caller, sources=[source])[source.pk].allowed:
            raise NotFoundError(f"Catalog {cite.catalog!r} has no source {cite.source!r} for this caller.")
    return catalog


def cite_resolve(*, caller: RequestUser, cite: Cite) -> Resolution:
    """The text a cite names, for a curator of its catalog (cited_catalog): as the traces
    that served it kept it, else as the document holds it now when that still matches
    the cite's fingerprint; 404 when neither (never served by a recorded call, or its
    traces were purged, and the text changed since)."""
    catalog = cited_catalog(caller, cite)
    passages = list(ServedPassage.objects.filter(
        catalog=catalog, source=cite.source, path=cite.path, byte_start=cite.start, byte_end=cite.end,
        text__fingerprint__startswith=cite.fingerprint,
    ).select_related("trace__agent").order_by("-trace__created_at", "-pk")[:SERVINGS_SHOWN])
    current = _current_text(catalog, cite)
    served = ServedText.objects.filter(fingerprint=passages[0].text_id).first() if passages else None
    if served is not None:
        return Resolution(cite, served.fingerprint, served.text, current,
                          [_serving(p) for p in passages if p.text_id == served.fingerprint])
    if current is not None and fingerprint(current).startswith(cite.fingerprint):
        return Resolution(cite, fingerprint(current), current, current)
    raise NotFoundError("No text for this cite: no recorded call served it (or its traces were purged), and the "
                  "document no longer holds it.")


def _current_text(catalog: Catalog, cite: Cite) -> str | None:
    document = Document.objects.filter(catalog=catalog, source__slug=cite.source, path=cite.path) \
        .values_list("text", flat=True).first()
    if document is None:
        return None
    data = document.encode("utf-8")
    if cite.end > len(data):
        return None
    try:
        return data[cite.start:cite.end].decode("utf-8")
    except UnicodeDecodeError:  # the range now cuts a character
        return None


def _serving(passage: ServedPassage) -> Serving:
    trace = passage.trace
    return Serving(trace.pk, trace.created_at, trace.caller, trace.agent.name if trace.agent else None,
                   trace.surface, passage.approval_id)
