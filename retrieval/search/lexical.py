"""Exact BM25 from Postgres: the query analysed like documents, its distinct terms
weighted by idf and repeats (retrieval.search.bm25); the terms' packed postings
(catalog_termblock, a few rows per term) read in one statement and scored in numpy
(retrieval.search.bm25 too); the best chunks outside the withheld sources kept.

The same scores summed in SQL from the forward postings (catalog_postings: each chunk's
term ids and tfs) are the reference (bm25_walk), and give the scores of given chunks
(bm25_score_sql, bm25_scores)."""

from __future__ import annotations

import re
from collections.abc import Collection

import psycopg
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper

from catalog import analysis
from catalog.models import Catalog
from catalog.reads import read_connection
from retrieval.search import bm25
from retrieval.search.rows import Params, Row


def bm25_terms(catalog: Catalog, query: str, *, k1: float = bm25.K1, b: float = bm25.B) -> list[bm25.QueryTerm]:
    """The query's terms that occur in `catalog`, weighted, to be scored with k1 and b."""
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
                            k1=k1, b=b)


# SQL sums each term's part of a score in units of 2**-32, rounded to a whole number
# of them: sums of whole numbers are exact in float8 (below 2**53), so a chunk's score
# does not depend on the order its parts are added in, and chunks with equal scores tie
# exactly (and rank by id). The rounding moves a score by less than 1e-9 per term.
SCALE = 2.0**32


def _part(weight: str, dl: str = "p.dl") -> str:
    """SQL for a posting row `p`'s part of the score, in units of 2**-32, for a term
    whose `weight` is idf * (k1 + 1) * SCALE: round(weight * tf / (tf + k1 * (1 - b +
    b * dl / avgdl))), in float8 (untyped parameters would make Postgres compute in
    numeric)."""
    return f"round({weight} * p.tf / (p.tf + %(c1)s::float8 + %(c2)s::float8 * {dl}))"


def _score_constants(catalog: Catalog, terms: list[bm25.QueryTerm]) -> tuple[float, float]:
    """c1 = k1 (1 - b) and c2 = k1 b / avgdl: a part is w tf / (tf + c1 + c2 dl), k1 and
    b those the terms are scored with."""
    k1, b = (terms[0].k1, terms[0].b) if terms else (bm25.K1, bm25.B)
    return k1 * (1 - b), k1 * b / catalog.average_length


def _score_params(catalog: Catalog, terms: list[bm25.QueryTerm]) -> Params:
    c1, c2 = _score_constants(catalog, terms)
    return {"c1": c1, "c2": c2, "catalog": catalog.pk}


def _scaled_weight(term: bm25.QueryTerm) -> float:
    return term.weight * (term.k1 + 1) * SCALE  # times a power of two: exact


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


# Up to this many terms, the walk keeps the chunks holding one of them by their term
# array (an overlap test per forward row) and sums each one's parts on its own; beyond
# it (a pasted passage: hundreds of terms), one join of every posting of the catalog to
# the term array sums them in a hash table. The scores are the same, parts being whole
# numbers; the two forms check each other (tests/retrieval/test_bm25_exact.py).
MERGED_TERMS_MAX = 32


def _terms_sql(terms: list[bm25.QueryTerm], params: Params, name: str) -> str:
    """The query terms as a relation q(term_id, w), w being the term's scaled weight."""
    params[f"{name}_ids"] = [t.term_id for t in terms]
    params[f"{name}_w"] = [_scaled_weight(t) for t in terms]
    return f"unnest(%({name}_ids)s::int[], %({name}_w)s::float8[]) AS q(term_id, w)"


def _forward_sql(where: str) -> str:
    """The postings (chunk_id, term_id, tf, dl) of the forward rows `f` matching `where`."""
    return (f"SELECT f.chunk_id, x.term_id, x.tf, f.length AS dl FROM catalog_postings f "
            f"CROSS JOIN LATERAL unnest(f.terms, f.tfs) AS x(term_id, tf) WHERE {where}")


def _walk_sql(terms: list[bm25.QueryTerm], params: Params, name: str, allowed: str = "") -> str:
    """(chunk_id, scaled score) over `terms` for every chunk holding one of them that
    `allowed` (see _allowed_sql) keeps, summed from the catalog's forward rows
    (catalog_postings), not from the BM25 blocks the search reads: the reference is
    computed another way. Withheld chunks are dropped after the sum, one test per chunk
    rather than per posting.
    """
    terms_sql = _terms_sql(terms, params, name)
    if len(terms) > MERGED_TERMS_MAX:
        grouped = (f"SELECT p.chunk_id, sum({_part('q.w')}) AS score "
                   f"FROM ({_forward_sql('f.catalog_id = %(catalog)s')}) p "
                   f"JOIN {terms_sql} ON q.term_id = p.term_id GROUP BY p.chunk_id")
    else:
        grouped = (f"SELECT f.chunk_id, (SELECT sum({_part('q.w', dl='f.length')}) "
                   f"FROM unnest(f.terms, f.tfs) AS p(term_id, tf) JOIN {terms_sql} ON q.term_id = p.term_id) AS score "
                   f"FROM catalog_postings f WHERE f.catalog_id = %(catalog)s AND f.terms && %({name}_ids)s::int[]")
    return f"SELECT * FROM ({grouped}) g WHERE {allowed}" if allowed else grouped


