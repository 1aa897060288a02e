"""`python -m benchmarks bench_query`: passages built from a corpus, and what the report holds."""

from __future__ import annotations

import json

from benchmarks.long_queries import MODES, corpus_passages, query_benchmark
from retrieval.search import lexical

DOCUMENTS = {  # the ops catalog's documents (tests/conftest.py), as a BEIR corpus
    "circuit-breaker.md": "A circuit breaker stops calls to a failing dependency. After repeated failures it opens; "
                          "after a cool-down it lets one trial request through.",
    "retries.md": "Retry transient failures with exponential backoff and jitter. Cap the number of attempts.",
    "caching.md": "Cache responses with a time to live. Invalidate the cache on every write to the underlying record.",
    "logging.md": "Log in JSON. Never log secrets or tokens in clear text.",
}


def write_corpus(path) -> None:
    path.write_text("".join(json.dumps({"_id": key, "title": "", "text": text}) + "\n"
                            for key, text in DOCUMENTS.items()))


def test_passages_are_consecutive_documents_cut_at_a_word(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    write_corpus(corpus)

    passages = corpus_passages(corpus, chars=150, count=5, seed=1)

    for passage in passages:
        assert 0 < len(passage.text) <= 150 and not passage.text.endswith(" ")
        assert passage.documents and passage.documents <= set(DOCUMENTS)
        assert passage.text.startswith(tuple(DOCUMENTS[key][:20] for key in passage.documents))
    assert corpus_passages(corpus, chars=150, count=5, seed=1) == passages  # seeded


def test_the_report_covers_every_mode_and_restores_the_merge_threshold(indexed_catalog, tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    write_corpus(corpus)
    before = lexical.MERGED_TERMS_MAX

    report = query_benchmark(catalog=indexed_catalog, corpus=corpus, chars=400, passages=3, seed=2, merged_max=0,
                             warmup=1, log=lambda line: None)

    assert [m.mode for m in report.modes] == list(MODES)
    assert all(m.queries == 3 and m.p50_ms > 0 and 0 <= m.found <= 1 for m in report.modes)
    assert report.merged_terms_max == 0 and lexical.MERGED_TERMS_MAX == before
    assert report.mean_terms > 0 and 0 < report.vector_chars <= report.mean_chars
    assert set(report.stages_p50_ms) == {"analyse+terms", "bm25 sql (depth 100)", "embed"}
