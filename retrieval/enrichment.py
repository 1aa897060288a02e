"""Enrichment (seed 000): the passes that run over every prompt and tool result, the
startup instructions of an agent profile (seed 003), and listReferences /
selectReferences. Every injection passes `approvals.selectors.injection_decisions`;
every enrichment is stored as a Trace saying which pass found what and why it was
injected, hinted or withheld.
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.utils.crypto import salted_hmac

from api.errors import DomainError
from approvals.selectors import InjectionDecision, injection_decisions
from catalog.auth import RequestUser, visible_catalogs
from catalog.embedder import embedder_status, get_embedder
from catalog.models import Agent, Catalog, Document, ReferenceSource
from catalog.sources.errors import SourceError
from catalog.sources.globs import SourceChanged, glob_file_read
from catalog.tag_keys import tag_key
from retrieval import formatting
from retrieval.detection import (
    CatalogIndex,
    Parent,
    SourceCard,
    catalog_index,
    containing_source,
    content_words,
    contents_of,
    discover,
    source_files,
)
from retrieval.mentions import at_mentions, path_candidates
from retrieval.models import Selection, Trace

SURFACES = Trace.Surface.values


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
                raise DomainError(f"no catalog {missing[0]!r}", code="not_found", status_code=404)
            catalogs = [known[slug] for slug in dict.fromkeys(catalog_slugs)]
        if not isinstance(user, Agent):
            return cls(name=user.get_username(), catalogs=catalogs, agent=None, profile=Agent(), qualify=qualify)
        return cls(name=user.name, catalogs=catalogs, agent=user, profile=user, qualify=qualify)

    def ref(self, card: SourceCard) -> str:
        """The id this caller writes (`@ref`) and passes back to selectReferences."""
        return f"{card.catalog}/{card.slug}" if self.qualify else card.slug


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
                "reason": self.decision.reason if self.decision and not self.decision.allowed else self.note}
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


# --- helpers shared by the operations --------------------------------------------------


def _indexes(caller: Caller) -> list[CatalogIndex]:
    return [catalog_index(catalog) for catalog in caller.catalogs]


def _preselected(caller: Caller, indexes: list[CatalogIndex]) -> list[SourceCard]:
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


def reference_text(card: SourceCard, ref: str, related: list[str] | None = None) -> formatting.ReferenceText:
    paths = source_files(card)
    return formatting.ReferenceText(source_id=ref, name=card.name, description=card.description, paths=paths,
                                    contents=contents_of(card, paths), related=related or [],
                                    base_dir=card.base_dir)


def _decide(caller: Caller, candidates: list[Candidate]) -> None:
    """Ask the gate about each candidate not decided yet."""
    undecided = [c for c in candidates if c.decision is None]
    decisions = injection_decisions(agent=caller.agent, sources=[c.card for c in undecided])
    for candidate in undecided:
        candidate.decision = decisions[candidate.card.pk]


def _grant(caller: Caller, cards: list[SourceCard], via: str, trace: Trace | None = None) -> None:
    """Record the agent's authorisation to read these references' files."""
    if caller.agent is None:
        return
    for card in cards:
        Selection.objects.update_or_create(agent=caller.agent, source_id=card.pk,
                                           defaults={"via": via, "fingerprint": card.fingerprint, "trace": trace})


# --- enrich -----------------------------------------------------------------------------


class _Passes:
    """One enrichment's working state: candidates by source, and the trace steps."""

    def __init__(self, caller: Caller, indexes: list[CatalogIndex], excluded: set[tuple[int, str]]) -> None:
        self.caller, self.indexes, self.excluded = caller, indexes, excluded
        self.candidates: dict[tuple[int, str], Candidate] = {}
        self.steps: list[dict[str, Any]] = []
        self.degraded: str | None = None

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
        which were kept."""
        started = time.perf_counter()
        by_key: dict[tuple[int, str], Candidate] = {}
        carriers: dict[str, list[str]] = {}
        for index in self.indexes:
            for hit in index.matcher.find(text):
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
        self.step("tag", started, candidates=len(by_key), tags=carriers)
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
            open_rows = index.selectable.copy()
            for catalog_id, slug in [*self.candidates, *self.excluded]:
                row = index.rows.get(slug) if catalog_id == index.catalog_id else None
                if row is not None:
                    open_rows[row] = False
                    if (catalog_id, slug) in self.candidates:
                        self.candidates[(catalog_id, slug)].score = float(scores[row])
            pools.append((index, np.where(open_rows, scores, -np.inf)))
        # The best match of any candidate, whichever pass found it first: a prompt whose
        # best match its tags found must not let in hints far below that one.
        best = max([float(pool.max()) for _, pool in pools if len(pool)]
                   + [c.score for c in self.candidates.values() if c.score is not None], default=-np.inf)
        # Absolute floor, and close to the best: similarity levels drift with the
        # text's length and style, the gap to the best much less.
        threshold = max(self.caller.profile.semantic_threshold, best - self.caller.profile.semantic_margin)
        found: list[tuple[float, Candidate]] = []  # (score, candidate)
        below: list[tuple[float, Candidate]] = []
        for index, pool in pools:
            order = np.argsort(-pool, kind="stable")
            for row in order[: int((pool >= threshold).sum()) + 3]:
                if pool[row] == -np.inf:
                    break
                score = float(pool[row])
                card = index.cards[index.profile_slugs[row]]
                candidate = Candidate(card=card, ref=self.caller.ref(card), reasons={"semantic": []}, score=score)
                (found if pool[row] >= threshold else below).append((score, candidate))
        found.sort(key=lambda pair: (-pair[0], pair[1].card.catalog, pair[1].card.slug))
        below.sort(key=lambda pair: -pair[0])
        claimed = [c for c in self.candidates.values() if c.score is not None and c.score >= threshold]
        for candidate in claimed:  # found by an earlier pass, and close in meaning too
            candidate.found_by("semantic", [])
        for _, candidate in found:
            self.candidates[candidate.key] = candidate
        self.step("semantic", started, model=embedder.model_id, threshold=round(threshold, 4),
                  floor=self.caller.profile.semantic_threshold, margin=self.caller.profile.semantic_margin,
                  embedded_tokens=head_tokens, embedded_text=read_as, embed_ms=embed_ms,
                  candidates={c.qualified_id: round(c.score or 0.0, 4)
                              for c in [*claimed, *(candidate for _, candidate in found)]},
                  nearest_below_threshold={c.qualified_id: round(score, 4) for score, c in below[:3]})
        return [candidate for _, candidate in found]

    def path(self, text: str, paths: list[str], preselected: list[SourceCard]) -> Candidate | None:
        started = time.perf_counter()
        looked_at = list(dict.fromkeys([*paths, *path_candidates(text)]))
        hit = containing_source(preselected, looked_at)
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
        self.step("link", started, discovered=graph, candidates=[c.as_dict() for c in found + claimed])
        return found


def _recorded_selections(caller: Caller) -> list[int]:
    """Source pks the server recorded as this agent's selections (selectReferences or an
    @id expansion): they count as selected just as the client's `selected` does."""
    if caller.agent is None:
        return []
    return list(Selection.objects.filter(agent_id=caller.agent.pk).values_list("source_id", flat=True))


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


