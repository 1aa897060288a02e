"""BM25 from Postgres scores and ranks exactly as rank_bm25.BM25Okapi does over the same
tokens: the search (packed postings blocks scored in numpy) and the reference walk (every
term-major posting summed in SQL) alike.

The corpus goes through the real write path (chunker, analyser, ONNX embedder, Postgres);
the reference scores come from rank_bm25 over `analyze(chunk.indexed_text)` of the stored
chunks (the content, after the document title when the chunk lacks it).
"""

from __future__ import annotations

import math
import random

import pytest
from django.db import connection
from rank_bm25 import BM25Okapi

from catalog.analysis import analyze
from catalog.models import Catalog, Chunk, TermBlock
from catalog.sources.documents import DocumentInput
from retrieval.search import bm25, lexical
from retrieval.search.lexical import bm25_scores, bm25_search, bm25_terms, bm25_walk
from tests.factories import import_documents

K1, B = 1.2, 0.75
TOLERANCE = 1e-6
COMMON = "platform"  # in most documents: its idf is negative and gets floored
UBIQUITOUS = "doc"  # in every titled chunk's heading ("Doc N"): 34 of 42 chunks
VOCABULARY = ("cache retry backoff jitter circuit breaker token secret latency queue worker shard replica "
              "index vector lexical ranking fusion chunk embedding postgres schema migration tenant").split()


def _document(rng: random.Random, number: int) -> DocumentInput:
    sentences = []
    for _ in range(rng.randint(1, 6)):
        words = [rng.choice(VOCABULARY) for _ in range(rng.randint(2, 9))]  # repeats happen
        sentences.append(" ".join(words).capitalize() + ".")
    if rng.random() < 0.8:
        sentences[rng.randrange(len(sentences))] += f" The {COMMON} helps."
    text = " ".join(sentences)
    return DocumentInput(f"doc-{number:02d}.md", f"Doc {number}", text, len(text.encode()))


def corpus_documents() -> list[DocumentInput]:
    rng = random.Random(20240611)
    documents = [_document(rng, n) for n in range(27)]
    documents += [
        _text("heavy-cache.md", "Cache cache cache cache. The platform cache."),
        _text("stop-words.md", "It was not to be. And it is."),  # analyses to no terms at all
        _text("zebra.md", "Zebra quokka narwhal."),  # terms found in this chunk only
        # "kiwi" (2 chunks) outranks "mango" (3 chunks) in idf, but only in long chunks:
        # the short, mango-heavy chunk wins a query for both.
        _text("kiwi-1.md", "Kiwi tenant schema migration replica shard worker queue latency secret token "
                           "breaker circuit jitter backoff retry index vector lexical ranking platform."),
        _text("kiwi-2.md", "Kiwi postgres embedding chunk fusion ranking lexical vector index replica shard "
                           "worker queue latency secret token breaker circuit jitter backoff retry platform."),
        _text("mango.md", "Mango mango mango."),
        _text("mango-2.md", "Mango schema platform."),
        _text("mango-3.md", "Mango replica platform."),
    ]
    return documents


def _text(path: str, text: str) -> DocumentInput:
    """A document without a title: its chunks are indexed as their content alone."""
    return DocumentInput(path, "", text, len(text.encode()))


@pytest.fixture
def bm25_catalog(make_catalog):
    """~40 chunks (chunk size 200 splits the longer documents) and a second catalog
    whose documents must not influence the first one's statistics."""
    catalog = make_catalog("bm25", chunk_size=200, chunk_overlap=30)
    import_documents(catalog=catalog, slug="corpus", documents=corpus_documents())
    other = make_catalog("other")
    import_documents(catalog=other, slug="noise", documents=[
        _text(f"n{i}.md", "Cache zebra platform cache zebra.") for i in range(3)
    ])
    catalog.refresh_from_db()
    return catalog


def reference(catalog) -> tuple[list[int], BM25Okapi]:
    chunks = list(Chunk.objects.filter(catalog=catalog).order_by("pk"))
    return [c.pk for c in chunks], BM25Okapi([analyze(c.indexed_text) for c in chunks], k1=K1, b=B)


def expected_scores(catalog, query: str) -> dict[int, float]:
    pks, okapi = reference(catalog)
    return dict(zip(pks, okapi.get_scores(analyze(query)).tolist(), strict=True))


