"""Why a document was or was not among a search's hits, stage by stage; why a reference
was or was not hinted by enrichment, pass by pass.

document_explain() answers:
  1. catalog: the source in the catalog, the document in the source, and its chunks
     (none: not indexed; a source in error says its last error's first line);
  2. governance: the approval gate's decision for the source (approvals.selectors.gate);
     a withheld source ends the answer there, before anything of its documents is read:
     governed content is never described to a caller who may not read it, not even
     whether a path exists in it;
  3. the ranking search runs (retrieval.search.selectors.chunk_ranking, uncut), and the
     document's place in each list: BM25 (its best chunk's score, split by query term
     with lexical.bm25_parts), vector (its best chunk's cosine similarity) and the
     fusion, against top_k and the depth each list was read to.

The ranks are positions in the very lists search fuses and cuts, so a document called
shown at rank r is search's r-th hit with the same options; nothing is re-ranked here.

reference_explain() answers the same for enrichment: why a text did or did not get a
reference hinted, pass by pass, read from the passes enrich runs (its docstring).

Reads only: no approval request is raised, no trace stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import CharField, Value
from django.db.models.functions import Concat

from approvals.selectors.gate import InjectionDecision, withheld_sources
from catalog import analysis
from catalog.models import Agent, Catalog, Chunk, Document, ReferenceSource, Term
from catalog.reads import read_connection
from retrieval.enrichment.caller import Caller, caller_indexes
from retrieval.enrichment.detection import SourceCard
from retrieval.enrichment.pipeline import Candidate, Plan, enrich_plan
from retrieval.enrichment.references import cards_named
from retrieval.models import Trace
from retrieval.search.lexical import bm25_parts
from retrieval.search.rows import Row
from retrieval.search.selectors import FUSED_MODES, Ranking, SearchOptions, chunk_ranking
from retrieval.search.vector import vector_scores_for


@dataclass(frozen=True)
class CatalogStage:
    source_found: bool
    source_status: str | None = None
    last_error: str | None = None  # its first line, where the source is in error
    document_found: bool | None = None  # None: not looked for (no source, or withheld)
    chunks: int | None = None


@dataclass(frozen=True)
class GovernanceStage:
    withheld: bool
    state: str
    reason: str = ""
    request_id: int | None = None


@dataclass(frozen=True)
class TermPart:
    """One analysed query term and what it adds to the document's best BM25 chunk."""

    term: str
    in_catalog: bool  # some chunk of the catalog holds it (else it can match nothing)
    in_chunk: bool
    score: float  # its part of the chunk's score; 0 where the chunk lacks it
    feedback: bool = False  # added by BM25 feedback: not a term of the query


@dataclass(frozen=True)
class ComponentStage:
    """The document's best chunk in one component (bm25 or vector)."""

    ran: bool  # the mode ranked this list
    chunk_id: str | None  # the best chunk's key
    score: float | None  # BM25 score or cosine similarity; None: no embedding
    rank: int | None  # its place in the list; None: not in it (beyond `depth`)
    depth: int
    terms: list[TermPart] = field(default_factory=list)  # bm25 only


@dataclass(frozen=True)
class FusionStage:
    mode: str
    fusion: str | None  # rrf or convex for hybrid; None where nothing is fused
    rank: int | None  # None: in no list fused
    score: float | None
    top_k: int
    depth: int
    dedup: bool
    candidates: int  # keys ranked before the cut


@dataclass
class Explanation:
    outcome: str  # shown | below_top_k | not_retrieved | withheld | no_source | no_document | not_indexed
    verdict: str
    catalog: CatalogStage
    mode: str = ""
    degraded: str | None = None
    rank: int | None = None
    governance: GovernanceStage | None = None
    bm25: ComponentStage | None = None
    vector: ComponentStage | None = None
    fusion: FusionStage | None = None


