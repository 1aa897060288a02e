"""Vector search: the query embedded as the model reads it (a long passage's head), HNSW
k-NN by cosine with ef_search raised towards the depth asked for and the iterative
scan going on past rows the filters drop; a small catalog the shared scan stops short
of is ranked exactly. Chunks of withheld sources are left out inside the SQL."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

import numpy as np
import psycopg
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper

from catalog.embedder import embedder_status, get_embedder, vector_literal
from catalog.models import Catalog
from catalog.reads import read_connection
from retrieval.search.rows import Params, Row


class SearchUnavailable(Exception):
    """The mode asked for needs an embedding model and none is loaded."""


# hnsw.ef_search for a search that asks for fewer rows (a deeper one raises it to its
# depth): the HNSW scan's candidate list, recall bought with latency.
HNSW_EF_SEARCH = 100
# The largest hnsw.ef_search pgvector accepts; an HNSW scan returns at most ef_search
# rows unless the iterative scan lets it go on.
HNSW_EF_SEARCH_MAX = 1000
# A catalog of at most this many chunks is ranked exactly, not by its HNSW index.
VECTOR_EXACT_MAX = 1000


def embed_query(query: str) -> tuple[str, int]:
    """The query's vector as the model reads it (its first max_tokens tokens: a long
    passage's head) and how many leading characters of the query that is."""
    embedder = get_embedder()
    if embedder is None:
        raise SearchUnavailable(embedder_status()["reason"] or "no embedding model")
    vector, read = embedder.embed_head(query)
    return vector_literal(vector), read


def vector_search(*, catalog: Catalog, vector: str, limit: int, withheld: Collection[int] = (),
                  exact: bool = False) -> list[Row]:
    """HNSW k-NN by cosine over the chunks outside the `withheld` sources; score =
    cosine similarity. ef_search is raised towards `limit`, up to what pgvector
    accepts; the iterative scan finds the rest, past the rows the filters drop. A
    catalog of at most VECTOR_EXACT_MAX chunks is ranked exactly, and so is one
    the scan returns fewer than `limit` rows of while it holds more (a small catalog
    beside large ones), and any catalog when `exact` is asked for (its rows sorted)."""
    ef_search = min(max(HNSW_EF_SEARCH, limit), HNSW_EF_SEARCH_MAX)
    allowed = "AND source_id <> ALL(%(withheld)s)" if withheld else ""
    sql = f"""
        SELECT id, document_id, 1 - (embedding <=> %(vector)s::vector) FROM catalog_chunk
        WHERE catalog_id = %(catalog)s AND embedding IS NOT NULL {allowed}
        ORDER BY embedding <=> %(vector)s::vector LIMIT %(limit)s
        """
    params: Params = {"vector": vector, "catalog": catalog.pk, "limit": limit, "withheld": sorted(withheld)}
    # "+ 0" is an order the HNSW index cannot serve, whatever the planner's
    # settings: the catalog's rows (its catalog_id index) are sorted.
    exact_sql = sql.replace("ORDER BY embedding <=> %(vector)s::vector",
                            "ORDER BY (embedding <=> %(vector)s::vector) + 0")
    with read_connection().cursor() as cursor:
        if withheld:
            # What the agent may read: nothing (no search at all), or few enough rows
            # to sort exactly (the HNSW scan would walk far past the withheld rows to
            # find them: 60 ms for a catalog all but withheld, against 1 ms).
            # counted only up to the limit: a catalog mostly readable costs no count of it all
            cursor.execute("""
                SELECT coalesce(array_agg(id), '{}'), (SELECT count(*) FROM (SELECT 1 FROM catalog_chunk
                    WHERE catalog_id = %(catalog)s AND source_id = ANY(array_agg(s.id)) AND embedding IS NOT NULL
                    LIMIT %(cap)s) readable)
                FROM catalog_referencesource s WHERE catalog_id = %(catalog)s AND id <> ALL(%(withheld)s)
                """, {**params, "cap": VECTOR_EXACT_MAX + 1})
            allowed_sources, allowed_chunks = cursor.fetchone()
            if not allowed_sources:
                return []
            if allowed_chunks <= VECTOR_EXACT_MAX:
                cursor.execute(exact_sql.replace(allowed, "AND source_id = ANY(%(allowed)s)"),
                               {**params, "allowed": allowed_sources})
                return sorted((Row(chunk, doc, float(s)) for chunk, doc, s in cursor.fetchall()),
                              key=lambda row: (-row.score, row.chunk))
        if exact or catalog.chunk_count <= VECTOR_EXACT_MAX:
            # A small catalog's graph has few rows: the approximate scan's recall on it
            # falls with its dead tuples, while sorting its rows costs about a millisecond.
            cursor.execute(exact_sql, params)
            found = cursor.fetchall()
        else:
            found = hnsw_rows(sql, params, ef_search=ef_search)
            if len(found) < limit and len(found) < catalog.chunk_count:
                # The scan stopped short (hnsw.max_scan_tuples: a catalog's rows may lie
                # beyond what the scan visits): rank the catalog's chunks exactly instead.
                cursor.execute(exact_sql, params)
                found = cursor.fetchall()
    return sorted((Row(chunk, doc, float(s)) for chunk, doc, s in found), key=lambda row: (-row.score, row.chunk))


