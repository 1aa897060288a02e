"""Search over a catalog's chunks: exact BM25 in Postgres, pgvector HNSW, and fusion.

chunk_search() runs:
  1. lexical (retrieval.search.lexical): analyse the whole query, weight its distinct
     terms by idf and repeats (retrieval.search.bm25), then read the terms' packed
     postings (catalog_termblock, a few rows per term) and score them in numpy
     (retrieval.search.bm25); the scores of given chunks (fusion's other side)
     come from their forward rows (catalog_postings)
  2. vector (retrieval.search.vector): embed the query as the model reads it (a long
     passage's head: the result says how much), HNSW k-NN with ef_search >= the depth
     asked for (at most pgvector's 1000; the iterative scan returns more rows when
     more are asked for)
  3. fuse (RRF or convex), tie-break, or pass through; optional per-document dedup
     (fusion and tie-break take only BM25 hits with a positive score)
  4. hydrate the top_k with content and the component scores each hit lacks
  5. name every source withheld from the caller; count the chunks that match the query
     only of those whose policies disclose matches (withheld_named)

Sources the approval gate withholds from the caller (approvals.selectors.gate.withheld_sources)
are left out inside the SQL of steps 1 and 2, before any ranking or limit: the top_k is
filled from what may be shown, and no withheld content is ever read into a result.
Nor does what is said of them depend on their content: by default a withheld source is
named with its state and request whatever the query, and search raises no request for
it (a count per query would let an agent probe the text word by word). Only a
source every covering policy opens with `disclose_matches` is counted, and marked
`request_due` when its chunks match and the agent has no request to follow.

Nothing here writes: the agent's read paths raise the due requests afterwards, from the
gate's decisions the result carries (requests_due, then approvals'
withheld_requests_raise, then with_requests), and the curators' playground shows the
same result without raising any.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from approvals.selectors.gate import InjectionDecision, withheld_sources
from catalog.models import Agent, Catalog, ReferenceSource
from catalog.ranking import RankingSettings
from catalog.reads import read_connection
from catalog.sources.locators import cite
from retrieval.search import bm25, fusion, lexical
from retrieval.search.lexical import bm25_score_sql, bm25_terms, bm25_top, feedback_terms
from retrieval.search.rows import Params, Row
from retrieval.search.vector import (
    SearchUnavailable,
    embed_query,
    feedback_vector,
    vector_scores_for,
    vector_search,
)

# How many hits each component contributes to fusion (at least top_k) by default:
# hybrid and bm25_tiebreak rank each list this deep before fusing them (a catalog's
# ranking settings may say otherwise).
FUSION_DEPTH = RankingSettings.fusion_depth
# The modes that fuse two lists, each read FUSION_DEPTH deep.
FUSED_MODES = ("hybrid", "bm25_tiebreak")


@dataclass
class Hit:
    chunk_pk: int
    document_pk: int
    score: float
    scores: dict[str, float | None] = field(default_factory=dict)
    ranks: dict[str, int | None] = field(default_factory=dict)
    key: str = ""
    document_id: str = ""
    title: str = ""
    source: str = ""
    content: str = ""
    byte_offset: int = 0
    locator: dict[str, Any] = field(default_factory=dict)  # where it sits (catalog.sources.locators)
    source_pk: int = 0

    @property
    def citation(self) -> str:
        return cite(self.locator, self.document_id)


@dataclass(frozen=True)
class WithheldHits:
    """One withheld source: why, and how many of its chunks match the query where its
    policies disclose that (else None), never what they say."""

    source: str
    count: int | None
    state: str
    reason: str
    request_id: int | None = None  # the approval request to follow
    source_pk: int = 0
    request_due: bool = False  # it matched, and the agent has no request to follow: one is due


@dataclass
class SearchResult:
    hits: list[Hit]
    mode: str
    took_ms: float
    degraded: str | None = None
    bm25_passes: int = 0
    withheld: list[WithheldHits] = field(default_factory=list)
    # How many leading characters of the query the embedding model read (None: no
    # vector was computed); fewer than the query's when it is longer than the model reads.
    vector_query_chars: int | None = None
    query_truncated: bool = False
    # The gate's decision for each withheld source, as read once at the start: what
    # raising the due requests needs (requests_due).
    gate: dict[int, InjectionDecision] = field(default_factory=dict)


# --- fusion -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SearchOptions:
    """What a search asks for; each setting left None is the catalog's (settled())."""

    mode: str | None = None
    top_k: int = 10
    fusion: str | None = None
    normalization: str | None = None
    weights: dict[str, float] | None = None  # per component (convex: divided by their sum); one named alone
    # keeps the catalog's weight for the other
    dedup: bool = False
    rrf_k: int | None = None
    k1: float | None = None
    b: float | None = None
    fusion_depth: int | None = None
    vector_feedback: int | None = None
    feedback_weight: float | None = None
    bm25_feedback: int | None = None
    bm25_feedback_terms: int | None = None
    bm25_feedback_weight: float | None = None

    def settled(self, ranking: RankingSettings) -> SettledOptions:
        """Every setting this search left open taken from `ranking`."""
        return SettledOptions(
            mode=self.mode or ranking.mode, top_k=self.top_k, fusion=self.fusion or ranking.fusion,
            normalization=self.normalization or ranking.normalization,
            weights={**ranking.weights, **(self.weights or {})}, dedup=self.dedup,
            rrf_k=self.rrf_k or ranking.rrf_k, k1=ranking.k1 if self.k1 is None else self.k1,
            b=ranking.b if self.b is None else self.b, fusion_depth=self.fusion_depth or ranking.fusion_depth,
            vector_feedback=ranking.vector_feedback if self.vector_feedback is None else self.vector_feedback,
            feedback_weight=ranking.feedback_weight if self.feedback_weight is None else self.feedback_weight,
            bm25_feedback=ranking.bm25_feedback if self.bm25_feedback is None else self.bm25_feedback,
            bm25_feedback_terms=self.bm25_feedback_terms or ranking.bm25_feedback_terms,
            bm25_feedback_weight=ranking.bm25_feedback_weight if self.bm25_feedback_weight is None
            else self.bm25_feedback_weight)

    @classmethod
    def of(cls, ranking: RankingSettings, **given: Any) -> SearchOptions:
        """Options that run `ranking` whole (the tuning runs try settings unsaved)."""
        return cls(mode=ranking.mode, fusion=ranking.fusion, normalization=ranking.normalization,
                   weights=ranking.weights, rrf_k=ranking.rrf_k, k1=ranking.k1, b=ranking.b,
                   fusion_depth=ranking.fusion_depth, vector_feedback=ranking.vector_feedback,
                   feedback_weight=ranking.feedback_weight, bm25_feedback=ranking.bm25_feedback,
                   bm25_feedback_terms=ranking.bm25_feedback_terms,
                   bm25_feedback_weight=ranking.bm25_feedback_weight, **given)


