import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.common import BenchmarkError, dataset_check, machine_info
from benchmarks.conversation import ApproachReport, conversation_recall


class Command(BaseCommand):
    help = ("Conversation retrieval (seed 002): recall@10 of the union of the relevant documents of 3-5 NFCorpus "
            "test queries talked about in one conversation, padded with chatter, for the chunked search "
            "(POST /api/v1/search/conversation's service) against one query of the whole conversation, with "
            "p50/p95 latency of each. Target: chunked >= 1.5x single. See docs/benchmarks.md.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", type=Path, required=True,
                            help="BEIR NFCorpus folder (corpus.jsonl, queries.jsonl, qrels/test.tsv); "
                                 "`make bench` gives ../shared/datasets/nfcorpus")
        parser.add_argument("--conversations", type=int, default=120)
        parser.add_argument("--documents", type=int, default=None,
                            help="a slice of the corpus in a catalog of its own (default: the whole corpus, "
                                 "the nfcorpus catalog)")
        parser.add_argument("--max-relevant", type=int, default=20,
                            help="only test queries with at most this many relevant documents")
        parser.add_argument("--seed", type=int, default=42)
        parser.add_argument("--json", dest="json_out", type=Path, help="also write the results as JSON here")

    def handle(self, *args: Any, dataset: Path, conversations: int, documents: int | None, max_relevant: int,
               seed: int, json_out: Path | None, **options: Any) -> None:
        if min(conversations, max_relevant) < 1 or (documents is not None and documents < 1):
            raise CommandError("--conversations, --documents and --max-relevant must be positive")
        try:
            result = conversation_recall(dataset=dataset_check(dataset), conversations=conversations,
                                         documents=documents, max_relevant=max_relevant, seed=seed,
                                         log=self.stdout.write)
        except BenchmarkError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"{result.conversations} conversations on {result.catalog} ({result.chunks} chunks): "
            f"{result.mean_queries} queries, {result.mean_messages} messages and {result.mean_relevant} relevant "
            f"documents each on average")
        self.stdout.write(f"{'approach':<12}{'recall@10':>11}{'p50 ms':>9}{'p95 ms':>9}{'chunks':>8}")
        for report in (result.chunked, result.single, result.asked_only):
            self._row(report)
        self.stdout.write(f"chunked / single recall@10: {result.ratio:.2f} (target >= 1.5)")
        if json_out:
            json_out.write_text(json.dumps({"machine": machine_info(), **result.as_dict()}, indent=2) + "\n")

    def _row(self, r: ApproachReport) -> None:
        self.stdout.write(f"{r.name:<12}{r.recall_at_10:>11.4f}{r.p50_ms:>9.1f}{r.p95_ms:>9.1f}{r.mean_chunks:>8.2f}")
