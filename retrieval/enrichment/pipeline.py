"""Enrichment: the passes that run over every prompt and tool result. Every
injection passes `approvals.selectors.gate.injection_decisions`; every enrichment is stored
as a Trace saying which pass found what and why it was injected, hinted or withheld.

The passes and the gate only read (`_plan`); `enrich`, the agent's call, then raises
the approval requests due in one service call and stores the trace with the readings
it grants; `enrich_preview`, the curators' playground, formats the same plan and
writes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction

from approvals.selectors.gate import InjectionDecision, injection_decisions, withheld_sources
from approvals.services.requests import request_context, withheld_requests_raise
from catalog.embedder import embedder_status, get_embedder
from catalog.models import Catalog, ReferenceSource
from retrieval.enrichment import formatting
from retrieval.enrichment.caller import Caller, caller_indexes, preselected_cards
from retrieval.enrichment.detection import CatalogIndex, SourceCard, at_mentions, content_words, path_candidates
from retrieval.enrichment.discovery import Parent, discover
from retrieval.enrichment.formatting import caller_signer
from retrieval.enrichment.reference_files import containing_source, documents_paths
from retrieval.enrichment.references import cards_named, reference_text
from retrieval.enrichment.selections import selected_source_pks, selections_grant
from retrieval.models import Selection, Trace
from retrieval.traces.services import insert_trace

SURFACES = [Trace.Surface.PROMPT.value, Trace.Surface.TOOL_RESULT.value]  # a conversation has its own operation

# How many model tokens of a prompt / of a tool result's content words the semantic pass
# embeds: a long text is matched by its head (MiniLM costs ~0.2 ms a token on two cores;
# `manage.py bench_enrich` measures each head length's latency and recall).
ENRICH_EMBED_TOKENS = 128
ENRICH_TOOL_EMBED_TOKENS = 48


# The passes, most specific reason first: a reference several passes found is hinted
# for the first of them (an author's link says more than a shared tag or meaning).
SPECIFICITY = ("mention", "path", "link", "tag", "semantic")


@dataclass
class Candidate:
    card: SourceCard
    ref: str  # Caller.ref(card)
    reasons: dict[str, list[str]]  # every pass that found it -> what it matched there
    score: float | None = None
    action: str = "hint"  # expand | pin | hint | cut (over max_hints) | none (withheld expansion)
    parents: list[Parent] = field(default_factory=list)
    decision: InjectionDecision | None = None
    note: str = ""

    @property
    def decided(self) -> InjectionDecision:
        """The gate's decision, which _decide() asks for before anything reads it."""
        if self.decision is None:
            raise RuntimeError(f"{self.qualified_id} was read before the gate decided on it")
        return self.decision

    @property
    def key(self) -> tuple[int, str]:
        return self.card.catalog_id, self.card.slug

    @property
    def via(self) -> str:
        """The most specific pass that found it: the one its hint names."""
        return min(self.reasons, key=SPECIFICITY.index)

    @property
    def matched(self) -> list[str]:
        return self.reasons[self.via]

    def found_by(self, via: str, matched: list[str]) -> None:
        """Another pass found it too: keep that pass's reason beside the others."""
        known = self.reasons.setdefault(via, [])
        known += [item for item in matched if item not in known]

    @property
    def qualified_id(self) -> str:
        return f"{self.card.catalog}/{self.card.slug}"

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"source_id": self.card.slug, "catalog": self.card.catalog, "ref": self.ref,
                "name": self.card.name, "matched": self.matched, "via": self.via,
                "reasons": [{"via": via, "matched": self.reasons[via]}
                            for via in sorted(self.reasons, key=SPECIFICITY.index)],
                "score": None if self.score is None else round(self.score, 4), "injected": self.action,
                "withheld": bool(self.decision and not self.decision.allowed),
                "reason": self.decision.reason if self.decision and not self.decision.allowed else self.note,
                "request_id": self.decision.request_id if self.decision and not self.decision.allowed else None,
                "approval_id": self.decision.request_id if self.decision and self.decision.allowed else None,
                # not a withheld one's: whether governed content changed is not the caller's to know
                "source_fingerprint": self.card.fingerprint if not self.decision or self.decision.allowed
                else None}
        if self.parents:
            data["parents"] = self.parents
        return data


@dataclass
class EnrichResult:
    text: str
    hints: list[dict[str, Any]]
    pinned_reference: dict[str, Any] | None
    trace: Trace
    degraded: str | None


