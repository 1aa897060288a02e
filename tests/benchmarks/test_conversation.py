"""The conversation recall benchmark on a tiny slice of NFCorpus: conversations made the
same way every time, of 3-5 test queries on different topics padded with chatter, both
approaches measured over the real service and index (skipped where
../shared/datasets/nfcorpus is absent)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from benchmarks.commands import command_load
from benchmarks.conversation import REPLIES, SMALL_TALK, conversation_recall, conversations_make, judged_queries
from catalog.models import Catalog
from tests.conftest import DATASETS

DATASET = DATASETS / "nfcorpus"
needs_dataset = pytest.mark.skipif(not (DATASET / "corpus.jsonl").is_file(),
                                   reason="../shared/datasets/nfcorpus is not present")


@pytest.mark.dataset
@needs_dataset
def test_conversations_are_deterministic_and_each_talks_of_disjoint_topics_between_chatter():
    texts, relevant = judged_queries(DATASET, max_relevant=20)

    made = conversations_make(texts, relevant, count=100, seed=42)

    assert made == conversations_make(texts, relevant, count=100, seed=42)
    assert made != conversations_make(texts, relevant, count=100, seed=43)
    assert len(made) == 100 and all(len(relevant[q]) <= 20 for talk in made for q in talk.queries)
    for talk in made:
        assert 3 <= len(talk.queries) <= 5 and len(set(talk.queries)) == len(talk.queries)
        sets = [relevant[q] for q in talk.queries]
        assert sum(len(s) for s in sets) == len(talk.relevant) == len(frozenset().union(*sets))  # disjoint
        chatter = [m.content for m in talk.messages if m.content in REPLIES or m.content in SMALL_TALK]
        asked = [m for m in talk.messages if m.role == "user" and m.content not in SMALL_TALK]
        assert len(asked) == len(talk.queries) and len(chatter) >= 2 * len(talk.queries)
        for query, message in zip(talk.queries, asked, strict=True):
            assert texts[query].rstrip("?. ") in message.content


@pytest.mark.django_db
@pytest.mark.dataset
@needs_dataset
def test_both_approaches_are_measured_on_a_slice_holding_every_relevant_document():
    result = conversation_recall(dataset=DATASET, conversations=3, documents=40, max_relevant=5, seed=1,
                                 log=lambda line: None)

    catalog = Catalog.objects.get(slug="bench-conversation-40")
    assert (result.catalog, result.chunks, result.conversations) == (catalog.slug, catalog.chunk_count, 3)
    assert result.chunked.mean_chunks >= 1 and result.single.mean_chunks == 1
    for report in (result.chunked, result.single, result.asked_only):
        assert 0 < report.recall_at_10 <= 1  # the relevant documents are in the slice: some are found
        assert 0 < report.p50_ms <= report.p95_ms
    assert result.as_dict()["ratio"] == round(result.chunked.recall_at_10 / result.single.recall_at_10, 3)


@pytest.mark.django_db
@pytest.mark.dataset
@needs_dataset
def test_the_command_prints_both_approaches_and_their_ratio():
    out = StringIO()

    call_command(command_load("bench_conversation_recall"), "--dataset", str(DATASET), "--conversations", "3",
                 "--documents", "40", "--max-relevant", "5", "--seed", "1", stdout=out)

    lines = out.getvalue().splitlines()
    assert {"chunked", "single", "asked only"} <= {line[:12].strip() for line in lines}
    assert lines[-1].startswith("chunked / single recall@10: ") and lines[-1].endswith("(target >= 1.5)")


@pytest.mark.parametrize("args", [["--conversations", "0"], ["--documents", "0"], ["--max-relevant", "0"]])
def test_bad_arguments_are_one_line_errors(args, tmp_path):
    with pytest.raises(CommandError, match="must be positive"):
        call_command(command_load("bench_conversation_recall"), "--dataset", str(tmp_path), *args)
