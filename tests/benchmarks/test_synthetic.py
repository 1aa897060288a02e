"""The synthetic catalog the search benchmark times: what its helpers promise the latency
figures; and its bulk load, which builds the new catalog's indexes once after its rows,
however the build ends, and never touches another catalog's."""

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
    bench_catalog_drop,
    bench_catalog_ensure,
    jitter,
    perturb_text,
    vocabulary_of,
)
from catalog.embedder import vector_literal
from catalog.models import Catalog, Chunk, Postings
from catalog.sources.documents import DocumentInput
from retrieval.search.vector import vector_search
from tests.catalog.checks import block_postings, term_postings_mismatches
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


def catalog_indexes(catalog_id: int) -> dict[str, str]:
    """The catalog's HNSW index, by name, with its definition."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE indexname = %s",
                       [f"catalog_chunk_c{catalog_id}_hnsw"])
        return dict(cursor.fetchall())


@pytest.fixture
def owner(base_catalog, as_owner):
    """As the schema's owner, which `python -m benchmarks` runs as (its vacuum needs it)."""
    return base_catalog


def ensure(base, **options):
    return bench_catalog_ensure(base=base, chunks=options.pop("chunks", 12), rebuild=options.pop("rebuild", False),
                                seed=1, sigma=0.02, log=options.pop("log", lambda line: None), **options)


def test_a_build_gets_its_indexes_after_its_rows_and_keeps_postings_exact(owner, monkeypatch):
    base_indexes = catalog_indexes(owner.pk)
    seen = []
    write = synthetic.synthetic_source_write

    def recording_write(*, catalog, **kwargs):
        seen.append((catalog_indexes(catalog.pk), catalog_indexes(owner.pk)))
        return write(catalog=catalog, **kwargs)

    monkeypatch.setattr(synthetic, "synthetic_source_write", recording_write)
    monkeypatch.setattr(synthetic, "SOURCE_ROWS", 10)  # three writes of the bulk load

    bench, build_s = ensure(owner, chunks=30)

    assert (bench.slug, bench.chunk_count) == ("bench-30", 30) and build_s is not None and build_s > 0
    assert seen == [({}, base_indexes)] * 3  # none while it loads; the base catalog's untouched
    assert len(catalog_indexes(bench.pk)) == 1 and catalog_indexes(owner.pk) == base_indexes
    assert term_postings_mismatches(bench) == []
    chunk = Chunk.objects.filter(catalog=bench).first()
    assert chunk is not None
    vector = vector_literal(np.asarray(chunk.embedding))
    assert len(vector_search(catalog=bench, vector=vector, limit=5)) == 5


def test_dropping_a_bench_catalog_removes_its_bm25_blocks(owner):
    bench, _ = ensure(owner, chunks=20)

    bench_catalog_drop(bench)

    assert not Catalog.objects.filter(slug="bench-20").exists()
    assert block_postings() == sum(len(t) for t in Postings.objects.values_list("terms", flat=True)) > 0
    assert term_postings_mismatches(owner) == []


# --- a build's indexes: built however it ends -----------------------------------------------


def test_a_build_that_fails_still_gets_its_indexes(owner, monkeypatch):
    write = synthetic.synthetic_source_write
    writes = []

    def failing_write(**kwargs):
        writes.append(write(**kwargs))
        raise RuntimeError("the build failed")

    monkeypatch.setattr(synthetic, "synthetic_source_write", failing_write)

    with pytest.raises(RuntimeError, match="the build failed"):
        ensure(owner)

    bench = Catalog.objects.get(slug="bench-12")
    assert writes == [12] and bench.chunk_count == 12
    assert len(catalog_indexes(bench.pk)) == 1


def test_a_build_stopped_by_term_still_gets_its_indexes(owner, monkeypatch):
    handler = signal.getsignal(signal.SIGTERM)

    def terminated_write(**kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # as `kill` or a service manager would
        time.sleep(30)  # the handler raises here
        raise AssertionError("TERM did not stop the build")

    monkeypatch.setattr(synthetic, "synthetic_source_write", terminated_write)

    with pytest.raises(SystemExit) as stopped:
        ensure(owner)

    assert stopped.value.code == 128 + signal.SIGTERM
    assert len(catalog_indexes(Catalog.objects.get(slug="bench-12").pk)) == 1
    assert signal.getsignal(signal.SIGTERM) == handler


def test_indexes_a_killed_build_left_missing_are_built_before_anything_else(owner):
    killed = Catalog.objects.create(slug="killed", name="Killed")
    with connection.cursor() as cursor:  # what a build killed outright (SIGKILL) leaves
        cursor.execute("SELECT lectern_catalog_indexes_defer(%s)", [killed.pk])
    lines: list[str] = []

    ensure(owner, log=lines.append)

    assert len(catalog_indexes(killed.pk)) == 1
    assert f"catalog {killed.pk} had no HNSW index or BM25 blocks (a build killed before its end?): built them" \
        in lines


def test_a_catalog_that_only_bears_a_benchmark_slug_is_never_dropped(owner):
    theirs = Catalog.objects.create(slug="bench-12", name="Release notes")

    with pytest.raises(BenchmarkError, match="not built by a benchmark"):
        ensure(owner)  # the wrong size: a benchmark would rebuild it
    with pytest.raises(BenchmarkError, match="not built by a benchmark"):
        bench_catalog_drop(theirs)

    assert Catalog.objects.filter(pk=theirs.pk, name="Release notes").exists()
    assert len(catalog_indexes(theirs.pk)) == 1
