"""How deep the HNSW scan is asked to go: pgvector accepts hnsw.ef_search up to 1000,
while a search may need more rows than that (top_k up to 1000, three chunks per
document with dedup). ef_search is clamped, and the iterative scan fills the rest.

The setting must hold on a connection that has already used pgvector and on a fresh one
(where the hnsw.* settings are mere placeholders until pgvector's library loads).
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from catalog.indexing.chunks import prepare_chunks
from catalog.indexing.writes import source_replace_rows
from catalog.models import Chunk, ReferenceSource
from catalog.sources.documents import Collected, DocumentInput
from retrieval.search.vector import HNSW_EF_SEARCH_MAX, hnsw_rows, vector_search

URL = "/api/v1/search"


def search(token: str, **body):
    client = APIClient()
    return client.post(URL, body, format="json", HTTP_AUTHORIZATION=f"Bearer {token}")


def random_unit_vectors(count: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(count, 384)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def two_chunk_documents(catalog, count: int) -> int:
    """`count` documents of two chunks each, with random vectors (no embedding model
    needed: the HNSW scan is what is tested); the chunks written."""
    source = ReferenceSource.objects.create(catalog=catalog, slug="pairs", name="Pairs", kind="upload",
                                            location="pairs")
    text = ("Alpha beta gamma delta epsilon zeta eta theta iota kappa. "
            "Lambda omicron sigma upsilon omega rho tau phi chi psi.")
    documents = [DocumentInput(f"doc-{i:04d}.md", f"Doc {i}", text, len(text)) for i in range(count)]
    prepared = prepare_chunks(catalog, documents, embedder=None)
    source_replace_rows(source, Collected(documents), prepared, random_unit_vectors(len(prepared), seed=7))
    return len(prepared)


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_dedup_search_deeper_than_pgvector_allows_is_answered(indexed_catalog, agent_token, mode):
    # top_k 334 with dedup asks each component for 334 * 3 = 1002 rows: over ef_search's 1000
    token = agent_token("deep", [indexed_catalog])
    search(token, catalog="ops", query="retry", mode="vector", top_k=3)  # pgvector now loaded on this connection

    response = search(token, catalog="ops", query="retry", top_k=334, mode=mode, dedup=True)

    assert response.status_code == 200, response.content
    documents = [hit["document_id"] for hit in response.json()["results"]]
    assert len(documents) == len(set(documents)) == 4  # every document of the catalog, once


def test_top_k_is_filled_past_ef_search_by_the_iterative_scan(make_catalog, agent_token):
    # given: 1,000 documents of two chunks each; the best 1,000 chunks (all one
    # ef_search-bounded scan could return) cover far fewer than 1,000 documents
    catalog = make_catalog("pairs", chunk_size=60, chunk_overlap=0)
    assert two_chunk_documents(catalog, 1000) == 2000
    token = agent_token("pairs-agent", [catalog])
    # and the planner walks the catalog's HNSW index, as it does on a catalog much larger
    # than the rows asked for (on 2,000 rows it would rather sort them all)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off")
        cursor.execute("EXPLAIN SELECT id FROM catalog_chunk WHERE catalog_id = %s ORDER BY embedding <=> %s::vector "
                       "LIMIT 3000", [catalog.pk, "[" + ",".join(["0.05"] * 384) + "]"])
        assert f"catalog_chunk_c{catalog.pk}_hnsw" in " ".join(row[0] for row in cursor.fetchall())

    response = search(token, catalog="pairs", query="alpha beta", mode="vector", top_k=1000, dedup=True)

    assert response.status_code == 200, response.content
    documents = [hit["document_id"] for hit in response.json()["results"]]
    assert len(documents) == len(set(documents)) == 1000
    assert Chunk.objects.filter(catalog=catalog).count() == 2000


@pytest.mark.django_db(transaction=True)
def test_ef_search_takes_effect_on_a_fresh_connection(make_catalog, monkeypatch):
    monkeypatch.setattr("retrieval.search.vector.VECTOR_EXACT_MAX", -1)  # the HNSW scan, empty as the catalog is
    catalog = make_catalog("fresh")
    vector = "[" + ",".join(["0.05"] * 384) + "]"
    connection.close()  # the next query opens a new backend that has not loaded pgvector

    with transaction.atomic():  # keeps vector_search's transaction-local settings readable
        vector_search(catalog=catalog, vector=vector, limit=1002)
        with connection.cursor() as cursor:
            cursor.execute("SHOW hnsw.ef_search")
            ef_search = cursor.fetchone()[0]
            cursor.execute("SHOW hnsw.iterative_scan")
            iterative = cursor.fetchone()[0]

    assert (int(ef_search), iterative) == (HNSW_EF_SEARCH_MAX, "relaxed_order")


@pytest.mark.django_db
def test_ef_search_takes_effect_on_a_connection_that_loaded_pgvector(make_catalog, monkeypatch):
    monkeypatch.setattr("retrieval.search.vector.VECTOR_EXACT_MAX", -1)
    catalog = make_catalog("reused")
    vector = "[" + ",".join(["0.05"] * 384) + "]"
    vector_search(catalog=catalog, vector=vector, limit=5)  # pgvector loaded

    with transaction.atomic():
        vector_search(catalog=catalog, vector=vector, limit=1002)
        with connection.cursor() as cursor:
            cursor.execute("SHOW hnsw.ef_search")
            ef_search = cursor.fetchone()[0]

    assert int(ef_search) == HNSW_EF_SEARCH_MAX


@pytest.mark.django_db(transaction=True)
def test_the_scan_settings_hold_for_its_statement_and_end_with_it():
    connection.close()  # a fresh backend: pgvector not loaded yet
    settings = "SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')"

    with CaptureQueriesContext(connection) as sent:
        seen = hnsw_rows(settings, {}, ef_search=HNSW_EF_SEARCH_MAX)
    with connection.cursor() as cursor:
        cursor.execute(settings)
        after = cursor.fetchall()

    # the statement ran with them, sent with it in one message (no transaction of its
    # own), and the connection is left as it was
    assert seen == [(str(HNSW_EF_SEARCH_MAX), "relaxed_order")] and len(sent) == 1
    assert after == [("40", "off")]


def far_chunks(catalog, slug: str, count: int, query: np.ndarray, seed: int, *, distance: float = -1.0) -> None:
    """`count` one-chunk documents whose vectors lie around `distance` * `query` (-1: far
    from it, opposite; 1: near it)."""
    source = ReferenceSource.objects.create(catalog=catalog, slug=slug, name=slug, kind="upload", location=slug)
    text = "Alpha beta gamma delta epsilon zeta eta theta iota kappa."
    documents = [DocumentInput(f"{slug}-{i:03d}.md", f"{slug} {i}", text, len(text)) for i in range(count)]
    prepared = prepare_chunks(catalog, documents, embedder=None)
    vectors = distance * query + 0.3 * random_unit_vectors(len(prepared), seed=seed)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    source_replace_rows(source, Collected(documents), prepared, vectors)


def exact_order(catalog, query: np.ndarray, *, source: str | None = None) -> list[int]:
    chunks = Chunk.objects.filter(catalog=catalog, **({"source__slug": source} if source else {}))
    vectors = dict(chunks.values_list("pk", "embedding"))
    return sorted(vectors, key=lambda pk: -float(np.dot(np.asarray(vectors[pk]), query)))


@contextmanager
def scans_stopping_early():
    """An HNSW scan that may visit almost no tuples past its first ef_search (pgvector's
    hnsw.max_scan_tuples; 20,000 by default, which enough filtered rows exhaust the same
    way), and plans that walk the HNSW index: any plan the planner would rather not take
    looks as bad as that walk (the fallback must not depend on the planner's choice)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT '[0]'::vector, set_config('hnsw.max_scan_tuples', '1', false)")
        cursor.execute("SET enable_seqscan = off; SET enable_sort = off; SET enable_bitmapscan = off")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET hnsw.max_scan_tuples; RESET enable_seqscan; RESET enable_sort; "
                           "RESET enable_bitmapscan")