def bm25_score_sql(catalog: Catalog, terms: list[bm25.QueryTerm], params: Params, chunk: str) -> str:
    """SQL for the scaled BM25 score over `terms` of the chunk whose id is the SQL
    `chunk` (NULL where it holds none of them), summed from its forward row
    (catalog_postings, by key (catalog_id, chunk_id)); what it needs goes into
    `params`. A subquery another statement may hold: hydration reads the hits' rows
    and their scores in one (retrieval.search.selectors.chunk_rows_scored)."""
    params.update(_score_params(catalog, terms))
    return f"""(
        SELECT sum({_part("q.w")})
        FROM ({_forward_sql(f"f.catalog_id = %(catalog)s AND f.chunk_id = {chunk}")}) p
        JOIN {_terms_sql(terms, params, "q")} ON q.term_id = p.term_id)"""


def bm25_walk(catalog: Catalog, terms: list[bm25.QueryTerm], limit: int, withheld: Collection[int] = ()) -> list[Row]:
    """The exact top `limit` outside the withheld sources, summed in SQL over every
    posting of every term: what bm25_top returns, the slow way (the reference that
    tests and `python -m benchmarks bench` check it against)."""
    if not terms:
        return []
    params = _score_params(catalog, terms)
    params["limit"] = limit
    scored = _walk_sql(terms, params, "w", allowed=_allowed_sql(params, withheld))
    with read_connection().cursor() as cursor:
        cursor.execute(f"""
            SELECT s.chunk_id, c.document_id, s.score
            FROM ({scored} ORDER BY score DESC, chunk_id LIMIT %(limit)s) s
            JOIN catalog_chunk c ON c.catalog_id = %(catalog)s AND c.id = s.chunk_id
            ORDER BY s.score DESC, s.chunk_id
        """, params)
        return [Row(chunk, document, score / SCALE) for chunk, document, score in cursor.fetchall()]


def _binary_cursor() -> CursorWrapper:
    """A cursor whose results come in Postgres's binary format (a bytea as its bytes,
    not as hex text to decode), wrapped as Django wraps its own (errors, query log)."""
    connection = read_connection()
    connection.ensure_connection()
    raw = psycopg.Cursor(connection.connection)  # Django's client-side cursors cannot read binary
    raw.format = psycopg.pq.Format.BINARY
    connection.validate_thread_sharing()
    return CursorDebugWrapper(raw, connection) if connection.queries_logged else CursorWrapper(raw, connection)


def _bm25_blocks(catalog: Catalog, terms: list[bm25.QueryTerm], limit: int, withheld: Collection[int]) -> list[Row]:
    """The exact top `limit` outside the withheld sources, scored in numpy from the
    terms' packed postings (catalog_termblock), summed by retrieval.search.bm25."""
    weights = {t.term_id: _scaled_weight(t) for t in terms}
    with _binary_cursor() as cursor:
        cursor.execute("SELECT term_id, first_chunk_id, chunk_ids, tfs, dls FROM catalog_termblock "
                       "WHERE catalog_id = %s AND term_id = ANY(%s::int[])", [catalog.pk, list(weights)])
        blocks = [bm25.BlockRow(*row) for row in cursor.fetchall()]
    postings = bm25.postings_decode(blocks, weights)
    chunk_ids, sums = bm25.chunk_sums(postings.chunk_ids, bm25.parts(postings, *_score_constants(catalog, terms)))
    documents: dict[int, int] = {}

    def withheld_among(chunks: list[int]) -> set[int]:
        """Which of `chunks` lie in withheld sources; notes each one's document."""
        with read_connection().cursor() as cursor:
            cursor.execute("SELECT id, document_id, source_id = ANY(%s) FROM catalog_chunk "
                           "WHERE catalog_id = %s AND id = ANY(%s)", [sorted(withheld), catalog.pk, chunks])
            found = cursor.fetchall()
        documents.update((chunk, document) for chunk, document, _ in found)
        return {chunk for chunk, _, hidden in found if hidden}

    best = bm25.top_allowed(chunk_ids, sums, limit, withheld_among)
    return [Row(chunk, documents[chunk], score / SCALE) for chunk, score in best]