def hnsw_rows(sql: str, params: Params, *, ef_search: int) -> list[tuple[Any, ...]]:
    """The rows of the k-NN statement `sql`, its HNSW scan run with `ef_search` and the
    iterative scan on (relaxed_order: it goes on past ef_search rows, and past rows the
    filters drop, without re-sorting in the index; the caller sorts).

    The settings and the statement go to the server as one message, two statements in
    one round trip: Postgres runs them in one implicit transaction, which keeps the
    settings to this statement (or to the caller's transaction, where one is open)
    without the BEGIN and COMMIT of a transaction of our own. The vector literal loads
    pgvector's library before the settings are made: until then hnsw.* are
    placeholders, and a value the library refuses when it loads is dropped with a
    mere warning."""
    settings = ("SELECT '[0]'::vector, set_config('hnsw.ef_search', %(ef_search)s, true), "
                "set_config('hnsw.iterative_scan', 'relaxed_order', true);")
    with _client_cursor() as cursor:
        cursor.execute(settings + sql, {**params, "ef_search": str(ef_search)})
        cursor.nextset()
        rows: list[tuple[Any, ...]] = cursor.fetchall()
    return rows


def _client_cursor() -> CursorWrapper:
    """A cursor that binds its parameters on the client, whatever the connection's
    settings (server_side_binding): only such a cursor may send several statements
    at once. Wrapped as Django wraps its own (errors, query log)."""
    connection = read_connection()
    connection.close_if_health_check_failed()  # as Django's own cursor() does
    connection.ensure_connection()
    raw = psycopg.ClientCursor(connection.connection)
    connection.validate_thread_sharing()
    return CursorDebugWrapper(raw, connection) if connection.queries_logged else CursorWrapper(raw, connection)


def vector_scores_for(*, catalog: Catalog, vector: str, chunk_pks: list[int]) -> dict[int, float]:
    if not chunk_pks:
        return {}
    with read_connection().cursor() as cursor:
        cursor.execute(
            "SELECT id, 1 - (embedding <=> %s::vector) FROM catalog_chunk WHERE catalog_id = %s AND id = ANY(%s) "
            "AND embedding IS NOT NULL",
            [vector, catalog.pk, chunk_pks],
        )
        return {chunk: float(s) for chunk, s in cursor.fetchall()}


def feedback_vector(*, catalog: Catalog, vector: str, rows: list[Row], weight: float) -> str:
    """Pseudo-relevance feedback (Rocchio): the query's vector moved toward the mean of
    the vectors of `rows` (the best hits of a first vector search, so only chunks the
    caller may be shown), `weight` times that mean added, normalised. A short query
    reads more like the passages that answer it; the second search ranks with it."""
    if not rows or weight <= 0:
        return vector
    with read_connection().cursor() as cursor:
        cursor.execute("SELECT embedding::text FROM catalog_chunk WHERE catalog_id = %s AND id = ANY(%s) "
                       "AND embedding IS NOT NULL", [catalog.pk, [row.chunk for row in rows]])
        found = [np.array(json.loads(text), dtype=np.float64) for (text,) in cursor.fetchall()]
    if not found:
        return vector
    query = np.array(json.loads(vector), dtype=np.float64)
    moved = query / np.linalg.norm(query) + weight * np.mean([v / np.linalg.norm(v) for v in found], axis=0)
    return vector_literal(moved / np.linalg.norm(moved))
