"""Search over a catalog's chunks: exact BM25 in Postgres, pgvector HNSW, and fusion.

chunk_search() runs:
  1. lexical: analyse the whole query, weight its distinct terms by idf and repeats
     (retrieval.search.bm25), then sum in SQL
     each chunk's parts from the term-major postings (catalog_termposting), merged in
     chunk order; a term whose postings dwarf the others' (common, near-zero idf) is
     not walked but probed by key for the chunks that could still reach the top
     (MaxScore), with a full walk as the fallback when its bound is too high
  2. vector: embed the query as the model reads it (a long passage's head: the
     result says how much), HNSW k-NN with ef_search >= the depth asked for (at most
     pgvector's 1000; the iterative scan returns more rows when more are asked for)
  3. fuse (RRF or convex), tie-break, or pass through; optional per-document dedup
     (fusion and tie-break take only BM25 hits with a positive score: seed 004)
  4. hydrate the top_k with content and the component scores each hit lacks
  5. count the withheld chunks that match the query, per source

Sources the approval gate withholds from the caller (approvals.selectors.withheld_sources)
are left out inside the SQL of steps 1 and 2, before any ranking or limit: the top_k is
filled from what may be shown, and no withheld content is ever read into a result.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection, transaction

from approvals.selectors import InjectionDecision, withheld_sources
from catalog import analysis
from catalog.embedder import embedder_status, get_embedder, vector_literal
from catalog.models import Agent, Catalog
from retrieval.search import bm25, fusion

MODES = ("bm25", "vector", "hybrid", "bm25_tiebreak")
FUSIONS = ("rrf", "convex")
NORMALISATIONS = tuple(fusion.NORMALISERS)


class SearchUnavailable(Exception):
    """The mode asked for needs an embedding model and none is loaded."""


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


@dataclass(frozen=True)
class WithheldHits:
    """Chunks of one withheld source that match the query: how many and why, never what."""

    source: str
    count: int
    state: str
    reason: str


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


# --- lexical ----------------------------------------------------------------------------

Row = tuple[int, int, float]  # (chunk pk, document pk, score)
Params = dict[str, float | str | list[int] | list[float]]  # named SQL parameters


def _bm25_terms(catalog: Catalog, query: str) -> list[bm25.QueryTerm]:
    tokens = analysis.analyze(query)
    if not tokens or not catalog.chunk_count:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT text, id, df FROM catalog_term WHERE catalog_id = %s AND text = ANY(%s)",
            [catalog.pk, list(set(tokens))],
        )
        stats = {text: (term_id, df) for text, term_id, df in cursor.fetchall()}
    return bm25.query_terms(tokens, stats, n_docs=catalog.chunk_count, average_idf=catalog.average_idf,
                            k1=settings.LECTERN_BM25_K1)


# A term is probed instead of walked when its postings outnumber those of all walked
# terms this many times (a probe costs about as much as walking ten postings).
PROBE_RATIO = 8.0
# SQL sums each term's part of a score in units of 2**-32, rounded to a whole number
# of them: sums of whole numbers are exact in float8 (below 2**53), so a chunk's score
# does not depend on the order its parts are added in, and chunks with equal scores tie
# exactly (and rank by id). The rounding moves a score by less than 1e-9 per term.
SCALE = 2.0**32


def _part(weight: str) -> str:
    """SQL for a posting row `p`'s part of the score, in units of 2**-32, for a term
    whose `weight` is idf * (k1 + 1) * SCALE: round(weight * tf / (tf + k1 * (1 - b +
    b * dl / avgdl))), in float8 (untyped parameters would make Postgres compute in
    numeric)."""
    return f"round({weight} * p.tf / (p.tf + %(c1)s::float8 + %(c2)s::float8 * p.dl))"


def _score_params(catalog: Catalog) -> Params:
    k1, b = settings.LECTERN_BM25_K1, settings.LECTERN_BM25_B
    return {"c1": k1 * (1 - b), "c2": k1 * b / catalog.average_length}


def _scaled_weight(term: bm25.QueryTerm) -> float:
    return term.weight * (settings.LECTERN_BM25_K1 + 1) * SCALE  # times a power of two: exact


def _allowed_sql(params: Params, withheld: Collection[int]) -> str:
    """A condition on a row `g` with a `chunk_id` that keeps chunks outside the
    `withheld` sources ("" when there are none). An anti-join, which Postgres runs as a
    hash of the withheld chunks (or one key lookup per row when they are many): never
    the rescan per row a NOT IN (subquery) falls back to when its hash would not fit."""
    if not withheld:
        return ""
    params["withheld"] = sorted(withheld)
    return "NOT EXISTS (SELECT FROM catalog_chunk c WHERE c.id = g.chunk_id AND c.source_id = ANY(%(withheld)s))"


# Up to this many terms, a walk merges one index range per term (a plan node each);
# beyond it (a pasted passage: hundreds of terms), one scan joins the postings to the
# term array and sums in a hash table, whose plan does not grow with the terms.
MERGED_TERMS_MAX = 32


def _walk_sql(terms: list[bm25.QueryTerm], params: Params, name: str, where: str = "TRUE", having: str = "",
              allowed: str = "") -> str:
    """(chunk_id, scaled score) over `terms` for every chunk holding one of them whose
    score meets `having` and that `allowed` (see _allowed_sql) keeps (none unless
    `where`, a condition on no column, holds).

    Each term's postings are one range of the (term_id, chunk_id) key, so they come in
    chunk order; merging them keeps that order and the sum needs no hash table. Many
    terms are summed by one join instead (MERGED_TERMS_MAX); the scores are the same,
    parts being whole numbers. Withheld chunks are dropped after the sum, one test per
    chunk rather than per posting.
    """
    if len(terms) > MERGED_TERMS_MAX:
        params[f"{name}_ids"] = [t.term_id for t in terms]
        params[f"{name}_w"] = [_scaled_weight(t) for t in terms]
        # One index range per term, looked up in a nested loop (OFFSET 0 keeps the
        # planner from flattening it into a join that may scan every catalog's postings)
        parts = (f"SELECT p.chunk_id, {_part('q.w')} AS part "
                 f"FROM unnest(%({name}_ids)s::int[], %({name}_w)s::float8[]) AS q(term_id, w) "
                 "CROSS JOIN LATERAL (SELECT chunk_id, tf, dl FROM catalog_termposting t WHERE t.term_id = q.term_id "
                 "OFFSET 0) p")
    else:
        ranges = []
        for i, term in enumerate(terms):
            params[f"{name}{i}"], params[f"{name}w{i}"] = term.term_id, _scaled_weight(term)
            ranges.append(f"(SELECT p.chunk_id, {_part(f'%({name}w{i})s::float8')} AS part "
                          f"FROM catalog_termposting p WHERE p.term_id = %({name}{i})s ORDER BY p.chunk_id)")
        parts = f"SELECT * FROM ({' UNION ALL '.join(ranges)}) r ORDER BY chunk_id"
    grouped = f"SELECT chunk_id, sum(part) AS score FROM ({parts}) m WHERE {where} GROUP BY chunk_id"
    grouped += f" HAVING {having}" if having else ""
    return f"SELECT * FROM ({grouped}) g WHERE {allowed}" if allowed else grouped


def _probe_sql(terms: list[bm25.QueryTerm], params: Params, candidates: str, name: str) -> str:
    """(chunk_id, scaled score) of each row of `candidates`, adding its parts from
    `terms`, each looked up by key (term_id, chunk_id)."""
    params[f"{name}_ids"] = [t.term_id for t in terms]
    params[f"{name}_w"] = [_scaled_weight(t) for t in terms]
    return f"""
        SELECT c.chunk_id, c.score + coalesce(x.score, 0) AS score FROM {candidates} c CROSS JOIN LATERAL (
            SELECT sum({_part("q.w")}) AS score
            FROM unnest(%({name}_ids)s::int[], %({name}_w)s::float8[]) AS q(term_id, w)
            JOIN catalog_termposting p ON p.term_id = q.term_id AND p.chunk_id = c.chunk_id
        ) x
    """


def _seed_terms(walked: list[bm25.QueryTerm], limit: int) -> list[bm25.QueryTerm]:
    """The strongest walked terms whose postings hold `limit` chunks at least."""
    postings = 0
    for count, term in enumerate(walked, start=1):
        postings += term.df
        if postings >= limit:
            return walked[:count]
    return walked


def _bm25_walk(catalog: Catalog, terms: list[bm25.QueryTerm], limit: int, withheld: Collection[int]) -> list[Row]:
    """The exact top `limit` outside the withheld sources, walking the postings of every term."""
    params = _score_params(catalog)
    params["limit"] = limit
    return _top_rows(_walk_sql(terms, params, "w", allowed=_allowed_sql(params, withheld)), params)[0]


def _bm25_probe(catalog: Catalog, terms: list[bm25.QueryTerm], probed: list[bm25.QueryTerm],
                limit: int, withheld: Collection[int]) -> tuple[list[Row], float]:
    """The top `limit` of the chunks holding a term not in `probed`, by full score, and
    a score that `limit` chunks reach (the threshold; -inf when there is none); no rows
    when the probed terms cannot be skipped.

    1. seeds: the `limit` best chunks of the strongest terms' postings, completed by
       key lookups of every other term; the `limit`-th best of their scores is the
       threshold
    2. walk the postings of every term not probed, keeping only chunks whose sum plus
       the probed terms' bounds reaches the threshold
    3. add the probed terms' parts to those by key lookups; rank
    Exact when no chunk outside the walked postings can reach the threshold
    (bm25.can_skip). Chunks of withheld sources are left out of the seeds as well as of
    the candidates: a threshold they set could exceed what `limit` shown chunks reach.
    """
    params = _score_params(catalog)
    params["limit"] = limit
    allowed = _allowed_sql(params, withheld)
    skipped = {t.term_id for t in probed}  # sets: a passage brings hundreds of terms
    walked = [t for t in terms if t.term_id not in skipped]
    seeds = _seed_terms(walked, limit)
    seeded = {t.term_id for t in seeds}
    best_seeds = f"({_walk_sql(seeds, params, 's', allowed=allowed)} ORDER BY score DESC LIMIT %(limit)s)"
    completed = _probe_sql([t for t in terms if t.term_id not in seeded], params, best_seeds, "o")
    params["high"] = (sum(t.upper_bound for t in probed) + 1e-6) * SCALE  # slack for rounding
    # Walks nothing when the threshold is too low to skip the probed terms (a second
    # pass walks every term then).
    skippable = "%(high)s::float8 < (SELECT score FROM threshold)"
    reachable = "sum(part) + %(high)s::float8 >= (SELECT score FROM threshold)"
    candidates = f"({_walk_sql(walked, params, 'w', where=skippable, having=reachable, allowed=allowed)})"
    threshold = f"""
        SELECT coalesce((SELECT score FROM ({completed}) s ORDER BY score DESC OFFSET %(limit)s - 1 LIMIT 1),
                        '-infinity') AS score
    """
    return _top_rows(_probe_sql(probed, params, candidates, "p"), params, threshold=threshold)


def _top_rows(scored: str, params: Params, *, threshold: str = "") -> tuple[list[Row], float]:
    """The top %(limit)s of `scored` by score, then chunk id, scores unscaled; and the
    threshold's score, unscaled (-inf without rows or a threshold). `threshold` is the
    SQL of a one-row `score` that `scored` reads as (SELECT score FROM threshold)."""
    with_threshold = f"WITH threshold AS MATERIALIZED ({threshold})" if threshold else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            {with_threshold}
            SELECT s.chunk_id, c.document_id, s.score, {"(SELECT score FROM threshold)" if threshold else "NULL"}
            FROM ({scored} ORDER BY score DESC, chunk_id LIMIT %(limit)s) s
            JOIN catalog_chunk c ON c.id = s.chunk_id
            ORDER BY s.score DESC, s.chunk_id
            """,
            params,
        )
        fetched = cursor.fetchall()
    rows = [(chunk, doc, score / SCALE) for chunk, doc, score, _ in fetched]
    return rows, fetched[0][3] / SCALE if fetched and threshold else float("-inf")