def enrich(*, caller: Caller, text: str, surface: str, selected: list[str] | None = None,
           paths: list[str] | None = None) -> EnrichResult:
    """Run every detection pass over `text` and return it enriched, with the trace."""
    started = time.perf_counter()
    keys = _injection_keys()
    clean = formatting.strip_injections(text, keys=keys)
    indexes = _indexes(caller)
    preselected = _preselected(caller, indexes)
    run = _Passes(caller, indexes, _excluded(indexes, selected or [], preselected, _recorded_selections(caller)))
    ambiguous = run.mentions(clean)
    tagged = run.tags(clean)
    pinned = run.path(clean, paths or [], preselected) if surface == Trace.Surface.TOOL_RESULT or paths else None
    if surface == Trace.Surface.TOOL_RESULT:
        head_tokens = settings.LECTERN_ENRICH_TOOL_EMBED_TOKENS
        semantic = run.semantic(content_words(clean, head_tokens), head_tokens, read_as="content words")
    else:
        semantic = run.semantic(clean, settings.LECTERN_ENRICH_EMBED_TOKENS, read_as="as written")
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
    run.step("governance", gate_started, decisions=[
        {"source_id": c.card.slug, "catalog": c.card.catalog, **c.decided.as_dict()} for c in surfaced])

    format_started = time.perf_counter()
    blocks = []
    allowed_expansions = [c for c in expanded if c.decided.allowed]
    for candidate in allowed_expansions:
        related = sorted(c.ref for c in run.candidates.values() if "link" in c.reasons
                         and c.card.catalog_id == candidate.card.catalog_id
                         and any(p["source_id"] == candidate.card.slug for p in c.parents))
        blocks.append(formatting.expansion_block(reference_text(candidate.card, candidate.ref, related)))
    pinned_out = None
    if pinned is not None:
        pinned_out = {"source_id": pinned.card.slug, "catalog": pinned.card.catalog, "name": pinned.card.name,
                      "path": pinned.matched[0], "withheld": not pinned.decided.allowed,
                      "reason": pinned.decided.reason, "context": None}
        if pinned.decided.allowed and _is_root_markdown(pinned.card, pinned.matched[0]):
            context = formatting.reading_block(reference_text(pinned.card, pinned.ref), pinned.matched[0])
            pinned_out["context"] = context
            blocks.append(context)
    for candidate in expanded:
        if not candidate.decided.allowed:
            candidate.action = "none"
    hints = [c for c in ranked if c.action == "hint"]
    blocks.append(formatting.hint_block(
        formatting.HintLine(source_id=c.ref, name=c.card.name, matched=c.matched, via=c.via, score=c.score,
                            withheld_reason="" if c.decided.allowed else c.decided.reason, note=c.note)
        for c in expanded + ambiguous + hints if c.action != "expand"))
    enriched = formatting.append_blocks(clean, blocks, key=keys[0])
    run.step("format", format_started, blocks=len([b for b in blocks if b]))

    took_ms = (time.perf_counter() - started) * 1000
    grants = [c.card for c in allowed_expansions] if caller.agent is not None else []
    stored_text = text if settings.LECTERN_TRACE_STORE_TEXT else None
    trace = Trace(agent=caller.agent, caller=caller.name, surface=surface, text=stored_text, steps=run.steps,
                  hints=[c.as_dict() for c in surfaced], degraded=run.degraded or "", took_ms=round(took_ms, 3))
    if grants:
        with transaction.atomic():
            insert_trace(trace)
            _grant(caller, grants, Selection.Via.MENTION, trace)
    else:
        insert_trace(trace)
    return EnrichResult(text=enriched, hints=trace.hints, pinned_reference=pinned_out, trace=trace,
                        degraded=run.degraded)