def test_a_small_catalog_beside_a_large_nearer_one_is_answered_by_its_own_index(make_catalog, monkeypatch):
    monkeypatch.setattr("retrieval.search.vector.VECTOR_EXACT_MAX", 0)  # the small catalog goes to the HNSW scan
    # given: a large catalog whose chunks are all nearer the query than a small one's:
    # when every catalog shared one index, the scan stopped short of the small one's
    query = random_unit_vectors(1, seed=11)[0]
    big = make_catalog("big", chunk_size=60, chunk_overlap=0)
    two_chunk_documents(big, 1000)
    small = make_catalog("small", chunk_size=60, chunk_overlap=0)
    far_chunks(small, "far", 150, query, seed=12)
    exact = exact_order(small, query)[:100]
    literal = "[" + ",".join(f"{x:.8f}" for x in query) + "]"

    with scans_stopping_early():
        with transaction.atomic(), connection.cursor() as cursor:  # the scan alone, once
            cursor.execute("SET LOCAL hnsw.ef_search = 100; SET LOCAL hnsw.iterative_scan = relaxed_order")
            sql = "SELECT id FROM catalog_chunk WHERE catalog_id = %s ORDER BY embedding <=> %s::vector LIMIT 100"
            cursor.execute(f"EXPLAIN {sql}", [small.pk, literal])
            plan = " ".join(row[0] for row in cursor.fetchall())
            cursor.execute(sql, [small.pk, literal])
            scanned = [row[0] for row in cursor.fetchall()]
        rows = vector_search(catalog=small, vector=literal, limit=100)

    # then the scan walks the small catalog's index alone and finds its whole top 100
    assert f"catalog_chunk_c{small.pk}_hnsw" in plan and f"catalog_chunk_c{big.pk}" not in plan
    assert len(scanned) == 100
    found = [pk for pk, _, _ in rows]
    assert len(found) == 100 and len(set(found) & set(exact)) >= 90  # HNSW: approximate, on its own graph