def bm25_search(*, catalog: Catalog, query: str, limit: int,
                withheld: Collection[int] = ()) -> tuple[list[Row], int]:
    """Exact BM25 top `limit` (rank_bm25's scores and order) of the chunks outside the
    `withheld` sources, and the SQL passes taken. Statistics (N, df, lengths) stay the
    catalog's: leaving a source out does not change anyone else's scores."""
    return _bm25_top(catalog, _bm25_terms(catalog, query), limit, withheld)


def _bm25_top(catalog: Catalog, terms: list[bm25.QueryTerm], limit: int,
              withheld: Collection[int] = ()) -> tuple[list[Row], int]:
    """bm25_search over a query's terms.

    Terms whose postings dwarf the others' (bm25.terms_to_probe) are probed for the
    walked terms' candidates instead of walked; when their bounds turn out too high
    for the threshold found, a second pass walks every term.
    """
    if not terms:
        return [], 0
    probed = bm25.terms_to_probe(terms, ratio=PROBE_RATIO)
    if probed and sum(t.df for t in terms) - sum(t.df for t in probed) >= limit:  # else no threshold to bound by
        rows, threshold = _bm25_probe(catalog, terms, probed, limit, withheld)
        if bm25.can_skip(probed, threshold):
            return rows, 1
        return _bm25_walk(catalog, terms, limit, withheld), 2
    return _bm25_walk(catalog, terms, limit, withheld), 1