def _injection_keys() -> list[bytes]:
    """The keys injections are signed with (the first) and recognised by: derived from
    SECRET_KEY, then from each of SECRET_KEY_FALLBACKS, so that rotating the secret does
    not turn the injections in conversations under way into the user's text."""
    secrets = [settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS]
    return [salted_hmac("lectern.injection", "key", secret=secret, algorithm="sha256").digest() for secret in secrets]


def insert_trace(trace: Trace) -> None:
    """Store a new trace in one statement, one round trip (the ORM's create inside a
    transaction took four). Alone, in autocommit, a trace is a diagnostic record whose
    commit does not wait for the WAL flush: a crash may lose the last few traces, never
    corrupt anything. Inside a transaction (a grant rides along) the commit stays durable."""
    fields = Trace._meta.concrete_fields
    # a concrete field is one with a column (the stubs type Field.column as optional)
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)  # type: ignore[arg-type]
    values = [f.get_db_prep_save(f.pre_save(trace, add=True), connection) for f in fields]
    commit = "off" if connection.get_autocommit() else "on"
    with connection.cursor() as cursor:
        cursor.execute(f"WITH durability AS (SELECT set_config('synchronous_commit', %s, true)) "
                       f"INSERT INTO {Trace._meta.db_table} ({columns}) "
                       f"SELECT {', '.join(['%s'] * len(fields))} FROM durability", [commit, *values])
    trace._state.adding, trace._state.db = False, connection.alias


