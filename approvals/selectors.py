"""The one gate every injection passes: may this reference reach this agent now?

Enrichment, reference selection, startup instructions and file reads all ask
`injection_decisions` and honour its answer. Until approval requests and decisions
exist (the approvals issue extends this function, not its callers), a source that
requires approval is withheld from everyone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol


class Governed(Protocol):
    """A source as the gate reads it: a ReferenceSource, or retrieval's frozen SourceCard."""

    @property
    def pk(self) -> int: ...
    @property
    def requires_approval(self) -> bool: ...
    @property
    def fingerprint(self) -> str: ...


class Requester(Protocol):
    """An agent asking (retrieval.models.Agent: approvals sits below retrieval)."""

    @property
    def pk(self) -> int: ...


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


def injection_decisions(*, agent: Requester | None, sources: Iterable[Governed]) -> dict[int, InjectionDecision]:
    """Decision per source pk for `agent` (an Agent, or None for a signed-in person)."""
    return {source.pk: MISSING if source.requires_approval else NOT_REQUIRED for source in sources}
