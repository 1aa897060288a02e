"""Who is asking enrichment, with the profile it applies (an agent's, or the default one
for a person signed in), and the catalogs' detection indexes and preselected references
that every enrichment operation starts from."""

from __future__ import annotations

from dataclasses import dataclass

from catalog.auth import RequestUser, visible_catalogs
from catalog.errors import NotFoundError
from catalog.models import Agent, Catalog
from retrieval.enrichment.detection import CatalogIndex, SourceCard, catalog_index


@dataclass
class Caller:
    """Who is asking, with the profile enrichment applies. People signed in to the
    dashboard get the default profile over the catalogs they may see.

    `qualify`: the caller may read several catalogs, so every id Lectern writes for it
    names its catalog (`@demo/caching`): one catalog's `caching` is not another's, and an
    id hinted today must still select the same reference when a curator adds a
    namesake elsewhere. Decided by the caller's scope, not by the `catalogs` a request
    narrows it to, since the agent passes the ids back in other requests."""

    name: str
    catalogs: list[Catalog]
    agent: Agent | None
    profile: Agent  # the agent itself, or an unsaved Agent holding the default profile
    qualify: bool = False

    @classmethod
    def of(cls, user: RequestUser, catalog_slugs: list[str] | None = None) -> Caller:
        catalogs = list(visible_catalogs(user).order_by("slug"))
        qualify = len(catalogs) > 1
        if catalog_slugs:
            known = {c.slug: c for c in catalogs}
            missing = [slug for slug in catalog_slugs if slug not in known]
            if missing:
                raise NotFoundError(f"no catalog {missing[0]!r}", code="not_found")
            catalogs = [known[slug] for slug in dict.fromkeys(catalog_slugs)]
        if not isinstance(user, Agent):
            return cls(name=user.get_username(), catalogs=catalogs, agent=None, profile=Agent(), qualify=qualify)
        return cls(name=user.name, catalogs=catalogs, agent=user, profile=user, qualify=qualify)

    def ref(self, card: SourceCard) -> str:
        """The id this caller writes (`@ref`) and passes back to selectReferences."""
        return f"{card.catalog}/{card.slug}" if self.qualify else card.slug


def caller_indexes(caller: Caller) -> list[CatalogIndex]:
    return [catalog_index(catalog) for catalog in caller.catalogs]


def preselected_cards(caller: Caller, indexes: list[CatalogIndex]) -> list[SourceCard]:
    """The agent's own preselected sources plus every source whose mode is preselected."""
    chosen = set()
    if caller.agent is not None:
        # Through the link table: a related manager costs twice the query (~0.5 ms).
        chosen = set(Agent.preselected.through.objects.filter(agent_id=caller.agent.pk)
                     .values_list("referencesource_id", flat=True))
    cards = []
    for index in indexes:
        picked = {card.slug: card for card in index.preselected_mode}
        picked.update((index.by_pk[pk].slug, index.by_pk[pk]) for pk in chosen if pk in index.by_pk)
        cards += [picked[slug] for slug in sorted(picked)]
    return cards
