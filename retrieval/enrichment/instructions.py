"""An agent's startup instructions: its AUTO sources' content within the token
budget, its preselected sources resolved transitively (their content too for `preload`
agents), and the rag_search hint for `rag` agents."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import Sum

from approvals.selectors.gate import injection_decisions
from approvals.services.requests import withheld_requests_raise
from catalog.embedder import get_embedder
from catalog.models import Agent, Document, ReferenceSource
from retrieval.enrichment import formatting
from retrieval.enrichment.caller import Caller, caller_indexes, preselected_cards
from retrieval.enrichment.detection import SourceCard
from retrieval.enrichment.discovery import Parent, discover
from retrieval.enrichment.reference_files import documents_paths
from retrieval.enrichment.references import reference_text


def _count_tokens(text: str) -> int:
    embedder = get_embedder()
    if embedder is None:
        return len(text) // 4 + 1
    return embedder.count_tokens([text])[0]


def _source_bodies(cards: list[SourceCard], budget: int) -> dict[int, str]:
    """Each reference's documents as one text, by pk, for those that can fit `budget`
    tokens (a token covers at most a dozen bytes, so larger sources are not even read):
    the sizes of all in one aggregate query, then the texts of those that fit in one."""
    pks = {card.pk for card in cards}
    if not pks:
        return {}
    sizes = dict(Document.objects.filter(source_id__in=list(pks)).order_by().values("source_id")
                 .annotate(total=Sum("size")).values_list("source_id", "total"))
    parts: dict[int, list[str]] = {pk: [] for pk in pks if sizes.get(pk, 0) <= budget * 12}
    if parts:
        documents = Document.objects.filter(source_id__in=list(parts)).order_by("source_id", "path") \
            .values_list("source_id", "path", "text")
        for pk, path, text in documents:
            parts[pk].append(f"#### {path}\n\n{text.strip()}")
    return {pk: "\n\n".join(texts) for pk, texts in parts.items()}


def agent_instructions(*, caller: Caller) -> dict[str, Any]:
    """The startup block: AUTO sources' content within the token budget, preselected
    sources resolved transitively (their content too for `preload` agents), and the
    rag_search hint for `rag` agents. Nothing is ever cut mid-document: a source that
    does not fit whole is listed instead, with how to read it."""
    indexes = caller_indexes(caller)
    auto = [card for index in indexes for card in index.cards.values() if card.mode == ReferenceSource.Mode.AUTO]
    preselected = preselected_cards(caller, indexes)
    discovered = []
    for index in indexes:
        roots = [card for card in preselected if card.catalog_id == index.catalog_id]
        taken = {card.slug for card in auto + preselected if card.catalog_id == index.catalog_id}
        reached = discover(index, roots, agent=caller.agent)
        discovered += [node for slug, node in sorted(reached.items()) if slug not in taken]
    entries: list[tuple[SourceCard, str, list[Parent]]] = [(card, "auto", []) for card in auto]
    entries += [(card, "preselected", []) for card in preselected]
    entries += [(node.card, "link", node.parents) for node in discovered]
    decisions = withheld_requests_raise(
        agent=caller.agent, decisions=injection_decisions(agent=caller.agent, sources=[card for card, _, _ in entries]),
        via="enrichment", context="startup instructions")

    header = "# Reference material\n\nThese references apply to your work. Cite them by @id."
    rag_hint = None
    if caller.profile.strategy == Agent.Strategy.RAG:
        names = ", ".join(catalog.slug for catalog in caller.catalogs)
        rag_hint = (f"Use the `rag_search` tool with a natural-language query to find passages in the catalogs "
                    f"{names}. It returns up to {caller.profile.default_top_k} results as "
                    "`--- Result N (score: 0.XXX, source: path) ---` followed by the passage.")
    preload = caller.profile.strategy == Agent.Strategy.PRELOAD
    bodies = _source_bodies([card for card, via, _ in entries if decisions[card.pk].allowed
                             and (via == "auto" or preload)], caller.profile.token_budget)
    loaded: dict[int, str] = {}  # pk -> section, in entry order
    report: dict[int, dict[str, Any]] = {}
    for card, via, parents in entries:
        item: dict[str, Any] = {"source_id": card.slug, "catalog": card.catalog, "name": card.name, "via": via,
                                "tokens": 0}
        if parents:
            item["parents"] = parents
        decision = decisions[card.pk]
        if not decision.allowed:
            report[card.pk] = {**item, "included": "withheld", "reason": decision.reason,
                               "request_id": decision.request_id}
            continue
        loads = via == "auto" or preload
        body = bodies.get(card.pk) if loads else None
        if body is not None:
            loaded[card.pk] = f"## @{caller.ref(card)}: {formatting.one_line(card.name)}\n\n{body}"
            report[card.pk] = {**item, "included": "content"}
        else:
            reason = "over the token budget" if loads else "rag strategy: read it with rag_search or its files"
            report[card.pk] = {**item, "included": "listed", "reason": reason}
    cards = {card.pk: card for card, _, _ in entries}
    startup = _StartupText(header=header, sections=loaded, cards=cards, ref=caller.ref,
                           forms={pk: "content" if pk in loaded else "full"
                                  for pk, item in report.items() if item["included"] != "withheld"},
                           searching=f"## Searching\n\n{rag_hint}" if rag_hint else None)
    budget, meter = caller.profile.token_budget, _TokenMeter()
    text, tokens = startup.fit(budget, meter)
    for pk, form in startup.forms.items():
        if form == "content":
            report[pk]["tokens"] = meter.specials + meter.inner(loaded[pk])
        elif report[pk]["included"] == "content" or form != "full":
            report[pk].update(included="omitted" if form == "omitted" else "listed",
                              reason=_SHORTENED.get(form, "over the token budget"))
    return {"text": text, "strategy": caller.profile.strategy, "token_budget": budget, "tokens": tokens,
            "over_budget": tokens > budget, "sources": list(report.values()), "rag_hint": rag_hint}


_SHORTENED = {"brief": "over the token budget: listed without its files", "omitted": "over the token budget"}


_FURTHER = "## Further references (not loaded; select or search them when needed)"


class _TokenMeter:
    """Token counts of the startup text's parts, each counted once. WordPiece never
    makes a token across the blank lines that join the parts, so the parts' counts add
    up to the whole's (less the [CLS] and [SEP] each count holds): the fitting steps
    are estimated without tokenizing the whole text again each time."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.specials = _count_tokens("")

    def inner(self, part: str) -> int:
        if part not in self.counts:
            self.counts[part] = _count_tokens(part) - self.specials
        return self.counts[part]