def _decide(caller: Caller, candidates: list[Candidate]) -> None:
    """Ask the gate about each candidate not decided yet (a decision says whether a
    request is due; `enrich` raises those once every pass has run)."""
    undecided = [c for c in candidates if c.decision is None]
    decisions = injection_decisions(agent=caller.agent, sources=[c.card for c in undecided])
    for candidate in undecided:
        candidate.decision = decisions[candidate.card.pk]


# --- enrich -----------------------------------------------------------------------------


def semantic_limits(catalogs: Iterable[Catalog], floor: float, margin: float) -> dict[int, tuple[float, float]]:
    """Each catalog's semantic (floor, margin): its ranking settings' where they set
    them, else the agent's `floor` and `margin`."""
    limits = {}
    for catalog in catalogs:
        own = catalog.ranking_settings
        limits[catalog.pk] = (floor if own.semantic_threshold is None else own.semantic_threshold,
                              margin if own.semantic_margin is None else own.semantic_margin)
    return limits


class _Passes:
    """One enrichment's working state: candidates by source, and the trace steps."""

    def __init__(self, caller: Caller, indexes: list[CatalogIndex], excluded: set[tuple[int, str]],
                 watch: tuple[int, str] | None = None) -> None:
        self.caller, self.indexes, self.excluded = caller, indexes, excluded
        # explain's: one reference whose similarity the semantic pass keeps, whether or
        # not it qualifies, and the best match its threshold was measured from
        self.watch = watch
        self.watched: float | None = None
        self.best: float | None = None
        self.candidates: dict[tuple[int, str], Candidate] = {}
        self.steps: list[dict[str, Any]] = []
        self.degraded: str | None = None
        self.linked: list[Candidate] = []  # the link step's candidates, named again once the gate is final

    @cached_property
    def hidden(self) -> set[tuple[int, str]]:
        """The caller's sources withheld from it whose policies disclose no matches: no
        pass that reads content (the semantic profile holds the head of a source's main
        document; the path pass, its documents' paths) may find them, score them or let
        them move another's threshold, or whether a prompt matches the withheld text
        would show in the hints, the trace and the requests raised. Mentions
        and tags, which name sources by what any listing shows, still find them."""
        withheld = withheld_sources(agent=self.caller.agent, catalog_ids=[index.catalog_id for index in self.indexes])
        return {(index.catalog_id, index.by_pk[pk].slug) for index in self.indexes for pk, decision in withheld.items()
                if pk in index.by_pk and not decision.disclose_matches}

    def step(self, name: str, started: float, **details: object) -> None:
        self.steps.append({"pass": name, "ms": round((time.perf_counter() - started) * 1000, 3), **details})

    def eligible(self, card: SourceCard) -> bool:
        """Hints go to selectable sources the agent does not already have."""
        key = (card.catalog_id, card.slug)
        return card.mode == ReferenceSource.Mode.SELECTABLE and key not in self.excluded and key not in self.candidates

    def candidate(self, card: SourceCard, via: str, matched: list[str], **details: Any) -> Candidate:
        candidate = Candidate(card=card, ref=self.caller.ref(card), reasons={via: matched}, **details)
        self.candidates[candidate.key] = candidate
        return candidate

    def mentions(self, text: str) -> list[Candidate]:
        """`@id` and `@catalog/id` expand the one reference they name. A bare id that
        several of the caller's catalogs hold names none of them for sure: each is
        hinted with the id to write instead, and nothing is expanded or granted (these
        hints are returned)."""
        started, found, ambiguous = time.perf_counter(), [], []
        for ident in at_mentions(text):
            cards = cards_named(self.indexes, ident)
            for card in cards:
                if (card.catalog_id, card.slug) in self.candidates:
                    continue
                if len(cards) == 1:
                    found.append(self.candidate(card, "mention", matched=[f"@{ident}"], action="expand"))
                else:
                    ref = self.caller.ref(card)
                    ambiguous.append(self.candidate(card, "mention", matched=[f"@{ident}"],
                                                    note=f"@{ident} is in several catalogs: write @{ref}"))
        self.step("mention", started, candidates=[c.as_dict() for c in found + ambiguous])
        return ambiguous

    def tags(self, text: str) -> list[Candidate]:
        """A long tool result can carry common tags held by hundreds of sources: the
        step records them compactly, tag -> catalog/source ids; the rank step says
        which were kept. `at`: where each tag first occurs in the text read (earlier
        injections stripped), as [start, end) character offsets, for a person to see."""
        started = time.perf_counter()
        by_key: dict[tuple[int, str], Candidate] = {}
        carriers: dict[str, list[str]] = {}
        spans: dict[str, list[int]] = {}
        for index in self.indexes:
            for hit in index.matcher.find(text):
                spans.setdefault(hit.tag, [hit.start, hit.end])
                ids = carriers.setdefault(hit.tag, [])
                for slug in index.key_slugs.get(hit.key, ()):
                    key = (index.catalog_id, slug)
                    if (candidate := by_key.get(key) or self.candidates.get(key)) is not None:
                        candidate.found_by("tag", [hit.tag])
                    elif self.eligible(card := index.cards[slug]):
                        by_key[key] = Candidate(card=card, ref=self.caller.ref(card), reasons={"tag": [hit.tag]})
                    else:
                        continue
                    ids.append(f"{index.slug}/{slug}")
        self.candidates.update(by_key)
        carriers = {tag: ids for tag, ids in carriers.items() if ids}
        self.step("tag", started, candidates=len(by_key), tags=carriers,
                  at={tag: spans[tag] for tag in carriers})
        return list(by_key.values())

    def semantic(self, text: str, head_tokens: int, read_as: str) -> list[Candidate]:
        started = time.perf_counter()
        embedder = get_embedder()
        if embedder is None:
            self.degraded = f"lexical-only: {embedder_status()['reason']}"
            self.step("semantic", started, skipped=self.degraded)
            return []
        if not text.strip():
            self.step("semantic", started, skipped="empty text")
            return []
        vector = embedder.embed([text], max_tokens=head_tokens)[0]
        embed_ms = round((time.perf_counter() - started) * 1000, 3)
        # Vectorised over every source: only the qualifying few become Candidates.
        pools = []
        for index in self.indexes:
            scores = index.similarities(vector)
            if not len(scores) or index.selectable is None:  # no embedded profiles
                continue
            if self.watch is not None and self.watch[0] == index.catalog_id and self.watch not in self.hidden \
                    and (watched := index.rows.get(self.watch[1])) is not None:
                self.watched = float(scores[watched])
            open_rows = index.selectable.copy()
            for catalog_id, slug in [*self.candidates, *self.excluded, *self.hidden]:
                row = index.rows.get(slug) if catalog_id == index.catalog_id else None
                if row is not None:
                    open_rows[row] = False
                    if (catalog_id, slug) in self.candidates and (catalog_id, slug) not in self.hidden:
                        self.candidates[(catalog_id, slug)].score = float(scores[row])
            pools.append((index, np.where(open_rows, scores, -np.inf)))
        # The best match of any candidate, whichever pass found it first: a prompt whose
        # best match its tags found must not let in hints far below that one.
        best = max([float(pool.max()) for _, pool in pools if len(pool)]
                   + [c.score for c in self.candidates.values() if c.score is not None], default=-np.inf)
        # Absolute floor, and close to the best: similarity levels drift with the
        # text's length and style, the gap to the best much less. Each catalog's own
        # floor and margin where its ranking settings set them, else the agent's.
        profile = self.caller.profile
        limits = semantic_limits(self.caller.catalogs, profile.semantic_threshold, profile.semantic_margin)
        thresholds = {catalog: max(floor, best - margin) for catalog, (floor, margin) in limits.items()}
        threshold = max(profile.semantic_threshold, best - profile.semantic_margin)
        self.best = None if best == -np.inf else float(best)
        found: list[tuple[float, Candidate]] = []  # (score, candidate)
        below: list[tuple[float, Candidate]] = []
        for index, pool in pools:
            threshold_of = thresholds.get(index.catalog_id, threshold)
            order = np.argsort(-pool, kind="stable")
            for row in order[: int((pool >= threshold_of).sum()) + 3]:
                if pool[row] == -np.inf:
                    break
                score = float(pool[row])
                card = index.cards[index.profile_slugs[row]]
                candidate = Candidate(card=card, ref=self.caller.ref(card), reasons={"semantic": []}, score=score)
                (found if pool[row] >= threshold_of else below).append((score, candidate))
        found.sort(key=lambda pair: (-pair[0], pair[1].card.catalog, pair[1].card.slug))
        below.sort(key=lambda pair: -pair[0])
        claimed = [c for c in self.candidates.values()
                   if c.score is not None and c.score >= thresholds.get(c.card.catalog_id, threshold)]
        for candidate in claimed:  # found by an earlier pass, and close in meaning too
            candidate.found_by("semantic", [])
        for _, candidate in found:
            self.candidates[candidate.key] = candidate
        own = {catalog.slug: {"threshold": round(thresholds[catalog.pk], 4), "floor": limits[catalog.pk][0],
                              "margin": limits[catalog.pk][1]}
               for catalog in self.caller.catalogs if limits[catalog.pk] != (profile.semantic_threshold,
                                                                            profile.semantic_margin)}
        self.step("semantic", started, model=embedder.model_id, threshold=round(threshold, 4),
                  floor=profile.semantic_threshold, margin=profile.semantic_margin,
                  **({"by_catalog": own} if own else {}),
                  embedded_tokens=head_tokens, embedded_text=read_as, embed_ms=embed_ms,
                  candidates={c.qualified_id: round(c.score or 0.0, 4)
                              for c in [*claimed, *(candidate for _, candidate in found)]},
                  nearest_below_threshold={c.qualified_id: round(score, 4) for score, c in below[:3]})
        return [candidate for _, candidate in found]

    def path(self, text: str, paths: list[str], preselected: list[SourceCard]) -> Candidate | None:
        started = time.perf_counter()
        looked_at = list(dict.fromkeys([*paths, *path_candidates(text)]))
        open_cards = [card for card in preselected if (card.catalog_id, card.slug) not in self.hidden] \
            if preselected else []
        hit = containing_source(open_cards, looked_at)
        pinned = None
        if hit is not None:
            card, path = hit
            pinned = self.candidate(card, "path", matched=[path], action="pin")
        self.step("path", started, paths=looked_at[:20], candidates=[pinned.as_dict()] if pinned else [])
        return pinned

    def rank(self, ranked: list[Candidate]) -> None:
        """Keep the first max_hints; the rest are cut: never shown nor gated, and
        recorded as a count (they are the tag and semantic candidates not kept)."""
        started, limit = time.perf_counter(), self.caller.profile.max_hints
        for candidate in ranked[limit:]:
            candidate.action, candidate.note = "cut", f"beyond the agent's max_hints ({limit})"
        self.step("rank", started, max_hints=limit, kept=[c.qualified_id for c in ranked[:limit]],
                  cut=max(len(ranked) - limit, 0))

    def links(self, roots: list[Candidate]) -> list[Candidate]:
        """References the expanded or pinned ones point at. The whole graph (depth
        <= 10, every parent) goes into the trace; only direct neighbours are hinted,
        since in a well-linked catalog everything is a few hops from everything. A
        neighbour an earlier pass found keeps that reason and is hinted as linked; only
        the new ones are returned (the others are ranked already)."""
        started, found, claimed, graph = time.perf_counter(), [], [], []
        for index in self.indexes:
            cards = [c.card for c in roots if c.card.catalog_id == index.catalog_id]
            if not cards:
                continue
            reached = discover(index, cards, agent=self.caller.agent)
            for slug, node in sorted(reached.items(), key=lambda item: (item[1].depth, item[0])):
                graph.append({"source_id": slug, "catalog": index.slug, "depth": node.depth, "parents": node.parents})
                if node.depth != 1:
                    continue
                pointing = {p["source_id"] for p in node.parents}
                matched = sorted(f"@{self.caller.ref(c)}" for c in cards if c.slug in pointing)
                if (earlier := self.candidates.get((index.catalog_id, slug))) is not None:
                    earlier.found_by("link", matched)  # its hint says who links to it
                    earlier.parents = node.parents
                    claimed.append(earlier)
                elif self.eligible(node.card):
                    found.append(self.candidate(node.card, "link", matched=matched, parents=node.parents))
        self.linked = found + claimed
        self.step("link", started, discovered=graph, candidates=[c.as_dict() for c in self.linked])
        return found

    def links_named_again(self) -> None:
        """The link step's candidates as the gate finally decided them: a withheld root
        the step named before `enrich` raised its request names that request now."""
        for step in self.steps:
            if step["pass"] == "link":
                step["candidates"] = [c.as_dict() for c in self.linked]