def _is_root_markdown(card: SourceCard, path: str) -> bool:
    base = card.base_dir
    rest = path[len(base):] if base and path.startswith(base) else None
    return rest is not None and "/" not in rest and rest.lower().endswith(".md")


# --- listReferences / selectReferences --------------------------------------------------


def list_references(*, caller: Caller, tag: str = "", text: str = "") -> list[dict[str, Any]]:
    indexes = _indexes(caller)
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
             "index_status": c.status, "withheld": not decisions[c.pk].allowed, "reason": decisions[c.pk].reason}
            for c in cards]


def cards_named(indexes: list[CatalogIndex], ident: str) -> list[SourceCard]:
    """The references an id names in these catalogs: `source` in any of them, or
    `catalog/source` (with or without `@`, in any case)."""
    catalog, _, slug = ident.lstrip("@").lower().rpartition("/")
    return [index.cards[index.ids[slug]] for index in indexes
            if slug in index.ids and catalog in ("", index.slug.lower())]


def _resolve_ids(indexes: list[CatalogIndex], ids: list[str]) -> tuple[list[SourceCard], list[str], list[str]]:
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
    indexes = _indexes(caller)
    cards, unknown, ambiguous = _resolve_ids(indexes, ids)
    unknown_tags = []
    for tag in tags:
        key = tag_key(tag)
        carriers = [index.cards[slug] for index in indexes for slug in index.key_slugs.get(key, ())]
        if not carriers:
            unknown_tags.append(tag)
        cards += carriers
    if unknown or ambiguous or unknown_tags:
        raise DomainError("some references could not be resolved", code="unknown_reference", status_code=400,
                          details={"unknown_ids": unknown, "ambiguous_ids": ambiguous, "unknown_tags": unknown_tags})
    cards = list({(card.catalog_id, card.slug): card for card in cards}.values())
    decisions = injection_decisions(agent=caller.agent, sources=cards)
    allowed = [card for card in cards if decisions[card.pk].allowed]
    with transaction.atomic():
        _grant(caller, allowed, Selection.Via.SELECT)
    selected = []
    for card in allowed:
        reference = reference_text(card, caller.ref(card))
        selected.append({"source_id": card.slug, "catalog": card.catalog, "name": card.name,
                         "description": card.description, "files": reference.paths, "contents": reference.contents,
                         "instructions": formatting.expansion_block(reference)})
    withheld = [{"source_id": c.slug, "catalog": c.catalog, "name": c.name, "reason": decisions[c.pk].reason}
                for c in cards if not decisions[c.pk].allowed]
    return {"selected": selected, "withheld": withheld}


@dataclass(frozen=True)
class ReferenceFile:
    path: str
    title: str
    sha256: str
    text: str  # the content, or base64 when `encoding` says so
    encoding: str  # utf-8 | base64

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
    indexed document as indexed, any other file of a glob source from disk while the
    source's files are still those it was indexed from."""
    indexes = [index for index in _indexes(caller) if index.slug == catalog]
    cards, _, _ = _resolve_ids(indexes, [source_id])
    if not cards:
        raise DomainError(f"no reference {source_id!r} in catalog {catalog!r}", code="not_found", status_code=404)
    card = cards[0]
    decision = injection_decisions(agent=caller.agent, sources=[card])[card.pk]
    if not decision.allowed:
        raise DomainError(decision.reason, code="withheld", status_code=403)
    granted = card.mode == ReferenceSource.Mode.AUTO or caller.agent is None or \
        Selection.objects.filter(agent=caller.agent, source_id=card.pk).exists()
    if not granted:
        preselected = _preselected(caller, indexes)
        granted = card in preselected or card.slug in discover(indexes[0], preselected, agent=caller.agent)
    if not granted:
        raise DomainError("select this reference first (selectReferences)", code="not_selected", status_code=403)
    indexed = Document.objects.filter(source_id=card.pk, path=path).values_list("title", "content_sha256", "text")
    if (document := indexed.first()) is not None:
        title, sha256, text = document
        return ReferenceFile(path=path, title=title, sha256=sha256, text=text, encoding="utf-8")
    data = None
    if card.kind == ReferenceSource.Kind.GLOB:
        try:
            data = glob_file_read(pattern=card.location, path=path, fingerprint_indexed=card.fingerprint,
                                  max_bytes=settings.LECTERN_MAX_FILE_BYTES)
        except SourceChanged:
            raise DomainError(f"the files of reference {card.slug!r} changed since it was indexed; it can be read "
                              "again once it is reindexed", code="reference_changed", status_code=409) from None
        except SourceError:  # the glob no longer resolves (its root was removed from the settings)
            data = None
    if data is None:
        raise DomainError(f"no file {path!r} in reference {card.slug!r}", code="not_found", status_code=404)
    return ReferenceFile.of_bytes(path, data)