def bm25_search(*, catalog: Catalog, query: str, limit: int,
                withheld: Collection[int] = ()) -> tuple[list[Row], int]:
    """Exact BM25 top `limit` (rank_bm25's scores and order) of the chunks outside the
    `withheld` sources, and the reads of postings taken (0 without a known term). Statistics (N, df, lengths) stay the
    catalog's: leaving a source out does not change anyone else's scores."""
    return bm25_top(catalog, bm25_terms(catalog, query), limit, withheld)


def bm25_top(catalog: Catalog, terms: list[bm25.QueryTerm], limit: int,
             withheld: Collection[int] = ()) -> tuple[list[Row], int]:
    """bm25_search over a query's terms."""
    if not terms:
        return [], 0
    return _bm25_blocks(catalog, terms, limit, withheld), 1


# A term feedback may add: a word or number of 2 to 20 letters or digits (any script).
_FEEDBACK_WORD = re.compile(r"[^\W_]{2,20}")


def feedback_terms(catalog: Catalog, terms: list[bm25.QueryTerm], first: list[Row], *, kept: int,
                   weight: float) -> list[bm25.QueryTerm]:
    """The query's `terms` expanded by pseudo-relevance feedback (RM3, retrieval.search.bm25)
    from its `first` hits (allowed ones: nothing withheld feeds the query): the `kept`
    terms most typical of them, weighted by `weight` against the query's own. Terms of
    more than a tenth of the chunks, and any not a plain word or number
    (_FEEDBACK_WORD), are left out.
    Two statements: the hits' forward rows, the candidate terms' text and df."""
    if not terms or not first:
        return terms
    with read_connection().cursor() as cursor:
        cursor.execute("SELECT chunk_id, terms, tfs, length FROM catalog_postings "
                       "WHERE catalog_id = %s AND chunk_id = ANY(%s)", [catalog.pk, [row.chunk for row in first]])
        forward = {chunk: (ids, tfs, length) for chunk, ids, tfs, length in cursor.fetchall()}
        candidates = sorted({term for ids, _, _ in forward.values() for term in ids})
        cursor.execute("SELECT id, text, df FROM catalog_term WHERE catalog_id = %s AND id = ANY(%s::int[])",
                       [catalog.pk, candidates])
        found = cursor.fetchall()
    most = bm25.FEEDBACK_DF_SHARE * catalog.chunk_count
    usable = {term: df for term, text, df in found if df <= most and _FEEDBACK_WORD.fullmatch(text)}
    chunks = [bm25.FeedbackChunk(row.score, *forward[row.chunk]) for row in first if row.chunk in forward]
    model = bm25.relevance_model(chunks, kept, usable.__contains__)
    if not model:  # nothing to add: the query as it was, its scores unscaled
        return terms
    return bm25.expanded_terms(terms, model, usable, weight=weight, n_docs=catalog.chunk_count,
                               average_idf=catalog.average_idf)


def bm25_scores(catalog: Catalog, terms: list[bm25.QueryTerm], chunk_pks: list[int]) -> dict[int, float]:
    if not terms or not chunk_pks:
        return {}
    params: Params = {"chunks": chunk_pks}
    scored = bm25_score_sql(catalog, terms, params, "c.chunk_id")
    with read_connection().cursor() as cursor:
        cursor.execute(f"SELECT c.chunk_id, coalesce({scored}, 0) FROM unnest(%(chunks)s::bigint[]) AS c(chunk_id)",
                       params)
        return {chunk: score / SCALE for chunk, score in cursor.fetchall()}


def bm25_parts(catalog: Catalog, terms: list[bm25.QueryTerm],
               chunk_pks: list[int]) -> dict[int, dict[int, float]]:
    """Each chunk's BM25 score split by query term: {chunk: {term id: its part}}, over
    the terms each holds (a chunk holding none is absent). The parts are bm25_score_sql's
    own, before their sum: they add up to the chunk's score exactly (whole units of
    2**-32), the score bm25_top ranked it by. One statement."""
    if not terms or not chunk_pks:
        return {}
    params = _score_params(catalog, terms)
    params["chunks"] = chunk_pks
    forward = _forward_sql("f.catalog_id = %(catalog)s AND f.chunk_id = ANY(%(chunks)s::bigint[])")
    with read_connection().cursor() as cursor:
        cursor.execute(f"""
            SELECT p.chunk_id, q.term_id, {_part("q.w")}
            FROM ({forward}) p JOIN {_terms_sql(terms, params, "q")} ON q.term_id = p.term_id
        """, params)
        parts: dict[int, dict[int, float]] = {}
        for chunk, term_id, part in cursor.fetchall():
            parts.setdefault(chunk, {})[term_id] = part / SCALE
    return parts