@dataclass(frozen=True)
class SettledOptions:
    """A search's options with nothing left open: what it ran."""

    mode: str
    top_k: int
    fusion: str
    normalization: str
    weights: dict[str, float]
    dedup: bool
    rrf_k: int
    k1: float
    b: float
    fusion_depth: int
    vector_feedback: int
    feedback_weight: float
    bm25_feedback: int = 0
    bm25_feedback_terms: int = 10
    bm25_feedback_weight: float = 0.5


def _ranked(rows: list[Row], dedup: bool) -> list[Row]:
    """Rows in score order; with dedup, only each document's best chunk."""
    if not dedup:
        return rows
    seen, kept = set(), []
    for row in rows:
        if row.document not in seen:
            seen.add(row.document)
            kept.append(row)
    return kept


def _key(row: Row, dedup: bool) -> int:
    """What fusion ranks: chunks, or documents when deduplicating."""
    return row.document if dedup else row.chunk


@dataclass
class Ranking:
    """Everything chunk_search ranks before it cuts to top_k: the component lists and
    their fusion. Explain (retrieval.explain.selectors) reads a document's place in
    it, so what it says is what search did."""

    options: SettledOptions  # as run: mode bm25 when degraded
    degraded: str | None
    depth: int  # how deep each component list was read
    terms: list[bm25.QueryTerm]  # what BM25 ranked by: the query's terms, with feedback's added
    vector: str | None
    vector_chars: int | None
    lists: dict[str, list[Row]]
    fused: list[tuple[int, float]]  # every key fused, best first: the hits are its first top_k
    passes: int
    withheld: dict[int, InjectionDecision]
    query_terms: list[bm25.QueryTerm]  # the query's own: what a withheld source is matched by