def test_corpus_has_a_floored_term_an_empty_chunk_and_multi_chunk_documents(bm25_catalog):
    # Preconditions the other tests rely on; without them they would prove less.
    pks, okapi = reference(bm25_catalog)
    common = analyze(COMMON)[0]
    df = sum(1 for doc in okapi.doc_freqs if common in doc)
    assert df > len(pks) / 2, "the common term must be in more than half of the chunks"
    assert okapi.idf[common] == pytest.approx(bm25.EPSILON * okapi.average_idf)
    assert 0 in okapi.doc_len
    headed = Chunk.objects.filter(catalog=bm25_catalog).exclude(heading="")
    assert headed.exists() and Chunk.objects.filter(catalog=bm25_catalog, heading="").exists()
    assert 35 <= len(pks) < 80
    assert bm25_catalog.chunk_count == len(pks)


def _blocks(catalog, query: str, limit: int, withheld=()) -> list:
    return bm25_search(catalog=catalog, query=query, limit=limit, withheld=withheld)[0]


def _walk(catalog, query: str, limit: int, withheld=()) -> list:
    return bm25_walk(catalog, bm25_terms(catalog, query), limit, withheld)


# The search, and the reference walk with its terms merged range by range (up to
# MERGED_TERMS_MAX) or joined (0: past it).
ENGINES = [pytest.param((_blocks, None), id="blocks"), pytest.param((_walk, lexical.MERGED_TERMS_MAX), id="merged"),
           pytest.param((_walk, 0), id="joined")]


@pytest.fixture(params=ENGINES)
def engine(request, monkeypatch):
    run, merged_terms_max = request.param
    if merged_terms_max is not None:
        monkeypatch.setattr(lexical, "MERGED_TERMS_MAX", merged_terms_max)
    return run


QUERIES = [
    "cache invalidation for the replica",
    "cache cache retry",  # a repeated query term counts twice
    "retry backoff jitter circuit breaker token",
    COMMON,  # only the floored term
    f"{COMMON} zebra",
    "zebra quokka",
    "Postgres schema migrations for tenants",  # stemmed forms
]


def test_scores_and_order_equal_rank_bm25_when_every_hit_is_returned(bm25_catalog, engine):
    for query in QUERIES:
        expected = expected_scores(bm25_catalog, query)

        rows = engine(bm25_catalog, query, 1000)

        # A chunk holding only a term in exactly half the chunks (idf 0) may come back
        # with score 0; rank_bm25 scores it 0 as well. Every positive score comes back.
        returned = {pk: score for pk, _doc, score in rows}
        positive = {pk for pk, s in expected.items() if s > TOLERANCE}
        assert {pk for pk, s in returned.items() if s > TOLERANCE} == positive, query
        for pk, score in returned.items():
            assert math.isclose(score, expected[pk], abs_tol=TOLERANCE), (query, pk)
        scores = [score for _pk, _doc, score in rows]
        assert all(a >= b - TOLERANCE for a, b in zip(scores, scores[1:], strict=False)), f"{query}: not ranked"
        assert len(returned) == len(rows), f"{query}: a chunk returned twice"


def test_rows_carry_the_document_of_each_chunk(bm25_catalog):
    rows, _ = bm25_search(catalog=bm25_catalog, query="cache", limit=1000)

    documents = dict(Chunk.objects.filter(pk__in=[r[0] for r in rows]).values_list("pk", "document_id"))
    assert rows and all(documents[pk] == doc for pk, doc, _ in rows)


def test_queries_with_no_known_term_return_nothing(bm25_catalog):
    for query in ("unicorn xylophone", "the and of it", "", "   ", "!!"):
        assert all(s == 0 for s in expected_scores(bm25_catalog, query).values())

        assert bm25_search(catalog=bm25_catalog, query=query, limit=10) == ([], 0), query


