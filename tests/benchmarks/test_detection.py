"""The tag detection benchmark's synthetic data, and what its report holds (timings are
`python -m benchmarks bench_detect`'s, never a test's)."""

from __future__ import annotations

from benchmarks.detection import detection_benchmark, synthetic_tags, synthetic_text
from catalog.tag_keys import tag_key


def test_the_synthetic_vocabulary_and_text_are_deterministic_and_sized():
    tags = synthetic_tags(300, seed=7)

    assert tags == synthetic_tags(300, seed=7)
    assert len({tag_key(tag) for tag in tags}) == 300
    text = synthetic_text(tags, size_bytes=4096, seed=7)
    assert 4093 <= len(text.encode()) <= 4096
    assert text == synthetic_text(tags, size_bytes=4096, seed=7)


def test_detection_benchmark_reports_both_implementations():
    outcome = detection_benchmark(tags=200, text_bytes=1024, repeat=3, baseline_repeat=1, seed=1)

    assert (outcome.tags, outcome.keys, outcome.repeat, outcome.baseline_repeat) == (200, 200, 3, 1)
    assert outcome.hits > 0 and outcome.matcher_p50_ms > 0 and outcome.loop_p50_ms > 0
    assert set(outcome.as_dict()) >= {"ratio", "missed", "matcher_p50_ms", "loop_p50_ms", "build_ms"}