def bm25_scores_for(*, catalog: Catalog, query: str, chunk_pks: list[int]) -> dict[int, float]:
    """BM25 scores of the given chunks that hold a query term (the others score 0)."""
    return _bm25_scores(catalog, _bm25_terms(catalog, query) if chunk_pks else [], chunk_pks)


def _bm25_scores(catalog: Catalog, terms: list[bm25.QueryTerm], chunk_pks: list[int]) -> dict[int, float]:
    if not terms or not chunk_pks:
        return {}
    params = _score_params(catalog)
    params["chunks"] = chunk_pks
    candidates = "(SELECT unnest(%(chunks)s::bigint[]) AS chunk_id, 0::float8 AS score)"
    with connection.cursor() as cursor:
        cursor.execute(_probe_sql(terms, params, candidates, "q"), params)
        return {chunk: score / SCALE for chunk, score in cursor.fetchall()}


# --- vector -----------------------------------------------------------------------------

# The largest hnsw.ef_search pgvector accepts; an HNSW scan returns at most ef_search
# rows unless the iterative scan lets it go on.
HNSW_EF_SEARCH_MAX = 1000


def embed_query(query: str) -> tuple[str, int]:
    """The query's vector as the model reads it (its first max_tokens tokens: a long
    passage's head) and how many leading characters of the query that is."""
    embedder = get_embedder()
    if embedder is None:
        raise SearchUnavailable(embedder_status()["reason"] or "no embedding model")
    vector, read = embedder.embed_head(query)
    return vector_literal(vector), read