def ranking_depth(run: SettledOptions) -> int:
    """How many chunks each component list is read: fusion needs each list beyond top_k
    (the fusion depth), a single component does not; with dedup three times as many
    (chunks per distinct document, roughly)."""
    depth = max(run.top_k, run.fusion_depth) if run.mode in FUSED_MODES else run.top_k
    return depth * 3 if run.dedup else depth


def component_lists(read: dict[str, list[Row]], run: SettledOptions) -> dict[str, list[Row]]:
    """The lists fusion takes, from each component's rows as read (best first, at least
    ranking_depth(run) of them: a longer list is cut there): a zero BM25 score (idf 0,
    a term in half the chunks) is no evidence where two lists fuse; with dedup only
    each document's best chunk. The tuning runs read each list once, as deep as their
    deepest setting, and shape it here for each setting they try."""
    depth, lists = ranking_depth(run), {}
    for name, rows in read.items():
        rows = rows[:depth]
        if name == "bm25" and run.mode in FUSED_MODES:
            rows = [row for row in rows if row.score > 0]
        lists[name] = _ranked(rows, run.dedup)
    return lists


def convex_weights(run: SettledOptions) -> dict[str, float]:
    """Convex fusion's weights: the settings' divided by their sum."""
    total = sum(run.weights.values())
    return {name: weight / total for name, weight in run.weights.items()}


def keyed_rankings(lists: dict[str, list[Row]], dedup: bool) -> dict[str, list[tuple[int, float]]]:
    """Each list as fusion ranks it: (key, score), the key a chunk or with dedup a document."""
    return {name: [(_key(row, dedup), row.score) for row in rows] for name, rows in lists.items()}


def fused_ranking(lists: dict[str, list[Row]], run: SettledOptions) -> list[tuple[int, float]]:
    """Every key of `lists` fused as `run` says, best first."""
    rankings = keyed_rankings(lists, run.dedup)
    if run.mode == "hybrid" and run.fusion == "convex":
        return fusion.convex(rankings, weights=convex_weights(run), normalise=run.normalization)
    if run.mode == "hybrid":
        return fusion.rrf(rankings, k=run.rrf_k, weights=run.weights)
    if run.mode == "bm25_tiebreak":
        vector = dict(rankings.get("vector", []))
        return fusion.tiebreak(rankings["bm25"], vector)
    return rankings[run.mode]


