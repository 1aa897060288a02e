"""Exact BM25 in Postgres: the query analysed like documents, its distinct terms weighted
by idf and repeats (retrieval.search.bm25), each chunk's parts summed in SQL from the
term-major postings (catalog_termposting), merged in chunk order; a term whose
postings dwarf the others' (common, near-zero idf) is not walked but probed by key for
the chunks that could still reach the top (MaxScore), with a full walk as the fallback
when its bound is too high. Chunks of withheld sources are left out inside the SQL."""

from __future__ import annotations

from collections.abc import Collection

from django.conf import settings

from catalog import analysis
from catalog.models import Catalog
from catalog.reads import read_connection
from retrieval.search import bm25
from retrieval.search.rows import Params, Row


def bm25_terms(catalog: Catalog, query: str) -> list[bm25.QueryTerm]:
    tokens = analysis.analyze(query)
    if not tokens or not catalog.chunk_count:
        return []
    with read_connection().cursor() as cursor:
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
    return {"c1": k1 * (1 - b), "c2": k1 * b / catalog.average_length, "catalog": catalog.pk}


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
    return ("NOT EXISTS (SELECT FROM catalog_chunk c WHERE c.catalog_id = %(catalog)s AND c.id = g.chunk_id "
            "AND c.source_id = ANY(%(withheld)s))")


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
                 "CROSS JOIN LATERAL (SELECT chunk_id, tf, dl FROM catalog_termposting t "
                 "WHERE t.catalog_id = %(catalog)s AND t.term_id = q.term_id OFFSET 0) p")
    else:
        ranges = []
        for i, term in enumerate(terms):
            params[f"{name}{i}"], params[f"{name}w{i}"] = term.term_id, _scaled_weight(term)
            ranges.append(f"(SELECT p.chunk_id, {_part(f'%({name}w{i})s::float8')} AS part "
                          f"FROM catalog_termposting p WHERE p.catalog_id = %(catalog)s AND p.term_id = %({name}{i})s "
                          "ORDER BY p.chunk_id)")
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
            JOIN catalog_termposting p ON p.catalog_id = %(catalog)s AND p.term_id = q.term_id
                AND p.chunk_id = c.chunk_id
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
    with read_connection().cursor() as cursor:
        cursor.execute(
            f"""
            {with_threshold}
            SELECT s.chunk_id, c.document_id, s.score, {"(SELECT score FROM threshold)" if threshold else "NULL"}
            FROM ({scored} ORDER BY score DESC, chunk_id LIMIT %(limit)s) s
            JOIN catalog_chunk c ON c.catalog_id = %(catalog)s AND c.id = s.chunk_id
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
    return bm25_top(catalog, bm25_terms(catalog, query), limit, withheld)


def bm25_top(catalog: Catalog, terms: list[bm25.QueryTerm], limit: int,
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
    return bm25_scores(catalog, bm25_terms(catalog, query) if chunk_pks else [], chunk_pks)


def bm25_scores(catalog: Catalog, terms: list[bm25.QueryTerm], chunk_pks: list[int]) -> dict[int, float]:
    if not terms or not chunk_pks:
        return {}
    params = _score_params(catalog)
    params["chunks"] = chunk_pks
    candidates = "(SELECT unnest(%(chunks)s::bigint[]) AS chunk_id, 0::float8 AS score)"
    with read_connection().cursor() as cursor:
        cursor.execute(_probe_sql(terms, params, candidates, "q"), params)
        return {chunk: score / SCALE for chunk, score in cursor.fetchall()}