def vector_search(*, catalog: Catalog, vector: str, limit: int, withheld: Collection[int] = ()) -> list[Row]:
    """HNSW k-NN by cosine over the chunks outside the `withheld` sources; score =
    cosine similarity. ef_search is raised towards `limit`, up to what pgvector
    accepts; the iterative scan finds the rest, past the rows the filters drop. When
    the scan still returns fewer than `limit` rows of a catalog that holds more, the
    catalog's chunks are ranked exactly (a small catalog beside large ones)."""
    ef_search = min(max(settings.LECTERN_HNSW_EF_SEARCH, limit), HNSW_EF_SEARCH_MAX)
    allowed = "AND source_id <> ALL(%(withheld)s)" if withheld else ""
    with transaction.atomic(), connection.cursor() as cursor:
        # relaxed_order: the scan keeps going past ef_search rows, and past rows the
        # catalog filter drops (all catalogs share one index), without re-sorting in the
        # index; we sort below. The vector literal loads pgvector's library before the
        # settings are made: until then hnsw.* are placeholders, and a value the library
        # refuses when it loads is dropped with a mere warning.
        cursor.execute("SELECT '[0]'::vector, set_config('hnsw.ef_search', %s, true), "
                       "set_config('hnsw.iterative_scan', 'relaxed_order', true)", [str(ef_search)])
        sql = f"""
            SELECT id, document_id, 1 - (embedding <=> %(vector)s::vector) FROM catalog_chunk
            WHERE catalog_id = %(catalog)s AND embedding IS NOT NULL {allowed}
            ORDER BY embedding <=> %(vector)s::vector LIMIT %(limit)s
            """
        params: Params = {"vector": vector, "catalog": catalog.pk, "limit": limit, "withheld": sorted(withheld)}
        cursor.execute(sql, params)
        rows = [(chunk, doc, float(s)) for chunk, doc, s in cursor.fetchall()]
        if len(rows) < limit and len(rows) < catalog.chunk_count:
            # The scan stopped short (hnsw.max_scan_tuples: every catalog shares the
            # index, so a small catalog's rows may lie beyond what it visits): rank the
            # catalog's chunks exactly instead. "+ 0" is an order the HNSW index cannot
            # serve, whatever the planner's settings: the catalog's rows are sorted.
            cursor.execute(sql.replace("ORDER BY embedding <=> %(vector)s::vector",
                                       "ORDER BY (embedding <=> %(vector)s::vector) + 0"), params)
            rows = [(chunk, doc, float(s)) for chunk, doc, s in cursor.fetchall()]
    return sorted(rows, key=lambda row: (-row[2], row[0]))


