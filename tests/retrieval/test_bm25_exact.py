"""BM25 in Postgres scores and ranks exactly as rank_bm25.BM25Okapi does over the same tokens.

The corpus goes through the real write path (chunker, analyser, ONNX embedder, Postgres);
the reference scores come from rank_bm25 over `analyze(chunk.indexed_text)` of the stored
chunks (the content, after the document title when the chunk lacks it).
"""

from __future__ import annotations

import math
import random

import pytest
from rank_bm25 import BM25Okapi

from catalog.analysis import analyze
from catalog.models import Chunk
from catalog.services import DocumentInput, source_import_documents
from retrieval import bm25
from retrieval.selectors import bm25_search

K1, B = 1.2, 0.75
TOLERANCE = 1e-6
COMMON = "platform"  # in most documents: its idf is negative and gets floored
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
    source_import_documents(catalog=catalog, slug="corpus", documents=corpus_documents())
    other = make_catalog("other")
    source_import_documents(catalog=other, slug="noise", documents=[
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


QUERIES = [
    "cache invalidation for the replica",
    "cache cache retry",  # a repeated query term counts twice
    "retry backoff jitter circuit breaker token",
    COMMON,  # only the floored term
    f"{COMMON} zebra",
    "zebra quokka",
    "Postgres schema migrations for tenants",  # stemmed forms
]


def test_scores_and_order_equal_rank_bm25_when_every_hit_is_returned(bm25_catalog):
    for query in QUERIES:
        expected = expected_scores(bm25_catalog, query)

        rows, _passes = bm25_search(catalog=bm25_catalog, query=query, limit=1000)

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


def test_a_small_limit_returns_the_exhaustive_top_k(bm25_catalog):
    for query in QUERIES:
        expected = expected_scores(bm25_catalog, query)
        for limit in (1, 2, 5):
            rows, _passes = bm25_search(catalog=bm25_catalog, query=query, limit=limit)

            # The same scores as the exhaustive top k, each on a chunk that really has it:
            # the exact top k, ties at the k-th place aside.
            best = sorted((s for s in expected.values() if s > 0), reverse=True)[:limit]
            assert [s for _, _, s in rows] == pytest.approx(best, abs=TOLERANCE), (query, limit)
            assert all(math.isclose(s, expected[pk], abs_tol=TOLERANCE) for pk, _, s in rows), (query, limit)


def test_maxscore_skips_the_common_terms_postings_and_stays_exact(bm25_catalog):
    # given: a rare, high-idf term beside the floored common one; the 2nd best chunk
    # holding "cache" outscores anything the common term alone could add
    query = f"cache {COMMON}"
    expected = expected_scores(bm25_catalog, query)

    rows, passes = bm25_search(catalog=bm25_catalog, query=query, limit=2)

    assert passes == 1, "the common term's postings should not have been walked"
    assert [s for _, _, s in rows] == pytest.approx(sorted(expected.values(), reverse=True)[:2], abs=TOLERANCE)


def test_maxscore_widens_when_a_chunk_without_the_rarest_term_can_still_win(bm25_catalog):
    # given: "kiwi" has the higher idf, so the first pass walks only its postings; the
    # best kiwi chunk scores below what "mango" alone may add, so mango must be walked
    query = "kiwi mango"
    expected = expected_scores(bm25_catalog, query)
    mango = Chunk.objects.get(document__path="mango.md").pk

    rows, passes = bm25_search(catalog=bm25_catalog, query=query, limit=1)

    assert passes == 2
    assert [(pk, s) for pk, _, s in rows] == [(mango, pytest.approx(max(expected.values()), abs=TOLERANCE))]


def test_maxscore_widens_the_essential_terms_when_the_first_pass_is_short(bm25_catalog):
    # given: the highest-bound term is in one chunk only, so a top 3 needs the others
    query = "zebra cache"
    expected = expected_scores(bm25_catalog, query)

    rows, passes = bm25_search(catalog=bm25_catalog, query=query, limit=3)

    assert passes == 2
    assert [s for _, _, s in rows] == pytest.approx(sorted(expected.values(), reverse=True)[:3], abs=TOLERANCE)
    assert all(math.isclose(s, expected[pk], abs_tol=TOLERANCE) for pk, _, s in rows)


# --- retrieval.bm25, pure -----------------------------------------------------------------

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


def test_weight_times_term_score_equals_rank_bm25_per_document():
    okapi = BM25Okapi(SMALL_CORPUS, k1=K1, b=B)
    avgdl = sum(map(len, SMALL_CORPUS)) / len(SMALL_CORPUS)

    for term in ("dog", "cat", "owl"):
        ours = [okapi.idf[term] * bm25.term_score(doc.count(term), len(doc), avgdl, K1, B) for doc in SMALL_CORPUS]
        assert ours == pytest.approx(okapi.get_scores([term]).tolist(), abs=1e-12), term


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


def _terms(*bounds: float) -> list[bm25.QueryTerm]:
    return [bm25.QueryTerm(i, b / (K1 + 1), b) for i, b in enumerate(bounds)]


@pytest.mark.parametrize(("threshold", "needed"), [
    (0.0, 4),   # nothing can be ruled out
    (1.5, 3),   # the last bound alone (0.5) is below 1.5; with the third (1.5) it is not
    (1.6, 2),   # bounds 1 + 0.5 = 1.5 < 1.6: only the first two are essential
    (4.6, 1),   # 3 + 1 + 0.5 = 4.5 < 4.6
    (9.5, 1),   # the sum 9.5 is not below 9.5
    (9.6, 0),   # no document can reach the threshold at all
])
def test_essential_split_counts_the_terms_a_candidate_must_hold(threshold, needed):
    assert bm25.essential_split(_terms(5.0, 3.0, 1.0, 0.5), threshold) == needed