def document_explain(*, catalog: Catalog, query: str, source: str, path: str, options: SearchOptions,
                     agent: Agent | None) -> Explanation:
    """Where the document `path` of source `source` stood in chunk_search's ranking of
    `query` for `agent` (None: a person), stage by stage (the module docstring)."""
    found = ReferenceSource.objects.filter(catalog=catalog, slug=source).first()
    if found is None:
        return Explanation("no_source", f"no such source {source!r} in catalog {catalog.slug!r}",
                           CatalogStage(source_found=False))
    decision = withheld_sources(agent=agent, catalog_ids=[catalog.pk]).get(found.pk)
    governance = GovernanceStage(withheld=decision is not None, state=decision.state if decision else "allowed",
                                 reason=decision.reason if decision else "",
                                 request_id=decision.request_id if decision else None)
    if decision is not None:
        return Explanation("withheld", f"withheld: {decision.reason}", CatalogStage(True, found.status),
                           governance=governance)
    error = found.last_error.strip().splitlines()[0] if found.last_error.strip() else None
    document = Document.objects.filter(source=found, path=path).first()
    if document is None:
        return Explanation("no_document", f"no such document {path!r} in source {source!r}",
                           CatalogStage(True, found.status, error, False), governance=governance)
    chunks = dict(Chunk.objects.filter(catalog=catalog, document=document).values_list("id", "key"))
    stage = CatalogStage(True, found.status, error, True, len(chunks))
    if not chunks:
        return Explanation("not_indexed", f"not indexed: source {source!r} has status {found.status}"
                           + (f" ({error})" if error else ""), stage, governance=governance)
    ranking = chunk_ranking(catalog=catalog, query=query, options=options, agent=agent)
    return _placed(catalog, ranking, query, document.pk, chunks, stage, governance)


def _placed(catalog: Catalog, ranking: Ranking, query: str, document: int, chunks: dict[int, str],
            stage: CatalogStage, governance: GovernanceStage) -> Explanation:
    """The document's place in each list of `ranking` and in their fusion."""
    run = ranking.options
    lexical = _bm25_stage(catalog, ranking, query, document, chunks)
    similarities = vector_scores_for(catalog=catalog, vector=ranking.vector,
                                     chunk_pks=list(chunks)) if ranking.vector else {}
    vector = _component(ranking, "vector", document, chunks, similarities)
    fused = _fusion_stage(ranking, document)
    explanation = Explanation("", "", stage, run.mode, ranking.degraded, fused.rank, governance, lexical, vector,
                              fused)
    explanation.outcome, explanation.verdict = _verdict(ranking, explanation)
    return explanation


def _position(rows: list[Row], document: int) -> tuple[int, Row] | None:
    """The document's first row in a ranked list and its 1-based place: its best chunk
    there (with dedup, its only one)."""
    return next(((i, row) for i, row in enumerate(rows, start=1) if row.document == document), None)


def _component(ranking: Ranking, name: str, document: int, chunks: dict[int, str],
               scores: dict[int, float]) -> ComponentStage:
    """The document in list `name`: its row there if it has one, else its best-scoring
    chunk (ties to the lowest id, as the lists order them)."""
    placed = _position(ranking.lists.get(name, []), document)
    if placed is not None:
        rank, row = placed
        return ComponentStage(True, chunks[row.chunk], row.score, rank, ranking.depth)
    best = min(scores, key=lambda chunk: (-scores[chunk], chunk)) if scores else None
    return ComponentStage(name in ranking.lists, chunks[best] if best is not None else None,
                          scores[best] if best is not None else None, None, ranking.depth)