def vector_scores_for(*, vector: str, chunk_pks: list[int]) -> dict[int, float]:
    if not chunk_pks:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, 1 - (embedding <=> %s::vector) FROM catalog_chunk WHERE id = ANY(%s) AND embedding IS NOT NULL",
            [vector, chunk_pks],
        )
        return {chunk: float(s) for chunk, s in cursor.fetchall()}


# --- fusion -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SearchOptions:
    mode: str = "hybrid"
    top_k: int = 10
    fusion: str = "rrf"
    normalization: str = "minmax"
    weights: dict[str, float] | None = None  # per component; RRF default 1/1, convex 0.5/0.5
    dedup: bool = False


def _ranked(rows: list[Row], dedup: bool) -> list[Row]:
    """Rows in score order; with dedup, only each document's best chunk."""
    if not dedup:
        return rows
    seen, kept = set(), []
    for row in rows:
        if row[1] not in seen:
            seen.add(row[1])
            kept.append(row)
    return kept


def _key(row: Row, dedup: bool) -> int:
    """What fusion ranks: chunks, or documents when deduplicating."""
    return row[1] if dedup else row[0]


def _fuse(lists: dict[str, list[Row]], options: SearchOptions) -> list[tuple[int, float]]:
    rankings = {name: [(_key(row, options.dedup), row[2]) for row in rows] for name, rows in lists.items()}
    if options.mode == "hybrid" and options.fusion == "convex":
        weights = options.weights or {"bm25": 0.5, "vector": 0.5}
        return fusion.convex(rankings, weights=weights, normalise=options.normalization)
    if options.mode == "hybrid":
        return fusion.rrf(rankings, k=settings.LECTERN_RRF_K, weights=options.weights)
    if options.mode == "bm25_tiebreak":
        vector = dict(rankings.get("vector", []))
        return fusion.tiebreak(rankings["bm25"], vector)
    return rankings[options.mode]