def chunk_ranking(*, catalog: Catalog, query: str, options: SearchOptions,
                  agent: Agent | None = None, embedded: tuple[str, int] | None = None) -> Ranking:
    """Steps 1 to 3 of chunk_search (the module docstring): the withheld sources, the
    component lists and their fusion, uncut; what `options` leaves open, the catalog's
    ranking settings decide."""
    withheld = withheld_sources(agent=agent, catalog_ids=[catalog.pk])
    run = options.settled(catalog.ranking_settings)
    mode, degraded = run.mode, None
    vector, vector_chars = embedded if embedded is not None else (None, None)
    if mode != "bm25" and vector is None:
        try:
            vector, vector_chars = embed_query(query)
        except SearchUnavailable as exc:
            if mode == "vector":
                raise
            mode, degraded = "bm25", f"lexical-only: {exc}"
            run = replace(run, mode="bm25")
    depth = ranking_depth(run)
    read: dict[str, list[Row]] = {}
    passes = 0
    # once: a pasted passage takes milliseconds to analyse
    terms = query_terms = bm25_terms(catalog, query, k1=run.k1, b=run.b)
    if mode in ("bm25", "hybrid", "bm25_tiebreak"):
        # the query expanded from its best allowed hits, searched again
        if run.bm25_feedback and run.bm25_feedback_weight and terms:
            first, passes = bm25_top(catalog, terms, run.bm25_feedback, withheld)
            terms = feedback_terms(catalog, terms, first, kept=run.bm25_feedback_terms,
                                   weight=run.bm25_feedback_weight)
        read["bm25"], more = bm25_top(catalog, terms, depth, withheld)
        passes += more
    # vector is None only where an unavailable model turned the mode to bm25
    if mode in ("vector", "hybrid") and vector is not None:
        read["vector"] = vector_search(catalog=catalog, vector=vector, limit=max(depth, run.vector_feedback),
                                       withheld=withheld)
        if run.vector_feedback:  # moved toward its best hits, searched again: what it ranks by
            vector = feedback_vector(catalog=catalog, vector=vector, rows=read["vector"][: run.vector_feedback],
                                     weight=run.feedback_weight)
            read["vector"] = vector_search(catalog=catalog, vector=vector, limit=depth, withheld=withheld)
    lists = component_lists(read, run)
    if mode == "bm25_tiebreak" and vector is not None:
        pks = [row.chunk for row in lists["bm25"]]
        sims = vector_scores_for(catalog=catalog, vector=vector, chunk_pks=pks)
        lists["vector"] = sorted((Row(row.chunk, row.document, sims[row.chunk]) for row in lists["bm25"]
                                  if row.chunk in sims), key=lambda row: -row.score)
    return Ranking(run, degraded, depth, terms, vector, vector_chars, lists, fused_ranking(lists, run), passes,
                   withheld, query_terms)


def chunk_search(*, catalog: Catalog, query: str, options: SearchOptions,
                 agent: Agent | None = None, embedded: tuple[str, int] | None = None) -> SearchResult:
    """Search `catalog` for `agent` (None: a signed-in person, or a curator's command);
    see the module docstring for the steps. Reads only: each withheld source that
    matched says whether a request is due (`request_due`). `embedded`: the query's
    vector and the characters it read, when the caller made it already."""
    started = time.perf_counter()
    ranking = chunk_ranking(catalog=catalog, query=query, options=options, agent=agent, embedded=embedded)
    run, vector, withheld = ranking.options, ranking.vector, ranking.withheld
    hits = _hydrate(catalog, ranking.terms, vector, ranking.fused[: run.top_k], ranking.lists, run.dedup)
    report: list[WithheldHits] = []
    if withheld:
        similar = _similarity_floor(hits, run.top_k) if run.mode in ("vector", "hybrid") and vector else None
        matched = withheld_hits(catalog, disclosed(withheld), ranking.query_terms if "bm25" in ranking.lists else [],
                                vectors=[vector] if vector else [], similar=similar)
        report = withheld_named(withheld, matched)
    took = (time.perf_counter() - started) * 1000
    vector_chars = ranking.vector_chars
    return SearchResult(hits, run.mode, took, ranking.degraded, ranking.passes, report,
                        vector_chars, vector_chars is not None and vector_chars < len(query), withheld)


def requests_due(withheld: list[WithheldHits], gate: dict[int, InjectionDecision]) -> dict[int, InjectionDecision]:
    """The gate's decisions of the withheld sources a request is due for (they matched,
    and the agent has none to follow): what the agent's read path hands to
    approvals.services.requests.withheld_requests_raise."""
    return {entry.source_pk: gate[entry.source_pk] for entry in withheld if entry.request_due}


def with_requests(withheld: list[WithheldHits], raised: dict[int, InjectionDecision]) -> list[WithheldHits]:
    """`withheld`, each entry a request was raised for naming it (state pending)."""
    return [replace(entry, state=decision.state, reason=decision.reason, request_id=decision.request_id,
                    request_due=decision.request_due) if (decision := raised.get(entry.source_pk)) else entry
            for entry in withheld]


