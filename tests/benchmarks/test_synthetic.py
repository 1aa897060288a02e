"""The synthetic catalog the search benchmark times: what its helpers promise the latency
figures; and the shared HNSW index, which a build drops only when asked and always puts back."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest
from django.db import connection

from benchmarks import synthetic
from benchmarks.common import BenchmarkError
from benchmarks.synthetic import (
    HNSW_INDEX,
    bench_catalog_drop,
    bench_catalog_ensure,
    hnsw_drop,
    hnsw_rebuild,
    jitter,
    perturb_text,
    vocabulary_of,
)
from catalog.embedder import vector_literal
from catalog.models import Catalog, Chunk, Postings, TermPosting
from catalog.sources.documents import DocumentInput
from retrieval.search.vector import vector_search
from tests.catalog.checks import term_postings_mismatches
from tests.factories import import_documents

TEXT = "Statin use after diagnosis of breast cancer was associated with lower breast cancer mortality in Finland"


def test_perturbed_text_drops_and_swaps_words_and_respects_the_length_cap():
    rng = np.random.default_rng(1)
    vocabulary = ["alpha", "beta", "gamma"]

    out = perturb_text(" ".join([TEXT] * 20), rng, vocabulary, drop=0.2, swaps=3, max_chars=120)

    assert 0 < len(out) <= 120
    assert not out.endswith(" ")
    assert set(out.split()) - set(TEXT.split()) <= set(vocabulary)


def test_perturbation_is_seeded():
    vocabulary = vocabulary_of([TEXT])

    first = perturb_text(TEXT, np.random.default_rng(7), vocabulary)
    again = perturb_text(TEXT, np.random.default_rng(7), vocabulary)

    assert first == again


def test_jittered_vectors_are_unit_length_and_stay_near_their_origin():
    rng = np.random.default_rng(3)
    base = rng.normal(size=(50, 384)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)

    near = jitter(base, rng, sigma=0.02)

    assert np.allclose(np.linalg.norm(near, axis=1), 1.0, atol=1e-5)
    cosines = (near * base).sum(axis=1)
    assert cosines.min() > 0.85  # clustered like the real vectors, not random


def test_vocabulary_is_sorted_plain_words():
    # "x2" has a digit and "Alpha," punctuation: neither is a plain word
    assert vocabulary_of(["b-cell x2 Alpha, the", "alpha beta Gamma"]) == ["Gamma", "alpha", "b-cell", "beta", "the"]


# --- the synthetic catalog in Postgres ------------------------------------------------------


@pytest.fixture
def base_catalog(transactional_db):
    """A small indexed base catalog, outside a test transaction: the build vacuums."""
    catalog = Catalog.objects.create(slug="base", name="Base")
    documents = [DocumentInput(f"d{i}.md", "", f"{TEXT} {word}.", 120) for i, word in
                 enumerate(["retry", "cache", "quokka", "narwhal", "ledger", "harbor"])]
    import_documents(catalog=catalog, slug="corpus", documents=documents)
    catalog.refresh_from_db()
    return catalog


def hnsw_definition() -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [HNSW_INDEX])
        row = cursor.fetchone()
        return row[0] if row else None


def test_a_build_with_the_hnsw_index_deferred_restores_it_and_keeps_postings_exact(base_catalog, hnsw_kept):
    bench, build_s = bench_catalog_ensure(base=base_catalog, chunks=30, rebuild=False, seed=1, sigma=0.02,
                                          log=lambda line: None, defer_hnsw=True)

    assert (bench.slug, bench.chunk_count) == ("bench-30", 30) and build_s is not None and build_s > 0
    assert hnsw_definition() == hnsw_kept
    assert term_postings_mismatches(bench) == []
    chunk = Chunk.objects.filter(catalog=bench).first()
    assert chunk is not None
    vector = vector_literal(np.asarray(chunk.embedding))
    assert len(vector_search(catalog=bench, vector=vector, limit=5)) == 5


def test_dropping_a_bench_catalog_removes_its_term_postings(base_catalog):
    bench, _ = bench_catalog_ensure(base=base_catalog, chunks=20, rebuild=False, seed=1, sigma=0.02,
                                    log=lambda line: None)

    bench_catalog_drop(bench)

    assert not Catalog.objects.filter(slug="bench-20").exists()
    assert TermPosting.objects.count() == sum(len(t) for t in Postings.objects.values_list("terms", flat=True)) > 0
    assert term_postings_mismatches(base_catalog) == []


# --- the shared HNSW index: dropped only when asked, always put back ------------------------


@pytest.fixture
def hnsw_kept(base_catalog, as_owner):
    """The index's definition before the test; the index is built again after it if a
    failing test left it missing, so that no other test runs without it. As the schema's
    owner, which a build that drops the index runs as (the app's role may not)."""
    before = hnsw_definition()
    assert before is not None
    yield before
    hnsw_rebuild()


def ensure(base, **options):
    return bench_catalog_ensure(base=base, chunks=options.pop("chunks", 12), rebuild=options.pop("rebuild", False),
                                seed=1, sigma=0.02, log=options.pop("log", lambda line: None), **options)


def test_a_deferred_build_that_fails_puts_the_index_back(base_catalog, hnsw_kept, monkeypatch):
    during = []

    def failing_build(**kwargs):
        during.append(hnsw_definition())
        raise RuntimeError("the build failed")

    monkeypatch.setattr(synthetic, "bench_catalog_build", failing_build)

    with pytest.raises(RuntimeError, match="the build failed"):
        ensure(base_catalog, defer_hnsw=True)

    assert during == [None]  # dropped for the build
    assert hnsw_definition() == hnsw_kept


def test_a_deferred_build_stopped_by_term_puts_the_index_back(base_catalog, hnsw_kept, monkeypatch):
    handler = signal.getsignal(signal.SIGTERM)

    def terminated_build(**kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # as `kill` or a service manager would
        time.sleep(30)  # the handler raises here
        raise AssertionError("TERM did not stop the build")

    monkeypatch.setattr(synthetic, "bench_catalog_build", terminated_build)

    with pytest.raises(SystemExit) as stopped:
        ensure(base_catalog, defer_hnsw=True)

    assert stopped.value.code == 128 + signal.SIGTERM
    assert hnsw_definition() == hnsw_kept
    assert signal.getsignal(signal.SIGTERM) == handler


def test_deferring_is_refused_while_another_session_uses_the_database(base_catalog, hnsw_kept, app_credentials):
    existing, _ = ensure(base_catalog)

    other = connection.copy()  # a second session, as a server would hold: the app's role, not the owner's
    other.settings_dict.update(app_credentials)
    other.ensure_connection()
    try:
        with pytest.raises(BenchmarkError, match=r"other session\(s\) use this database"):
            ensure(base_catalog, rebuild=True, defer_hnsw=True)
    finally:
        other.close()

    assert hnsw_definition() == hnsw_kept
    assert Catalog.objects.get(slug="bench-12").pk == existing.pk  # not dropped either


def test_an_index_a_killed_build_left_missing_is_built_again_before_anything_else(base_catalog, hnsw_kept):
    hnsw_drop()  # what a deferred build killed outright (SIGKILL) leaves
    lines: list[str] = []

    ensure(base_catalog, log=lines.append)

    assert hnsw_definition() == hnsw_kept
    assert any(f"the HNSW index {HNSW_INDEX} was missing" in line for line in lines)


def test_a_catalog_that_only_bears_a_benchmark_slug_is_never_dropped(base_catalog, hnsw_kept):
    theirs = Catalog.objects.create(slug="bench-12", name="Release notes")

    with pytest.raises(BenchmarkError, match="not built by a benchmark"):
        ensure(base_catalog, defer_hnsw=True)  # the wrong size: a benchmark would rebuild it
    with pytest.raises(BenchmarkError, match="not built by a benchmark"):
        bench_catalog_drop(theirs)

    assert Catalog.objects.filter(pk=theirs.pk, name="Release notes").exists()
    assert hnsw_definition() == hnsw_kept
