"""bench_conversation on a small slice of NFCorpus: every case timed, the conversations
as long as asked, the memory world as large as asked."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from benchmarks.commands import command_load
from benchmarks.conversation_memory import MEMORY_AGENT, ONE_USER, conversation_benchmark
from retrieval.models import MemoryEntry
from tests.benchmarks.test_pages import DATASET

pytestmark = pytest.mark.django_db


@pytest.mark.dataset
@pytest.mark.skipif(not (DATASET / "corpus.jsonl").is_file(), reason="../shared/datasets/nfcorpus is not present")
def test_every_case_is_timed():
    results = conversation_benchmark(dataset=DATASET, rounds=3, log=lambda line: None, lengths=(6, 12), users=4,
                                     per_user=5, distinct=30, sources=3, documents=6)

    assert [case["messages"] for case in results["conversations"]] == [6, 12]
    for case in results["conversations"]:
        assert 0 < case["p50_ms"] <= case["max_ms"] and case["tokens_before"] > 0 and case["tokens_freed"] > 0
    assert [case["case"] for case in results["memory"]] == [
        "20 memories of one end user", "one of 4 end users with 5 memories each"]
    assert all(case["hits_mean"] > 0 for case in results["memory"])
    assert MemoryEntry.objects.filter(agent__name=MEMORY_AGENT, user_id=ONE_USER).count() == 20
    assert MemoryEntry.objects.filter(agent__name=MEMORY_AGENT).exclude(user_id=ONE_USER).count() == 20


def test_bad_arguments_are_one_line_errors(tmp_path):
    with pytest.raises(CommandError, match="--rounds"):
        call_command(command_load("bench_conversation"), "--dataset", str(tmp_path), "--rounds", "0")
