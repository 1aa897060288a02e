"""The enrichment benchmark runs end to end on a small NFCorpus catalog and reports
what docs/benchmarks.md quotes (skipped where ../shared/datasets is absent)."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from benchmarks.commands import command_load
from benchmarks.enrich import AGENT, enrich_benchmark
from retrieval.enrichment import pipeline
from retrieval.models import Trace
from tests.conftest import DATASETS

pytestmark = pytest.mark.django_db
DATASET = DATASETS / "nfcorpus"


@pytest.mark.dataset
@pytest.mark.skipif(not (DATASET / "corpus.jsonl").is_file(), reason="../shared/datasets/nfcorpus is not present")
def test_benchmark_reports_prompts_and_each_head_length_with_its_recall():
    results = enrich_benchmark(sources=12, dataset=DATASET, calls=6, warmup=1, tool_tokens=[16, 32], repeat=2,
                               log=lambda line: None)

    assert results["sources"] == 12 and results["rounds"] == 2
    assert results["prompt"]["calls"] == 6 and len(results["prompt"]["p95_ms_by_round"]) == 2
    for tokens in (16, 32):
        run = results["tool_result_4kb"][tokens]
        assert 0 < run["p50_ms"] <= run["p95_ms"]
        assert run["embed_p50_ms"] > 0
        recall = run["semantic_self_recall"]
        assert recall["passages"] > 0 and 0 <= recall["recall_at_1"] <= recall["recall_at_5"] <= 1
    # each head length reached the pipeline, and the default came back after the sweep
    steps = Trace.objects.filter(caller=AGENT, surface="tool_result").values_list("steps", flat=True)
    assert {step["embedded_tokens"] for trace in steps for step in trace if "embedded_tokens" in step} == {16, 32}
    assert pipeline.ENRICH_TOOL_EMBED_TOKENS == 48


@pytest.mark.parametrize("args", [["--tool-tokens", "64,abc"], ["--tool-tokens", "4"], ["--repeat", "0"]])
def test_bad_arguments_are_one_line_errors(args, tmp_path):
    with pytest.raises(CommandError, match="--tool-tokens|--repeat"):
        call_command(command_load("bench_enrich"), "--dataset", str(tmp_path), *args)
