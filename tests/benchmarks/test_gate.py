"""The gate benchmark runs end to end on a small NFCorpus catalog: ten agents approved for
every source, the gate turned on and off through the policy services, the same answers
both ways, and the gate left off (skipped where ../shared/datasets is absent)."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from approvals.models import ApprovalPolicy, ApprovalRequest
from benchmarks.commands import command_load
from benchmarks.gate import AGENT, approvals_ensure, gate_benchmark
from catalog.models import Agent, AuditEntry, Catalog
from tests.conftest import DATASETS

pytestmark = pytest.mark.django_db
DATASET = DATASETS / "nfcorpus"
needs_dataset = pytest.mark.skipif(not (DATASET / "corpus.jsonl").is_file(),
                                   reason="../shared/datasets/nfcorpus is not present")


@pytest.mark.dataset
@needs_dataset
def test_benchmark_compares_every_path_with_the_gate_on_and_off():
    results = gate_benchmark(sources=6, dataset=DATASET, calls=4, warmup=1, repeat=1, log=lambda line: None)

    assert results["sources"] == 6 and results["agents"] == 10 and results["approvals"] == 60
    assert results["rounds"] == 4 and results["same_answers"]
    assert set(results["paths"]) == {"enrich prompt", "enrich tool result", "search bm25", "search vector",
                                     "search hybrid"}
    for figures in results["paths"].values():
        assert len(figures["p95_by_round"]["off"]) == len(figures["p95_by_round"]["on"]) == 2
        assert 0 < figures["on"]["p50_ms"] <= figures["on"]["p95_ms"]
    catalog = Catalog.objects.get(slug="bench-enrich-6")
    assert not ApprovalPolicy.objects.filter(catalog=catalog).exists()  # left off
    actions = list(AuditEntry.objects.filter(action__startswith="policy").order_by("seq")
                   .values_list("action", flat=True))
    assert actions == ["policy.created", "policy.deleted"]  # off, on, on, off: through the audited service


@pytest.mark.dataset
@needs_dataset
def test_approvals_are_rebuilt_when_one_no_longer_covers_the_content():
    gate_benchmark(sources=3, dataset=DATASET, calls=2, warmup=0, repeat=1, log=lambda line: None)
    catalog = Catalog.objects.get(slug="bench-enrich-3")
    agents = list(Agent.objects.filter(name__startswith="bench-gate-"))
    stale = ApprovalRequest.objects.filter(agent__name=AGENT).earliest("pk")
    ApprovalRequest.objects.filter(pk=stale.pk).update(fingerprint="an-older-fingerprint")

    assert approvals_ensure(catalog=catalog, agents=agents, log=lambda line: None) == 30

    requests = ApprovalRequest.objects.filter(source__catalog=catalog)
    assert requests.count() == 30
    assert all(r.fingerprint == r.source.fingerprint for r in requests.select_related("source"))


@pytest.mark.parametrize("args", [["--repeat", "0"], ["--sources", "0"], ["--warmup", "-1"]])
def test_bad_arguments_are_one_line_errors(args, tmp_path):
    with pytest.raises(CommandError, match="must be positive"):
        call_command(command_load("bench_gate"), "--dataset", str(tmp_path), *args)