def test_a_scan_the_filters_stop_short_is_ranked_exactly(make_catalog, monkeypatch):
    monkeypatch.setattr("retrieval.search.vector.VECTOR_EXACT_MAX", 0)  # the catalog goes to the HNSW scan first
    # given: a catalog whose nearest chunks are a withheld source's, so the scan's first
    # ef_search rows are all filtered out, and a scan that stops right after them
    query = random_unit_vectors(1, seed=11)[0]
    catalog = make_catalog("kb", chunk_size=60, chunk_overlap=0)
    far_chunks(catalog, "near", 150, query, seed=13, distance=1.0)
    far_chunks(catalog, "far", 150, query, seed=12)
    withheld = set(ReferenceSource.objects.filter(catalog=catalog, slug="near").values_list("pk", flat=True))
    catalog.refresh_from_db()
    literal = "[" + ",".join(f"{x:.8f}" for x in query) + "]"

    with scans_stopping_early():
        rows = vector_search(catalog=catalog, vector=literal, limit=100, withheld=withheld)

    # then what the scan could not reach is ranked exactly, from what may be shown
    assert [pk for pk, _, _ in rows] == exact_order(catalog, query, source="far")[:100]


@pytest.mark.django_db
@pytest.mark.parametrize("exact_max", [150, 149])
def test_a_catalog_within_the_exact_limit_is_ranked_without_the_shared_index(make_catalog, monkeypatch, exact_max):
    # given: a catalog of 150 chunks with random vectors, and the limit at or just below it
    monkeypatch.setattr("retrieval.search.vector.VECTOR_EXACT_MAX", exact_max)
    catalog = make_catalog("exact", chunk_size=60, chunk_overlap=0)
    source = ReferenceSource.objects.create(catalog=catalog, slug="dots", name="Dots", kind="upload", location="d")
    text = "Alpha beta gamma delta epsilon zeta eta theta iota kappa."
    documents = [DocumentInput(f"dot-{i:03d}.md", f"Dot {i}", text, len(text)) for i in range(150)]
    prepared = prepare_chunks(catalog, documents, embedder=None)
    source_replace_rows(source, Collected(documents), prepared, random_unit_vectors(len(prepared), seed=21))
    catalog.refresh_from_db()
    assert catalog.chunk_count == 150
    query = random_unit_vectors(1, seed=22)[0]
    vectors = dict(Chunk.objects.filter(catalog=catalog).values_list("pk", "embedding"))
    exact = sorted(vectors, key=lambda pk: -float(np.dot(np.asarray(vectors[pk]), query)))[:10]
    literal = "[" + ",".join(f"{x:.8f}" for x in query) + "]"

    with CaptureQueriesContext(connection) as queries:
        rows = vector_search(catalog=catalog, vector=literal, limit=10)

    ranking = [q["sql"] for q in queries.captured_queries if "FROM catalog_chunk" in q["sql"]]
    assert len(ranking) == 1
    assert ("+ 0" in ranking[0]) is (exact_max == 150)  # sorted rows, or the HNSW scan's order
    if exact_max == 150:
        assert [pk for pk, _, _ in rows] == exact