def test_a_small_limit_returns_the_exhaustive_top_k(bm25_catalog, engine):
    for query in QUERIES:
        expected = expected_scores(bm25_catalog, query)
        for limit in (1, 2, 5):
            rows = engine(bm25_catalog, query, limit)

            # The same scores as the exhaustive top k, each on a chunk that really has it:
            # the exact top k, ties at the k-th place aside.
            best = sorted((s for s in expected.values() if s > 0), reverse=True)[:limit]
            assert [s for _, _, s in rows] == pytest.approx(best, abs=TOLERANCE), (query, limit)
            assert all(math.isclose(s, expected[pk], abs_tol=TOLERANCE) for pk, _, s in rows), (query, limit)


def test_a_passage_scores_exactly(bm25_catalog, engine):
    # given: a query made of every chunk's text (a pasted passage: every term, every chunk scored)
    query = " ".join(Chunk.objects.filter(catalog=bm25_catalog).order_by("pk").values_list("content", flat=True))
    assert len(set(analyze(query))) > 8
    expected = expected_scores(bm25_catalog, query)

    everything = engine(bm25_catalog, query, 1000)
    top = {limit: engine(bm25_catalog, query, limit) for limit in (1, 2, 5)}

    # then: rank_bm25's scores (repeated terms weigh as often as they occur) and order
    assert {pk for pk, _, s in everything if s > TOLERANCE} == {pk for pk, s in expected.items() if s > TOLERANCE}
    assert all(math.isclose(score, expected[pk], abs_tol=TOLERANCE) for pk, _, score in everything)
    for limit, rows in top.items():
        assert [s for _, _, s in rows] == pytest.approx(sorted(expected.values(), reverse=True)[:limit],
                                                         abs=TOLERANCE)
        assert rows == everything[:limit]


