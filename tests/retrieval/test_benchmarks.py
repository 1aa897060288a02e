"""The benchmark's synthetic-corpus helpers: what they promise the latency figures."""

from __future__ import annotations

import numpy as np

from retrieval.benchmarks import LatencyReport, SearchBenchmark, jitter, median_report, perturb_text, vocabulary_of

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


def report(p95: float, mode: str = "bm25", chunks: int = 100_000) -> LatencyReport:
    return LatencyReport("bench", chunks, mode, 323, p50_ms=p95 / 4, p95_ms=p95, mean_ms=p95 / 2)


def test_repeated_runs_report_their_medians_and_every_p95():
    merged = median_report([report(30.0), report(90.0), report(40.0)])

    assert merged.p95_ms == 40.0
    assert merged.p50_ms == 10.0
    assert merged.p95_runs == [30.0, 90.0, 40.0]


def test_only_the_synthetic_catalog_is_held_to_the_targets():
    bench = SearchBenchmark(chunks=100_000, build_s=None, reports=[
        report(25.0), report(14.0, "vector"), report(99.0, chunks=8891), report(39.0, "hybrid")])

    assert [(r.mode, r.p95_ms) for r in bench.missed()] == [("bm25", 25.0)]