def _excluded(indexes: list[CatalogIndex], selected: list[str], preselected: list[SourceCard],
              recorded: list[int]) -> set[tuple[int, str]]:
    """References not to hint: preselected, selected by the client's word or on record."""
    keys = {(card.catalog_id, card.slug) for card in preselected}
    keys.update((index.catalog_id, index.by_pk[pk].slug) for pk in recorded for index in indexes if pk in index.by_pk)
    for ident in selected:
        for index in indexes:
            catalog, _, slug = ident.rpartition("/")
            known = index.ids.get(slug.lower())
            if known and catalog in ("", index.slug):
                keys.add((index.catalog_id, known))
    return keys


@dataclass
class Plan:
    """What the read half of an enrichment found, for the write half to act on (and
    for explain to read)."""

    run: _Passes
    text: str
    clean: str
    surface: str
    signer: formatting.InjectionSigner
    started: float
    context: str  # what an approval request raised here keeps of the text
    expanded: list[Candidate]
    ambiguous: list[Candidate]
    pinned: Candidate | None
    ranked: list[Candidate]
    surfaced: list[Candidate]
    gate_started: float


def enrich(*, caller: Caller, text: str, surface: str, selected: list[str] | None = None,
           paths: list[str] | None = None) -> EnrichResult:
    """The agent's enrichment of `text`: every detection pass (reads only), then the
    approval requests due for what the gate withheld, raised in one service call from
    the gate's decisions; the text enriched, and the trace stored with the readings it
    grants."""
    planned = _plan(caller=caller, text=text, surface=surface, selected=selected, paths=paths)
    due = {c.card.pk: c.decided for c in planned.surfaced if c.decided.request_due}
    if due:
        raised = withheld_requests_raise(agent=caller.agent, decisions=due, via="enrichment", context=planned.context)
        for candidate in planned.surfaced:
            candidate.decision = raised.get(candidate.card.pk, candidate.decision)
    result, granted = _finish(planned, preview=False)
    _record(caller, result.trace, granted)
    return result


