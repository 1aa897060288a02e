"""Search over a catalog's chunks: exact BM25 in Postgres, pgvector HNSW, and fusion.

chunk_search() runs:
  1. lexical: analyse the query, weight its terms (retrieval.bm25), then score in SQL
     only the chunks holding an *essential* term (MaxScore), widening the essential
     set until no other chunk could reach the top (so common, near-zero-idf terms are
     scored on candidates but their postings are never walked)
  2. vector: embed the query, HNSW k-NN with ef_search >= the depth asked for
  3. fuse (RRF or convex), tie-break, or pass through; optional per-document dedup
  4. hydrate the top_k with content and the component scores each hit lacks
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection, transaction

from catalog import analysis
from catalog.embedder import embedder_status, get_embedder, vector_literal
from catalog.models import Catalog
from retrieval import bm25, fusion

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


@dataclass
class SearchResult:
    hits: list[Hit]
    mode: str
    took_ms: float
    degraded: str | None = None
    bm25_passes: int = 0


# --- lexical ----------------------------------------------------------------------------

Row = tuple[int, int, float]  # (chunk pk, document pk, score)


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


def _score_sql(terms: list[bm25.QueryTerm], avgdl: float) -> tuple[str, list, str, list]:
    """(score expression, its params, lateral join, its params) for a postings row `p`.

    The lateral join looks each query term's frequency up once per row; the score
    sums idf * (k1 + 1) * tf / (tf + k1 * (1 - b + b * dl / avgdl)) over the terms.
    """
    k1, b = settings.LECTERN_BM25_K1, settings.LECTERN_BM25_B
    lookups = ", ".join(f"p.tfs[array_position(p.terms, %s::int)]::float8 AS f{i}" for i in range(len(terms)))
    # float8 parameters: untyped literals would make Postgres score in numeric.
    parts = [f"coalesce(%s::float8 * f{i} / (f{i} + %s::float8 + %s::float8 * p.length), 0)"
             for i in range(len(terms))]
    score_params: list = []
    for t in terms:
        score_params += [t.weight * (k1 + 1), k1 * (1 - b), k1 * b / avgdl]
    lateral_params = [t.term_id for t in terms]
    # OFFSET 0 keeps the lateral subquery from being flattened into the score
    # expression, which would run each array_position lookup twice per row.
    return " + ".join(parts), score_params, f"CROSS JOIN LATERAL (SELECT {lookups} OFFSET 0) f", lateral_params


def _bm25_rows(catalog: Catalog, terms: list[bm25.QueryTerm], where: str, where_params: list, limit: int) -> list[Row]:
    score, score_params, lateral, lateral_params = _score_sql(terms, catalog.average_length)
    sql = f"""
        SELECT s.chunk_id, c.document_id, s.score FROM (
            SELECT p.chunk_id, {score} AS score
            FROM catalog_postings p {lateral}
            WHERE {where}
            ORDER BY score DESC, p.chunk_id
            LIMIT %s
        ) s JOIN catalog_chunk c ON c.id = s.chunk_id
        ORDER BY s.score DESC, s.chunk_id
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [*score_params, *lateral_params, *where_params, limit])
        return [(chunk, doc, float(s)) for chunk, doc, s in cursor.fetchall()]


def bm25_search(*, catalog: Catalog, query: str, limit: int) -> tuple[list[Row], int]:
    """Exact BM25 top `limit` (rank_bm25's scores and order), and the SQL passes taken."""
    terms = _bm25_terms(catalog, query)
    if not terms:
        return [], 0
    essential, passes = 1, 0
    while True:
        passes += 1
        ids = [t.term_id for t in terms[:essential]]
        rows = _bm25_rows(catalog, terms, "p.terms && %s::int[]", [ids], limit)
        if essential == len(terms):
            return rows, passes
        if len(rows) < limit:
            essential += 1  # too few candidates to bound anything: widen by the next-rarest term
            continue
        needed = bm25.essential_split(terms, rows[-1][2])
        if needed <= essential:
            return rows, passes
        essential = needed


def bm25_scores_for(*, catalog: Catalog, query: str, chunk_pks: list[int]) -> dict[int, float]:
    terms = _bm25_terms(catalog, query)
    if not terms or not chunk_pks:
        return {}
    rows = _bm25_rows(catalog, terms, "p.chunk_id = ANY(%s)", [chunk_pks], len(chunk_pks))
    return {chunk: s for chunk, _doc, s in rows}


# --- vector -----------------------------------------------------------------------------


def embed_query(query: str) -> str:
    embedder = get_embedder()
    if embedder is None:
        raise SearchUnavailable(embedder_status()["reason"] or "no embedding model")
    return vector_literal(embedder.embed([query])[0])


def vector_search(*, catalog: Catalog, vector: str, limit: int) -> list[Row]:
    """HNSW k-NN by cosine; score = cosine similarity. ef_search is raised to `limit`
    because an HNSW scan never returns more than ef_search rows."""
    ef_search = max(settings.LECTERN_HNSW_EF_SEARCH, limit)
    with transaction.atomic(), connection.cursor() as cursor:
        # relaxed_order: the scan keeps going past rows the catalog filter drops (all
        # catalogs share one index) without re-sorting in the index; we sort below.
        cursor.execute("SELECT set_config('hnsw.ef_search', %s, true), "
                       "set_config('hnsw.iterative_scan', 'relaxed_order', true)", [str(ef_search)])
        cursor.execute(
            """
            SELECT id, document_id, 1 - (embedding <=> %s::vector) FROM catalog_chunk
            WHERE catalog_id = %s AND embedding IS NOT NULL
            ORDER BY embedding <=> %s::vector LIMIT %s
            """,
            [vector, catalog.pk, vector, limit],
        )
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


def chunk_search(*, catalog: Catalog, query: str, options: SearchOptions) -> SearchResult:
    """Search `catalog`; see the module docstring for the steps."""
    started = time.perf_counter()
    mode, degraded = options.mode, None
    vector = None
    if mode != "bm25":
        try:
            vector = embed_query(query)
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
    if mode in ("bm25", "hybrid", "bm25_tiebreak"):
        rows, passes = bm25_search(catalog=catalog, query=query, limit=depth)
        if mode == "hybrid":  # a zero score (idf 0: a term in half the chunks) is no evidence
            rows = [row for row in rows if row[2] > 0]
        lists["bm25"] = _ranked(rows, options.dedup)
    if mode in ("vector", "hybrid"):
        lists["vector"] = _ranked(vector_search(catalog=catalog, vector=vector, limit=depth), options.dedup)
    if mode == "bm25_tiebreak":
        pks = [row[0] for row in lists["bm25"]]
        sims = vector_scores_for(vector=vector, chunk_pks=pks)
        lists["vector"] = sorted(((pk, doc, sims[pk]) for pk, doc, _ in lists["bm25"] if pk in sims),
                                 key=lambda row: -row[2])
    fused = _fuse(lists, options)[: options.top_k]
    hits = _hydrate(catalog, query, vector, fused, lists, options.dedup)
    took = (time.perf_counter() - started) * 1000
    return SearchResult(hits, options.mode if degraded is None else mode, took, degraded, passes)


def _hydrate(catalog: Catalog, query: str, vector: str | None, fused: list[tuple[int, float]],
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
    extra = {"bm25": bm25_scores_for(catalog=catalog, query=query, chunk_pks=missing["bm25"]),
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