def disclosed(withheld: dict[int, InjectionDecision]) -> dict[int, InjectionDecision]:
    """The withheld sources whose policies let search say whether the query matches them."""
    return {pk: decision for pk, decision in withheld.items() if decision.disclose_matches}


def withheld_named(withheld: dict[int, InjectionDecision], matched: list[WithheldHits]) -> list[WithheldHits]:
    """Every withheld source, whatever the query: those `matched` (disclosed, with their
    counts and requests) first, most matching first; then the other disclosed ones with
    0, and those that disclose nothing with no count and the state the gate gave them
    before this read (it raised nothing for them), by slug. One statement."""
    slugs = dict(ReferenceSource.objects.filter(pk__in=list(withheld)).values_list("pk", "slug"))
    counted = {entry.source_pk for entry in matched}
    rest = sorted((slugs[pk], pk) for pk in withheld if pk not in counted and pk in slugs)
    return matched + [WithheldHits(slug, 0 if withheld[pk].disclose_matches else None, withheld[pk].state,
                                   withheld[pk].reason, withheld[pk].request_id, pk)
                      for slug, pk in rest]


def _similarity_floor(hits: list[Hit], top_k: int) -> float | None:
    """How similar to the query a withheld chunk must be to count as matching: as
    similar as the least similar hit shown, or any similarity when fewer than top_k
    hits were found (it would have been shown); None when no hit has a similarity."""
    if len(hits) < top_k:
        return float("-inf")
    similarities = [score for hit in hits if (score := hit.scores.get("vector")) is not None]
    return min(similarities) if similarities else None


def withheld_hits(catalog: Catalog, withheld: dict[int, InjectionDecision], terms: list[bm25.QueryTerm], *,
                  similar: float | None, vectors: Sequence[str] = ()) -> list[WithheldHits]:
    """Per withheld source, its chunks that match the query: holding one of the query's
    `terms` (the chunks BM25 ranks; none when BM25 did not run); at least `similar` by
    cosine to one of the query `vectors` (a conversation has several) when given. One
    statement over those sources' chunks only, whatever the catalog's size."""
    params: Params = {"catalog": catalog.pk, "withheld": sorted(withheld)}
    matches = []
    if terms:
        params["terms"] = [term.term_id for term in terms]
        matches.append("EXISTS (SELECT FROM catalog_postings p WHERE p.catalog_id = %(catalog)s "
                       "AND p.chunk_id = c.id AND p.terms && %(terms)s::int[])")
    if similar == float("-inf"):
        matches.append("c.embedding IS NOT NULL")
    elif similar is not None and vectors:
        params["vectors"], params["floor"] = list(vectors), similar
        matches.append("(c.embedding IS NOT NULL AND EXISTS (SELECT FROM unnest(%(vectors)s::text[]) q(v) "
                       "WHERE 1 - (c.embedding <=> q.v::vector) >= %(floor)s))")
    if not matches or not withheld:
        return []
    with read_connection().cursor() as cursor:
        cursor.execute(f"""
            SELECT s.id, s.slug, count(*) FROM catalog_chunk c JOIN catalog_referencesource s ON s.id = c.source_id
            WHERE c.catalog_id = %(catalog)s AND c.source_id = ANY(%(withheld)s) AND ({" OR ".join(matches)})
            GROUP BY s.id, s.slug ORDER BY count(*) DESC, s.slug
        """, params)
        rows = cursor.fetchall()
    return [WithheldHits(source=slug, count=count, state=withheld[pk].state, reason=withheld[pk].reason,
                         request_id=withheld[pk].request_id, source_pk=pk, request_due=withheld[pk].request_due)
            for pk, slug, count in rows]