def enrich_preview(*, caller: Caller, text: str, surface: str) -> EnrichResult:
    """What `enrich` would give `caller` (the curators' playground), writing nothing in
    its name: no approval request is raised (the governance step says which would be,
    `request_due`), no reading is granted, and the trace, holding the text, is returned
    unsaved, so the agent's history holds only what the agent did."""
    planned = _plan(caller=caller, text=text, surface=surface, selected=None, paths=None)
    return _finish(planned, preview=True)[0]


def enrich_plan(*, caller: Caller, text: str, surface: str, watch: SourceCard) -> Plan:
    """Every detection pass over `text` as `enrich` runs them, and the gate's decisions,
    reading only, with the semantic pass's similarity for `watch` kept beside its
    threshold (`run.watched`, `run.best`): explain's reading of why a reference was or
    was not hinted."""
    return _plan(caller=caller, text=text, surface=surface, selected=None, paths=None,
                 watch=(watch.catalog_id, watch.slug))


def _plan(*, caller: Caller, text: str, surface: str, selected: list[str] | None,
          paths: list[str] | None, watch: tuple[int, str] | None = None) -> Plan:
    """Every detection pass over `text`, and the gate's decision on everything surfaced;
    reads only."""
    started = time.perf_counter()
    signer = caller_signer(caller)  # an agent's (or person's) own injections, with no end user
    clean = formatting.strip_injection(text, signer=signer)
    indexes = caller_indexes(caller)
    preselected = preselected_cards(caller, indexes)
    run = _Passes(caller, indexes, _excluded(indexes, selected or [], preselected, selected_source_pks(caller)),
                  watch)
    ambiguous = run.mentions(clean)
    tagged = run.tags(clean)
    pinned = run.path(clean, paths or [], preselected) if surface == Trace.Surface.TOOL_RESULT or paths else None
    if surface == Trace.Surface.TOOL_RESULT:
        head_tokens = ENRICH_TOOL_EMBED_TOKENS
        semantic = run.semantic(content_words(clean, head_tokens), head_tokens, read_as="content words")
    else:
        semantic = run.semantic(clean, ENRICH_EMBED_TOKENS, read_as="as written")
    tagged.sort(key=lambda c: (-len(c.reasons["tag"]), -(c.score or 0.0)))  # scores came from the semantic pass
    expanded = [c for c in run.candidates.values() if c.action == "expand"]
    roots = expanded + ([pinned] if pinned else [])
    _decide(caller, roots)  # a withheld reference's content must not steer discovery either
    linked = run.links([c for c in roots if c.decided.allowed])

    ranked = tagged + semantic + linked
    run.rank(ranked)
    surfaced = expanded + ambiguous + ([pinned] if pinned else []) + [c for c in ranked if c.action != "cut"]
    gate_started = time.perf_counter()
    _decide(caller, surfaced)
    return Plan(run=run, text=text, clean=clean, surface=surface, signer=signer, started=started,
                    context=request_context(f"enrich ({surface})", clean), expanded=expanded, ambiguous=ambiguous,
                    pinned=pinned, ranked=ranked, surfaced=surfaced, gate_started=gate_started)