def chunk_search(*, catalog: Catalog, query: str, options: SearchOptions,
                 agent: Agent | None = None) -> SearchResult:
    """Search `catalog` for `agent` (None: a signed-in person, or a curator's command);
    see the module docstring for the steps."""
    started = time.perf_counter()
    withheld = withheld_sources(agent=agent, catalog_ids=[catalog.pk])
    mode, degraded = options.mode, None
    vector, vector_chars = None, None
    if mode != "bm25":
        try:
            vector, vector_chars = embed_query(query)
        except SearchUnavailable as exc:
            if mode == "vector":
                raise
            mode, degraded = "bm25", f"lexical-only: {exc}"
            options = SearchOptions(**{**options.__dict__, "mode": "bm25"})
    # Fusion needs each component's list beyond top_k; a single component does not.
    fused_modes = ("hybrid", "bm25_tiebreak")
    depth = max(options.top_k, settings.LECTERN_FUSION_DEPTH) if mode in fused_modes else options.top_k
    depth *= 3 if options.dedup else 1  # chunks per distinct document, roughly
    lists: dict[str, list[Row]] = {}
    passes = 0
    terms = _bm25_terms(catalog, query)  # once: a pasted passage takes milliseconds to analyse
    if mode in ("bm25", "hybrid", "bm25_tiebreak"):
        rows, passes = _bm25_top(catalog, terms, depth, withheld)
        if mode in fused_modes:  # a zero score (idf 0: a term in half the chunks) is no evidence (seed 004)
            rows = [row for row in rows if row[2] > 0]
        lists["bm25"] = _ranked(rows, options.dedup)
    # vector is None only where an unavailable model turned the mode to bm25
    if mode in ("vector", "hybrid") and vector is not None:
        lists["vector"] = _ranked(vector_search(catalog=catalog, vector=vector, limit=depth, withheld=withheld),
                                  options.dedup)
    if mode == "bm25_tiebreak" and vector is not None:
        pks = [row[0] for row in lists["bm25"]]
        sims = vector_scores_for(vector=vector, chunk_pks=pks)
        lists["vector"] = sorted(((pk, doc, sims[pk]) for pk, doc, _ in lists["bm25"] if pk in sims),
                                 key=lambda row: -row[2])
    fused = _fuse(lists, options)[: options.top_k]
    hits = _hydrate(catalog, terms, vector, fused, lists, options.dedup)
    report: list[WithheldHits] = []
    if withheld:
        similar = _similarity_floor(hits, options.top_k) if mode in ("vector", "hybrid") and vector else None
        report = _withheld_hits(withheld, terms if "bm25" in lists else [], vector=vector, similar=similar)
    took = (time.perf_counter() - started) * 1000
    return SearchResult(hits, options.mode if degraded is None else mode, took, degraded, passes, report,
                        vector_chars, vector_chars is not None and vector_chars < len(query))


def _similarity_floor(hits: list[Hit], top_k: int) -> float | None:
    """How similar to the query a withheld chunk must be to count as matching: as
    similar as the least similar hit shown, or any similarity when fewer than top_k
    hits were found (it would have been shown); None when no hit has a similarity."""
    if len(hits) < top_k:
        return float("-inf")
    similarities = [score for hit in hits if (score := hit.scores.get("vector")) is not None]
    return min(similarities) if similarities else None