def _bm25_stage(catalog: Catalog, ranking: Ranking, query: str, document: int,
                chunks: dict[int, str]) -> ComponentStage:
    """The BM25 component, with the query's analysed terms each marked as in the best
    chunk or not, and the part of its score each adds (lexical.bm25_parts)."""
    parts = bm25_parts(catalog, ranking.terms, list(chunks))
    scores = {chunk: sum(parts.get(chunk, {}).values()) for chunk in chunks}
    component = _component(ranking, "bm25", document, chunks, scores)
    best = next(chunk for chunk, key in chunks.items() if key == component.chunk_id)
    texts = dict(Term.objects.filter(catalog=catalog, id__in=_shown_terms(catalog, ranking))
                 .values_list("text", "id"))
    held = parts.get(best, {})
    own = dict.fromkeys(analysis.analyze(query))
    terms = [TermPart(text, text in texts, texts.get(text) in held, held.get(texts.get(text, -1), 0.0))
             for text in own]
    # feedback's terms came from hits the caller may be shown
    added = {term.term_id for term in ranking.terms if not term.repeats}
    terms += [TermPart(text, True, term in held, held.get(term, 0.0), feedback=True)
              for term, text in Term.objects.filter(catalog=catalog, id__in=added).order_by("text")
              .values_list("id", "text") if text not in own]
    return ComponentStage(component.ran, component.chunk_id, component.score, component.rank, component.depth, terms)


def _shown_terms(catalog: Catalog, ranking: Ranking) -> list[int]:
    """The query's term ids that some chunk the caller may be shown holds: a term only
    withheld content holds is told as absent from the catalog, as if that content were
    not there (whether it is would tell a withheld text word by word)."""
    ids = [t.term_id for t in ranking.terms]
    if not ranking.withheld or not ids:
        return ids
    with read_connection().cursor() as cursor:
        cursor.execute(
            "SELECT t.id FROM unnest(%(ids)s::int[]) AS t(id) WHERE EXISTS ("
            " SELECT FROM catalog_postings f JOIN catalog_chunk c ON c.catalog_id = f.catalog_id AND c.id = f.chunk_id"
            " WHERE f.catalog_id = %(catalog)s AND f.terms @> ARRAY[t.id] AND c.source_id <> ALL(%(withheld)s))",
            {"ids": ids, "catalog": catalog.pk, "withheld": sorted(ranking.withheld)})
        return [term for (term,) in cursor.fetchall()]


def _fusion_stage(ranking: Ranking, document: int) -> FusionStage:
    """The document's first key in the fused ranking (a chunk of it, or with dedup the
    document itself) and its place there."""
    run = ranking.options
    if run.dedup:
        documents = {key: key for key, _ in ranking.fused}
    else:
        documents = {row.chunk: row.document for rows in ranking.lists.values() for row in rows}
    placed = next(((i, score) for i, (key, score) in enumerate(ranking.fused, start=1)
                   if documents.get(key) == document), None)
    return FusionStage(run.mode, run.fusion if run.mode == "hybrid" else None,
                       placed[0] if placed else None, placed[1] if placed else None,
                       run.top_k, ranking.depth, run.dedup, len(ranking.fused))


def _depth_text(ranking: Ranking) -> str:
    if ranking.options.mode in FUSED_MODES:
        return f"the fusion depth {ranking.depth}"
    return f"the depth read for top_k {ranking.options.top_k}, {ranking.depth}"


def _verdict(ranking: Ranking, explanation: Explanation) -> tuple[str, str]:
    """The outcome and its one line: shown, ranked below top_k, or why no list held it."""
    top_k, rank = ranking.options.top_k, explanation.rank
    if rank is not None and rank <= top_k:
        return "shown", f"shown at rank {rank}"
    if rank is not None:
        return "below_top_k", f"ranked {rank}: below top_k {top_k}"
    reasons = []
    lexical, vector = explanation.bm25, explanation.vector
    if lexical is not None and lexical.ran:
        if not any(term.in_chunk for term in lexical.terms):
            reasons.append("no query term in it")
        elif lexical.score is not None and lexical.score <= 0:
            reasons.append("its BM25 score is 0 (its terms are in too many chunks to count)")
        else:
            reasons.append(f"BM25 ranks it beyond {_depth_text(ranking)}")
    if vector is not None and vector.ran and ranking.options.mode != "bm25_tiebreak":
        if vector.score is None:
            reasons.append("it has no embedding")
        else:
            reasons.append(f"vector search ranks it beyond {_depth_text(ranking)}")
    return "not_retrieved", " and ".join(reasons) or "not retrieved"


