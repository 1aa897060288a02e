"""An agent's standing authorisation to read references' files (Selection rows), granted
by selectReferences or an @id expansion, bound to the content it was granted on."""

from __future__ import annotations

from retrieval.enrichment.caller import Caller
from retrieval.enrichment.detection import SourceCard
from retrieval.models import Selection, Trace


def selections_grant(caller: Caller, cards: list[SourceCard], via: str, trace: Trace | None = None) -> None:
    """Record the agent's authorisation to read these references' files."""
    if caller.agent is None:
        return
    for card in cards:
        Selection.objects.update_or_create(agent=caller.agent, source_id=card.pk,
                                           defaults={"via": via, "fingerprint": card.fingerprint, "trace": trace})


def selected_source_pks(caller: Caller) -> list[int]:
    """Source pks the server recorded as this agent's selections (selectReferences or an
    @id expansion): they count as selected just as the client's `selected` does."""
    if caller.agent is None:
        return []
    return list(Selection.objects.filter(agent_id=caller.agent.pk).values_list("source_id", flat=True))
