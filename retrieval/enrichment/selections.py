"""An agent's standing authorisation to read references' files (Selection rows), granted
by selectReferences or an @id expansion, bound to the content it was granted on."""

from __future__ import annotations

from retrieval.enrichment.caller import Caller
from retrieval.enrichment.detection import SourceCard
from retrieval.models import Selection, Trace


def selections_grant(caller: Caller, cards: list[SourceCard], via: str, trace: Trace | None = None) -> None:
    """Record the agent's authorisation to read these references' files: one upsert for
    all of them, a grant already on record taking the new via, fingerprint and trace."""
    if caller.agent is None or not cards:
        return
    # a row may be upserted once per statement: a card given twice is granted once
    unique = {card.pk: card for card in cards}.values()
    Selection.objects.bulk_create(
        [Selection(agent=caller.agent, source_id=card.pk, via=via, fingerprint=card.fingerprint, trace=trace)
         for card in unique],
        update_conflicts=True, unique_fields=["agent", "source"],
        update_fields=["via", "fingerprint", "trace", "updated_at"])


def selected_source_pks(caller: Caller) -> list[int]:
    """Source pks the server recorded as this agent's selections (selectReferences or an
    @id expansion): they count as selected just as the client's `selected` does."""
    if caller.agent is None:
        return []
    return list(Selection.objects.filter(agent_id=caller.agent.pk).values_list("source_id", flat=True))