def _withheld_hits(withheld: dict[int, InjectionDecision], terms: list[bm25.QueryTerm], *,
                   similar: float | None, vector: str | None = None) -> list[WithheldHits]:
    """Per withheld source, its chunks that match the query: holding one of the query's
    `terms` (the chunks BM25 ranks; none when BM25 did not run); at least `similar` to
    the query by cosine when given. One statement over those sources' chunks only, whatever the catalog's size."""
    params: Params = {"withheld": sorted(withheld)}
    matches = []
    if terms:
        params["terms"] = [term.term_id for term in terms]
        matches.append("EXISTS (SELECT FROM catalog_termposting p WHERE p.term_id = ANY(%(terms)s) "
                       "AND p.chunk_id = c.id)")
    if similar == float("-inf"):
        matches.append("c.embedding IS NOT NULL")
    elif similar is not None and vector is not None:
        params["vector"], params["floor"] = vector, similar
        matches.append("(c.embedding IS NOT NULL AND 1 - (c.embedding <=> %(vector)s::vector) >= %(floor)s)")
    if not matches:
        return []
    with connection.cursor() as cursor:
        cursor.execute(f"""
            SELECT s.id, s.slug, count(*) FROM catalog_chunk c JOIN catalog_referencesource s ON s.id = c.source_id
            WHERE c.source_id = ANY(%(withheld)s) AND ({" OR ".join(matches)})
            GROUP BY s.id, s.slug ORDER BY count(*) DESC, s.slug
        """, params)
        rows = cursor.fetchall()
    return [WithheldHits(source=slug, count=count, state=withheld[pk].state, reason=withheld[pk].reason)
            for pk, slug, count in rows]


def _hydrate(catalog: Catalog, terms: list[bm25.QueryTerm], vector: str | None, fused: list[tuple[int, float]],
             lists: dict[str, list[Row]], dedup: bool) -> list[Hit]:
    """Hits for the fused keys, with both component scores and ranks.

    A key is a chunk, or with dedup a document shown by its best chunk (the lexical
    one when both lists hold the document); its ranks and scores are the document's.
    """
    scores = {name: {_key(row, dedup): row[2] for row in rows} for name, rows in lists.items()}
    ranks = {name: {_key(row, dedup): i for i, row in enumerate(rows, start=1)} for name, rows in lists.items()}
    shown: dict[int, int] = {}
    for name in ("vector", "bm25"):  # bm25 last: it wins when both hold the key
        shown.update({_key(row, dedup): row[0] for row in lists.get(name, [])})
    keys = [key for key, _ in fused]
    missing = {name: [shown[k] for k in keys if k not in scores.get(name, {})] for name in ("bm25", "vector")}
    extra = {"bm25": _bm25_scores(catalog, terms, missing["bm25"]),
             "vector": vector_scores_for(vector=vector, chunk_pks=missing["vector"]) if vector else {}}
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.id, c.document_id, c.key, d.path, d.title, s.slug, c.content, c.byte_offset
            FROM catalog_chunk c JOIN catalog_document d ON d.id = c.document_id
            JOIN catalog_referencesource s ON s.id = c.source_id WHERE c.id = ANY(%s)
            """,
            [[shown[k] for k in keys]],
        )
        rows = {row[0]: row for row in cursor.fetchall()}
    hits = []
    for key, fused_score in fused:
        pk, doc_pk, chunk_key, path, title, source, content, offset = rows[shown[key]]
        component = {name: scores.get(name, {}).get(key, extra[name].get(pk)) for name in ("bm25", "vector")}
        hits.append(Hit(
            chunk_pk=pk, document_pk=doc_pk, score=fused_score,
            scores={"bm25": component["bm25"] or 0.0, "vector": component["vector"], "fused": fused_score},
            ranks={"bm25": ranks.get("bm25", {}).get(key), "vector": ranks.get("vector", {}).get(key)},
            key=chunk_key, document_id=path, title=title, source=source, content=content, byte_offset=offset,
        ))
    return hits
