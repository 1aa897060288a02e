"""The one gate every injection passes: may this reference reach this agent now?

Enrichment, reference selection, startup instructions, transitive discovery and file
reads ask `injection_decisions` and honour its answer; search asks `withheld_sources`,
the same rule over whole catalogs, and leaves those sources out in SQL. Until approval
requests and decisions exist (the approvals issue extends these functions, not their
callers), a source that requires approval is withheld from everyone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from catalog.models import Agent, ReferenceSource


class Governed(Protocol):
    """A source as the gate reads it: a ReferenceSource, or retrieval's frozen SourceCard."""

    @property
    def pk(self) -> int: ...
    @property
    def requires_approval(self) -> bool: ...
    @property
    def fingerprint(self) -> str: ...


@dataclass(frozen=True)
class InjectionDecision:
    allowed: bool
    state: str  # "not_required" | "missing"
    reason: str = ""

    def as_dict(self) -> dict[str, object]:
        return {"allowed": self.allowed, "state": self.state, "reason": self.reason}


NOT_REQUIRED = InjectionDecision(allowed=True, state="not_required")
MISSING = InjectionDecision(allowed=False, state="missing",
                            reason="requires approval; no reviewer has approved it for this agent")


def injection_decisions(*, agent: Agent | None, sources: Iterable[Governed]) -> dict[int, InjectionDecision]:
    """Decision per source pk for `agent` (an Agent, or None for a signed-in person)."""
    return {source.pk: MISSING if source.requires_approval else NOT_REQUIRED for source in sources}


def withheld_sources(*, agent: Agent | None, catalog_ids: Iterable[int]) -> dict[int, InjectionDecision]:
    """The sources of these catalogs that may not reach `agent` (None: a signed-in
    person), each with the gate's decision: what search leaves out of its SQL before
    ranking. Only sources that require approval are asked about; the decision is
    injection_decisions' own."""
    candidates = ReferenceSource.objects.filter(catalog_id__in=list(catalog_ids), requires_approval=True) \
        .only("pk", "requires_approval", "fingerprint")
    decisions = injection_decisions(agent=agent, sources=candidates)
    return {pk: decision for pk, decision in decisions.items() if not decision.allowed}