def _finish(planned: Plan, *, preview: bool) -> tuple[EnrichResult, list[SourceCard]]:
    """The governance step, the text enriched and the trace (unsaved); and the cards of
    the expansions it injected (what the agent is granted reading)."""
    run, expanded, pinned, surfaced = planned.run, planned.expanded, planned.pinned, planned.surfaced
    run.links_named_again()
    run.step("governance", planned.gate_started, decisions=[
        {"source_id": c.card.slug, "catalog": c.card.catalog, **c.decided.as_dict(),
         **({"request_due": True} if preview and c.decided.request_due else {})} for c in surfaced])

    format_started = time.perf_counter()
    blocks = []
    allowed_expansions = [c for c in expanded if c.decided.allowed]
    read = pinned is not None and pinned.decided.allowed and _is_root_markdown(pinned.card, pinned.matched[0])
    indexed = documents_paths([c.card for c in allowed_expansions + ([pinned] if pinned and read else [])])
    for candidate in allowed_expansions:
        related = sorted(c.ref for c in run.candidates.values() if "link" in c.reasons
                         and c.card.catalog_id == candidate.card.catalog_id
                         and any(p["source_id"] == candidate.card.slug for p in c.parents))
        blocks.append(formatting.expansion_block(reference_text(candidate.card, candidate.ref, related,
                                                                indexed=indexed[candidate.card.pk])))
    pinned_out = None
    if pinned is not None:
        pinned_out = {"source_id": pinned.card.slug, "catalog": pinned.card.catalog, "name": pinned.card.name,
                      "path": pinned.matched[0], "withheld": not pinned.decided.allowed,
                      "reason": pinned.decided.reason, "context": None,
                      "request_id": None if pinned.decided.allowed else pinned.decided.request_id}
        if read:
            reference = reference_text(pinned.card, pinned.ref, indexed=indexed[pinned.card.pk])
            context = formatting.reading_block(reference, pinned.matched[0])
            pinned_out["context"] = context
            blocks.append(context)
    for candidate in expanded:
        if not candidate.decided.allowed:
            candidate.action = "none"
    hints = [c for c in planned.ranked if c.action == "hint"]
    blocks.append(formatting.hint_block(
        formatting.HintLine(source_id=c.ref, name=c.card.name, matched=c.matched, via=c.via, score=c.score,
                            withheld_reason="" if c.decided.allowed else c.decided.reason, note=c.note)
        for c in expanded + planned.ambiguous + hints if c.action != "expand"))
    enriched = formatting.append_blocks(planned.clean, blocks, signer=planned.signer)
    run.step("format", format_started, blocks=len([b for b in blocks if b]))

    took_ms = (time.perf_counter() - planned.started) * 1000
    stored_text = planned.text if settings.LECTERN_TRACE_STORE_TEXT or preview else None
    caller = run.caller
    trace = Trace(agent=caller.agent, caller=caller.name, surface=planned.surface, text=stored_text, steps=run.steps,
                  hints=[c.as_dict() for c in surfaced], degraded=run.degraded or "", took_ms=round(took_ms, 3))
    result = EnrichResult(text=enriched, hints=trace.hints, pinned_reference=pinned_out, trace=trace,
                          degraded=run.degraded)
    return result, [c.card for c in allowed_expansions]


def _record(caller: Caller, trace: Trace, expanded: list[SourceCard]) -> None:
    """Store the trace, and grant the agent reading what it expanded (with the trace)."""
    if caller.agent is None or not expanded:
        insert_trace(trace)
        return
    with transaction.atomic():
        insert_trace(trace)
        selections_grant(caller, expanded, Selection.Via.MENTION, trace)


def _is_root_markdown(card: SourceCard, path: str) -> bool:
    base = card.base_dir
    rest = path[len(base):] if base and path.startswith(base) else None
    return rest is not None and "/" not in rest and rest.lower().endswith(".md")