def documents_matching(*, catalog: Catalog, text: str, limit: int = 20) -> list[tuple[str, str]]:
    """The catalog's documents whose `source/path` holds `text` (any case), as the
    playground offers them to explain: (source/path, title), by source and path."""
    named = Concat("source__slug", Value("/"), "path", output_field=CharField())
    rows = (Document.objects.filter(catalog=catalog).annotate(named=named).filter(named__icontains=text.strip())
            .order_by("source__slug", "path").values_list("named", "title")[:limit])
    return list(rows)


# --- enrichment: why a reference was or was not hinted --------------------------------------


@dataclass(frozen=True)
class PassStage:
    """One detection pass and the reference: whether it found it, what it matched, and
    where it fell short. The threshold fields are the semantic pass's."""

    name: str  # mention | path | tag | semantic | link
    ran: bool
    matched: bool
    found: list[str]  # what it matched there: `@id`, tags, the path read, the references linking to it
    note: str  # why it did not find it, or what decided it
    score: float | None = None  # cosine similarity of the text to the reference's profile
    threshold: float | None = None  # max(floor, best - margin): what it had to reach
    floor: float | None = None  # the profile's semantic_threshold
    margin: float | None = None  # the profile's semantic_margin
    best: float | None = None  # the best match the threshold was measured from


@dataclass
class EnrichmentExplanation:
    # expanded | pinned | hinted | cut | not_hinted | already_selected | not_selectable | withheld |
    # ambiguous | no_reference
    outcome: str
    verdict: str
    reference: str
    catalog: str | None = None
    source_id: str | None = None
    governance: GovernanceStage | None = None
    passes: list[PassStage] = field(default_factory=list)
    max_hints: int | None = None
    degraded: str | None = None


ACTIONS = {"expand": "expanded", "pin": "pinned", "hint": "hinted", "cut": "cut"}


def reference_explain(*, caller: Caller, text: str, surface: str, reference: str) -> EnrichmentExplanation:
    """Why enrichment of `text` did or did not hint `reference` for `caller`, pass by pass,
    read from the passes enrich itself runs (pipeline.enrich_plan, reads only):
      1. the reference among the caller's catalogs (none, or several: an answer);
      2. the passes, and the gate: a withheld reference is told only what enrichment
         tells the caller of it (its hint, if the text surfaced it), never a score the
         hint does not show nor why a pass missed it;
      3. each pass's reading: matched and what, or why not; the semantic pass's
         similarity against its threshold, floor and margin; the cut at max_hints."""
    cards = cards_named(caller_indexes(caller), reference)
    if len(cards) != 1:
        outcome = "ambiguous" if cards else "no_reference"
        verdict = (f"{reference} names a reference in several catalogs: write catalog/id" if cards
                   else f"no reference {reference!r} in your catalogs")
        return EnrichmentExplanation(outcome, verdict, reference)
    card = cards[0]
    plan = enrich_plan(caller=caller, text=text, surface=surface, watch=card)
    key, run = (card.catalog_id, card.slug), plan.run
    candidate = run.candidates.get(key)
    decision = candidate.decision if candidate is not None and candidate.decision is not None else \
        withheld_sources(agent=caller.agent, catalog_ids=[card.catalog_id]).get(card.pk)
    explanation = EnrichmentExplanation("", "", reference, card.catalog, card.slug,
                                        _governance(decision), max_hints=caller.profile.max_hints,
                                        degraded=run.degraded)
    if decision is not None and not decision.allowed:
        surfaced = candidate if candidate is not None and candidate.action != "cut" else None
        explanation.passes = _hinted_passes(surfaced) if surfaced is not None else []
        explanation.outcome = "withheld"
        explanation.verdict = f"withheld: {decision.reason}" + ("" if surfaced else "; this text did not surface it")
        return explanation
    explanation.passes = _passes(plan, card, candidate, key in run.excluded)
    explanation.outcome, explanation.verdict = _hint_verdict(plan, card, candidate, key in run.excluded)
    return explanation


def _governance(decision: InjectionDecision | None) -> GovernanceStage:
    if decision is None or decision.allowed:
        return GovernanceStage(False, decision.state if decision else "allowed")
    return GovernanceStage(True, decision.state, decision.reason, decision.request_id)