def _hydrate(catalog: Catalog, terms: list[bm25.QueryTerm], vector: str | None, fused: list[tuple[int, float]],
             lists: dict[str, list[Row]], dedup: bool) -> list[Hit]:
    """Hits for the fused keys, with both component scores and ranks.

    A key is a chunk, or with dedup a document shown by its best chunk (the lexical
    one when both lists hold the document); its ranks and scores are the document's.
    """
    scores = {name: {_key(row, dedup): row.score for row in rows} for name, rows in lists.items()}
    ranks = {name: {_key(row, dedup): i for i, row in enumerate(rows, start=1)} for name, rows in lists.items()}
    shown: dict[int, int] = {}
    for name in ("vector", "bm25"):  # bm25 last: it wins when both hold the key
        shown.update({_key(row, dedup): row.chunk for row in lists.get(name, [])})
    keys = [key for key, _ in fused]
    missing = {name: [shown[k] for k in keys if k not in scores.get(name, {})] for name in ("bm25", "vector")}
    # the hits' rows and the BM25 scores they lack: one statement
    rows, lexical_scores = chunk_rows_scored(catalog, [shown[k] for k in keys], terms, missing["bm25"])
    extra = {"bm25": lexical_scores,
             "vector": vector_scores_for(catalog=catalog, vector=vector, chunk_pks=missing["vector"]) if vector else {}}
    hits = []
    for key, fused_score in fused:
        row = rows[shown[key]]
        component = {name: scores.get(name, {}).get(key, extra[name].get(row.chunk)) for name in ("bm25", "vector")}
        hits.append(Hit(
            chunk_pk=row.chunk, document_pk=row.document, score=fused_score,
            scores={"bm25": component["bm25"] or 0.0, "vector": component["vector"], "fused": fused_score},
            ranks={"bm25": ranks.get("bm25", {}).get(key), "vector": ranks.get("vector", {}).get(key)},
            key=row.key, document_id=row.path, title=row.title, source=row.source, content=row.content,
            byte_offset=row.byte_offset, locator=row.locator, source_pk=row.source_pk,
        ))
    return hits


class ChunkRow(NamedTuple):
    """What a hit shows of a chunk: where it sits too (its locator, for a citation)."""

    chunk: int
    document: int
    key: str
    path: str  # its document's
    title: str
    source: str  # its source's slug
    content: str
    byte_offset: int
    locator: dict[str, Any]
    source_pk: int = 0  # its source's, which the gate and citations ask about


def chunk_rows(catalog: Catalog, chunk_pks: list[int]) -> dict[int, ChunkRow]:
    """What a hit shows of each of the catalog's chunks (its key, document, source and
    content), by pk: one statement."""
    return chunk_rows_scored(catalog, chunk_pks, [], [])[0]


def chunk_rows_scored(catalog: Catalog, chunk_pks: list[int], terms: list[bm25.QueryTerm],
                      scored: list[int]) -> tuple[dict[int, ChunkRow], dict[int, float]]:
    """chunk_rows, and the BM25 score over `terms` of those of the chunks in `scored`
    (bm25_scores' scores), in the same statement: hydration's two reads in one round
    trip."""
    params: Params = {"catalog": catalog.pk, "chunks": chunk_pks}
    score = "NULL::float8"
    if terms and scored:
        params["scored"] = scored
        score = (f"CASE WHEN c.id = ANY(%(scored)s::bigint[]) "
                 f"THEN coalesce({bm25_score_sql(catalog, terms, params, 'c.id')}, 0) END")
    with read_connection().cursor() as cursor:
        cursor.execute(
            f"""
            SELECT c.id, c.document_id, c.key, d.path, d.title, s.slug, c.content, c.byte_offset, c.locator, s.id,
                   {score}
            FROM catalog_chunk c JOIN catalog_document d ON d.id = c.document_id
            JOIN catalog_referencesource s ON s.id = c.source_id
            WHERE c.catalog_id = %(catalog)s AND c.id = ANY(%(chunks)s)
            """,
            params,
        )
        found = cursor.fetchall()
    # Django's connections hand jsonb back as text (its JSONField parses it)
    rows = {chunk: ChunkRow(chunk, document, key, path, title, slug, content, offset, json.loads(locator), source)
            for chunk, document, key, path, title, slug, content, offset, locator, source, _ in found}
    return rows, {row[0]: row[-1] / lexical.SCALE for row in found if row[-1] is not None}