# --- startup instructions ---------------------------------------------------------------


def _count_tokens(text: str) -> int:
    embedder = get_embedder()
    if embedder is None:
        return len(text) // 4 + 1
    return embedder.count_tokens([text])[0]


def _source_body(card: SourceCard, budget_left: int) -> str | None:
    """The reference's documents as one text, or None when they cannot fit
    (a token covers at most a dozen bytes, so larger sources are not even read)."""
    size = sum(Document.objects.filter(source_id=card.pk).values_list("size", flat=True))
    if size > budget_left * 12:
        return None
    documents = Document.objects.filter(source_id=card.pk).order_by("path").values_list("path", "text")
    return "\n\n".join(f"#### {path}\n\n{text.strip()}" for path, text in documents)


def agent_instructions(*, caller: Caller) -> dict[str, Any]:
    """The startup block: AUTO sources' content within the token budget, preselected
    sources resolved transitively (their content too for `preload` agents), and the
    rag_search hint for `rag` agents. Nothing is ever cut mid-document: a source that
    does not fit whole is listed instead, with how to read it."""
    indexes = _indexes(caller)
    auto = [card for index in indexes for card in index.cards.values() if card.mode == ReferenceSource.Mode.AUTO]
    preselected = _preselected(caller, indexes)
    discovered = []
    for index in indexes:
        roots = [card for card in preselected if card.catalog_id == index.catalog_id]
        taken = {card.slug for card in auto + preselected if card.catalog_id == index.catalog_id}
        reached = discover(index, roots, agent=caller.agent)
        discovered += [node for slug, node in sorted(reached.items()) if slug not in taken]
    entries: list[tuple[SourceCard, str, list[Parent]]] = [(card, "auto", []) for card in auto]
    entries += [(card, "preselected", []) for card in preselected]
    entries += [(node.card, "link", node.parents) for node in discovered]
    decisions = injection_decisions(agent=caller.agent, sources=[card for card, _, _ in entries])

    header = "# Reference material\n\nThese references apply to your work. Cite them by @id."
    rag_hint = None
    if caller.profile.strategy == Agent.Strategy.RAG:
        names = ", ".join(catalog.slug for catalog in caller.catalogs)
        rag_hint = (f"Use the `rag_search` tool with a natural-language query to find passages in the catalogs "
                    f"{names}. It returns up to {caller.profile.default_top_k} results as "
                    "`--- Result N (score: 0.XXX, source: path) ---` followed by the passage.")
    loaded: dict[int, str] = {}  # pk -> section, in entry order
    report: dict[int, dict[str, Any]] = {}
    for card, via, parents in entries:
        item: dict[str, Any] = {"source_id": card.slug, "catalog": card.catalog, "name": card.name, "via": via,
                                "tokens": 0}
        if parents:
            item["parents"] = parents
        decision = decisions[card.pk]
        if not decision.allowed:
            report[card.pk] = {**item, "included": "withheld", "reason": decision.reason}
            continue
        loads = via == "auto" or caller.profile.strategy == Agent.Strategy.PRELOAD
        body = _source_body(card, caller.profile.token_budget) if loads else None
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
        self.listings: dict[int, str] = {}  # each read once (files: a query and a glob)

    def listing(self, pk: int) -> str:
        if pk not in self.listings:
            card = self.cards[pk]
            self.listings[pk] = formatting.expansion_block(reference_text(card, self.ref(card)),
                                                           status=formatting.LISTED)
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