def _hinted_passes(candidate: Candidate) -> list[PassStage]:
    """The passes a surfaced hint names, with what it shows of each (as_dict)."""
    hint = candidate.as_dict()
    return [PassStage(reason["via"], True, True, reason["matched"], "",
                      score=hint["score"] if reason["via"] == "semantic" else None) for reason in hint["reasons"]]


def _passes(plan: Plan, card: SourceCard, candidate: Candidate | None, excluded: bool) -> list[PassStage]:
    reasons = candidate.reasons if candidate is not None else {}
    tool_result = plan.surface == Trace.Surface.TOOL_RESULT
    skipped = "skipped: the caller has it already" if excluded else \
        "skipped: only selectable references are hinted" if card.mode != ReferenceSource.Mode.SELECTABLE else ""
    tags = ", ".join(card.tags)
    found = {via: list(reasons[via]) for via in reasons}
    return [
        PassStage("mention", True, "mention" in reasons, found.get("mention", []),
                  "" if "mention" in reasons else f"not mentioned (@{plan.run.caller.ref(card)} expands it)"),
        PassStage("path", tool_result, "path" in reasons, found.get("path", []),
                  "" if "path" in reasons else "no path the tool read lies in it" if tool_result
                  else "runs on tool results only"),
        PassStage("tag", True, "tag" in reasons, found.get("tag", []),
                  "" if "tag" in reasons else skipped or (f"none of its tags is in the text ({tags})" if tags
                                                          else "it has no tags")),
        _semantic(plan, card, reasons, skipped),
        PassStage("link", True, "link" in reasons, found.get("link", []),
                  "" if "link" in reasons else skipped or "no expanded or pinned reference links to it"),
    ]


def _semantic(plan: Plan, card: SourceCard, reasons: dict[str, list[str]], skipped: str) -> PassStage:
    """The semantic pass's reading of the reference: its similarity against the
    threshold the pass computed, max(semantic_threshold, best - semantic_margin)."""
    step = next(step for step in plan.run.steps if step["pass"] == "semantic")
    if "skipped" in step:
        return PassStage("semantic", False, False, [], f"skipped: {step['skipped']}")
    run, matched = plan.run, "semantic" in reasons
    # the reference's catalog's own floor and margin where its ranking settings set them
    own = step.get("by_catalog", {}).get(card.catalog, step)
    threshold, floor, margin = own["threshold"], own["floor"], own["margin"]
    bounds = {"threshold": threshold, "floor": floor, "margin": margin, "best": run.best}
    score = run.watched
    if score is None:
        return PassStage("semantic", True, False, [], "it has no embedded profile", **bounds)
    if matched:
        note = f"similarity {score:.4f} reaches the threshold {threshold:.4f}"
    elif skipped and score >= threshold:
        note = f"similarity {score:.4f} reaches the threshold {threshold:.4f}, but it was {skipped}"
    elif run.best is not None and run.best - margin > floor:
        note = (f"similarity {score:.4f} is below the threshold {threshold:.4f}: more than the margin {margin:.2f} "
                f"below the best match, {run.best:.4f}")
    else:
        note = f"similarity {score:.4f} is below the threshold {threshold:.4f}: the floor (semantic_threshold)"
    return PassStage("semantic", True, matched, [], note, score=score, **bounds)


def _hint_verdict(plan: Plan, card: SourceCard, candidate: Candidate | None, excluded: bool) -> tuple[str, str]:
    if candidate is not None:
        action = ACTIONS.get(candidate.action, "not_hinted")
        if action == "cut":
            return "cut", f"found by the {candidate.via} pass, but {candidate.note}"
        return action, f"{action} (the {candidate.via} pass)"
    if excluded:
        return "already_selected", "not hinted: the caller has it already (selected or preselected)"
    if card.mode != ReferenceSource.Mode.SELECTABLE:
        return "not_selectable", f"not hinted: its mode is {card.mode}; only selectable references are hinted"
    return "not_hinted", "not hinted: no pass found it"