class _StartupText:
    """The startup text's parts, and how each reference shows in it (`forms`, in entry
    order): `content` (loaded whole), `full` (listed with its files), `brief` (listed by
    name), `omitted` (named on one line). `shorten` takes one step toward a shorter
    text: the last loaded source becomes a listing, then the last full listing loses its
    files, then the last listing is left out; then the line naming those left out
    becomes a count, then the rag_search section goes (the response still carries it)."""

    def __init__(self, *, header: str, sections: dict[int, str], cards: dict[int, SourceCard],
                 ref: Callable[[SourceCard], str], forms: dict[int, str], searching: str | None) -> None:
        self.header, self.sections, self.cards, self.ref = header, sections, cards, ref
        self.forms, self.searching = forms, searching
        self.count_only = False  # the omitted ones as a count rather than by id
        self.listings: dict[int, str] = {}  # each read once (files: a query for all, and a glob each)
        self.indexed: dict[int, list[str]] | None = None  # documents' paths of every reference shown

    def listing(self, pk: int) -> str:
        if pk not in self.listings:
            if self.indexed is None:  # any reference shown may come to be listed: one query for all
                self.indexed = documents_paths(self.cards[key] for key in self.forms)
            card = self.cards[pk]
            self.listings[pk] = formatting.expansion_block(
                reference_text(card, self.ref(card), indexed=self.indexed[pk]), status=formatting.LISTED)
        return self.listings[pk]

    def parts(self) -> list[str]:
        parts = [self.header, *(self.sections[pk] for pk, form in self.forms.items() if form == "content")]
        listed = [self.listing(pk) if form == "full" else
                  formatting.brief_listing(self.ref(self.cards[pk]), self.cards[pk].name)
                  for pk, form in self.forms.items() if form in ("full", "brief")]
        omitted = [self.ref(self.cards[pk]) for pk, form in self.forms.items() if form == "omitted"]
        if listed:
            parts += [_FURTHER, *listed]
        if omitted:
            parts.append(formatting.omitted_line(omitted, count_only=self.count_only))
        if self.searching:
            parts.append(self.searching)
        return parts

    def text(self) -> str:
        return "\n\n".join(self.parts()) + "\n"

    def shorten(self) -> bool:
        """One step shorter; False when there is nothing left to shorten."""
        for form, shorter in (("content", "full"), ("full", "brief"), ("brief", "omitted")):
            last = next((pk for pk in reversed(self.forms) if self.forms[pk] == form), None)
            if last is not None:
                self.forms[last] = shorter
                return True
        if "omitted" in self.forms.values() and not self.count_only:
            self.count_only = True
            return True
        if self.searching:
            self.searching = None
            return True
        return False

    def fit(self, budget: int, meter: _TokenMeter) -> tuple[str, int]:
        """The text within `budget` tokens as the response counts them, and its count:
        estimated step by step from the parts' counts, then counted whole (and shortened
        further should the whole count more)."""
        while meter.specials + sum(map(meter.inner, self.parts())) > budget and self.shorten():
            pass
        text = self.text()
        tokens = _count_tokens(text)
        while tokens > budget and self.shorten():
            text = self.text()
            tokens = _count_tokens(text)
        return text, tokens