def rows_read(relation: str) -> int:
    """Rows of `relation` read so far in this transaction, by scans and index fetches."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables "
                       "WHERE relid = %s::regclass", [relation])
        return cursor.fetchone()[0]


def postings_read(catalog) -> int:
    """Forward rows (catalog_postings) of the catalog read so far in this transaction."""
    return rows_read(f"catalog_postings_c{catalog.pk}")


def test_the_search_reads_packed_blocks_not_one_index_entry_per_posting(bm25_catalog):
    # given: a query whose terms hold most of the catalog's postings
    query = f"{UBIQUITOUS} {COMMON} cache retry"
    with connection.cursor() as cursor:
        # the plan of any catalog of size: on a few dozen rows (how many depends on what
        # ran before and on autovacuum's statistics) the planner may scan the table whole
        cursor.execute("SET LOCAL enable_seqscan = off")
    before, blocks_before = postings_read(bm25_catalog), rows_read("catalog_termblock")

    rows, reads = bm25_search(catalog=bm25_catalog, query=query, limit=5)

    # then: the exact top 5, from the terms' blocks alone (fewer rows than postings), no
    # forward row read
    held = TermBlock.objects.filter(catalog=bm25_catalog, term_id__in=[t.term_id for t in bm25_terms(
        bm25_catalog, query)])
    assert reads == 1 and postings_read(bm25_catalog) == before
    assert rows_read("catalog_termblock") - blocks_before == held.count() < sum(held.values_list("postings", flat=True))
    expected = expected_scores(bm25_catalog, query)
    assert [s for _, _, s in rows] == pytest.approx(sorted(expected.values(), reverse=True)[:5], abs=TOLERANCE)
    assert rows == _walk(bm25_catalog, query, 5)


@pytest.mark.parametrize(("query", "limit"), [
    (f"mango {UBIQUITOUS}", 3),
    (f"kiwi {UBIQUITOUS} {UBIQUITOUS} {UBIQUITOUS} {UBIQUITOUS}", 2),
    (f"zebra {UBIQUITOUS}", 2),  # the best two zebra chunks are withheld: the rest hold only "doc"
    ("mango schema", 3),
    ("mango", 1),
])
def test_withheld_sources_are_left_out_before_the_top_k(bm25_catalog, engine, query, limit):
    # given: a second source whose chunks are the best mango, kiwi and zebra chunks of all
    vault = import_documents(catalog=bm25_catalog, slug="vault", documents=[
        _text("vault.md", "Mango mango mango mango."), _text("vault-2.md", "Kiwi kiwi."),
        _text("vault-3.md", "Zebra zebra quokka."), _text("vault-4.md", "Zebra narwhal zebra.")])
    bm25_catalog.refresh_from_db()
    vault_chunks = set(Chunk.objects.filter(source=vault).values_list("pk", flat=True))
    expected = expected_scores(bm25_catalog, query)
    assert max(expected, key=lambda pk: expected[pk]) in vault_chunks
    allowed = sorted((s for pk, s in expected.items() if s > 0 and pk not in vault_chunks), reverse=True)

    rows = engine(bm25_catalog, query, limit, [vault.pk])

    assert not {pk for pk, _, _ in rows} & vault_chunks
    assert [s for _, _, s in rows] == pytest.approx(allowed[:limit], abs=TOLERANCE)
    assert all(math.isclose(s, expected[pk], abs_tol=TOLERANCE) for pk, _, s in rows)
    assert rows == _walk(bm25_catalog, query, limit, [vault.pk])


def test_scores_for_given_chunks_equal_the_searched_scores_bit_for_bit(bm25_catalog):
    # given: the hits of a search, and a chunk holding no query term
    query = "cache retry jitter"
    rows, _ = bm25_search(catalog=bm25_catalog, query=query, limit=1000)
    stranger = Chunk.objects.get(document__path="zebra.md").pk

    scores = bm25_scores(bm25_catalog, bm25_terms(bm25_catalog, query), [pk for pk, _, _ in rows] + [stranger])

    assert {pk: scores[pk] for pk, _, _ in rows} == {pk: score for pk, _, score in rows}
    assert scores.get(stranger, 0.0) == 0.0


def test_chunks_with_equal_scores_tie_exactly_and_rank_by_id(bm25_catalog):
    # given: the "other" catalog holds three identical chunks
    other = Catalog.objects.get(slug="other")

    rows, _ = bm25_search(catalog=other, query="cache zebra platform", limit=10)

    assert len(rows) == 3
    assert len({score for _, _, score in rows}) == 1, "equal sums must be bit-equal"
    assert [pk for pk, _, _ in rows] == sorted(pk for pk, _, _ in rows)


# --- retrieval.search.bm25, pure----------------------------------------------------------

SMALL_CORPUS = [
    ["cat", "dog", "cat"], ["cat", "fish"], ["cat", "bird", "dog"], ["cat"], ["owl", "dog", "dog", "dog"],
]


def test_idf_floors_negative_values_exactly_as_rank_bm25():
    okapi = BM25Okapi(SMALL_CORPUS, k1=K1, b=B)
    n = len(SMALL_CORPUS)
    df = {t: sum(t in doc for doc in SMALL_CORPUS) for t in okapi.idf}
    average = sum(bm25.raw_idf(n, d) for d in df.values()) / len(df)

    assert average == pytest.approx(okapi.average_idf)
    assert bm25.raw_idf(n, df["cat"]) < 0, "cat (in 4 of 5 documents) must have a negative raw idf"
    for term, value in okapi.idf.items():
        assert bm25.idf(n, df[term], average) == pytest.approx(value, abs=1e-12), term
    assert bm25.idf(n, df["cat"], average) == pytest.approx(bm25.EPSILON * average)


def test_idf_of_a_term_in_exactly_half_the_documents_is_zero_not_floored():
    assert bm25.raw_idf(4, 2) == 0.0
    assert bm25.idf(4, 2, average_idf=3.0) == 0.0


def test_query_terms_weigh_repeats_drop_unknown_terms_and_sort_by_bound():
    stats = {"cat": (1, 4), "dog": (2, 3), "owl": (3, 1)}
    n, average = 5, 0.2

    terms = bm25.query_terms(["dog", "owl", "dog", "unicorn", "cat"], stats, n_docs=n, average_idf=average, k1=K1)

    by_id = {t.term_id: t for t in terms}
    assert set(by_id) == {1, 2, 3}
    assert by_id[3].weight == pytest.approx(math.log(4.5 / 1.5))  # ln((N - df + .5) / (df + .5))
    assert by_id[2].weight == pytest.approx(2 * bm25.EPSILON * average)  # df 3 of 5: floored, counted twice
    assert by_id[1].weight == pytest.approx(bm25.EPSILON * average)  # floored
    assert all(t.upper_bound == pytest.approx(max(t.weight, 0) * (K1 + 1)) for t in terms)
    assert [t.upper_bound for t in terms] == sorted((t.upper_bound for t in terms), reverse=True)
