"""The pages benchmark runs end to end on a small NFCorpus catalog: every page it names
answers 200 to a person holding both roles, with its queries counted (skipped where
../shared/datasets is absent)."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from approvals.models import ApprovalRequest
from benchmarks.commands import command_load
from benchmarks.pages import pages_benchmark
from tests.conftest import DATASETS

pytestmark = pytest.mark.django_db
DATASET = DATASETS / "nfcorpus"


@pytest.mark.dataset
@pytest.mark.skipif(not (DATASET / "corpus.jsonl").is_file(), reason="../shared/datasets/nfcorpus is not present")
def test_every_page_is_timed_with_its_query_count():
    results = pages_benchmark(dataset=DATASET, rounds=2, warmup=0, sources=3, documents=6, log=lambda line: None)

    assert results["sources"] == 3 and results["chunks"] > 0 and results["rounds"] == 2
    assert results["requests"] == ApprovalRequest.objects.count() == 30  # ten agents, three sources
    names = [page["page"] for page in results["pages"]]
    assert {"catalogs", "catalog", "catalog's runs", "index run", "source", "source, edit", "agents", "agent", "status",
            "playground, search as an agent", "traces", "trace", "approvals queue", "approval request", "audit log",
            "evaluations", "evaluation run", "evaluation, two modes compared"} <= set(names)
    for page in results["pages"]:
        assert page["status"] == 200 and page["queries"] > 0, page
        assert 0 < page["p50_ms"] <= page["max_ms"]


@pytest.mark.parametrize("args", [["--rounds", "0"], ["--warmup", "-1"]])
def test_bad_arguments_are_one_line_errors(args, tmp_path):
    with pytest.raises(CommandError, match="--rounds"):
        call_command(command_load("bench_pages"), "--dataset", str(tmp_path), *args)