@pytest.mark.django_db
def test_what_an_agent_may_read_of_a_mostly_withheld_catalog_is_ranked_exactly(make_catalog, monkeypatch):
    # given: a catalog over the exact limit, in three sources of 100 chunks; two withheld
    monkeypatch.setattr("retrieval.search.vector.VECTOR_EXACT_MAX", 150)
    catalog = make_catalog("governed", chunk_size=60, chunk_overlap=0)
    text = "Alpha beta gamma delta epsilon zeta eta theta iota kappa."
    sources = []
    for number in range(3):
        source = ReferenceSource.objects.create(catalog=catalog, slug=f"s{number}", name=f"S{number}", kind="upload",
                                                location=f"s{number}")
        documents = [DocumentInput(f"dot-{i:03d}.md", f"Dot {i}", text, len(text)) for i in range(100)]
        prepared = prepare_chunks(catalog, documents, embedder=None)
        source_replace_rows(source, Collected(documents), prepared, random_unit_vectors(100, seed=30 + number))
        sources.append(source)
    catalog.refresh_from_db()
    assert catalog.chunk_count == 300
    query = random_unit_vectors(1, seed=40)[0]
    literal = "[" + ",".join(f"{x:.8f}" for x in query) + "]"
    readable = dict(Chunk.objects.filter(source=sources[1]).values_list("pk", "embedding"))
    exact = sorted(readable, key=lambda pk: -float(np.dot(np.asarray(readable[pk]), query)))[:10]

    with CaptureQueriesContext(connection) as queries:
        rows = vector_search(catalog=catalog, vector=literal, limit=10, withheld={sources[0].pk, sources[2].pk})
    with CaptureQueriesContext(connection) as nothing:
        none = vector_search(catalog=catalog, vector=literal, limit=10, withheld={source.pk for source in sources})

    # then: the readable source's rows sorted, not the shared index walked past the rest
    assert [pk for pk, _, _ in rows] == exact
    ranking = [q["sql"] for q in queries.captured_queries if "ORDER BY" in q["sql"]]
    assert len(ranking) == 1 and "+ 0" in ranking[0] and "source_id = ANY" in ranking[0]
    # and with every source withheld nothing is ranked at all
    assert none == [] and not [q for q in nothing.captured_queries if "ORDER BY" in q["sql"]]
