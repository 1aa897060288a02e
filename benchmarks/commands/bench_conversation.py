import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.common import BenchmarkError, dataset_check, machine_info
from benchmarks.conversation_memory import conversation_benchmark


class Command(BaseCommand):
    help = ("Conversations and memory (issue 14): enrich/conversation p50/p95 on a 50- and a 500-message "
            "conversation, and memory search with 100,000 memories for one end user and across 1,000 end "
            "users. See docs/benchmarks.md.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", type=Path, required=True,
                            help="BEIR NFCorpus folder (corpus.jsonl, queries.jsonl, qrels/test.tsv)")
        parser.add_argument("--rounds", type=int, default=50, help="timed calls of each case")
        parser.add_argument("--json", dest="json_out", type=Path, help="also write the results as JSON here")

    def handle(self, *args: Any, dataset: Path, rounds: int, json_out: Path | None, **options: Any) -> None:
        if rounds < 1:
            raise CommandError("--rounds must be positive")
        try:
            results = conversation_benchmark(dataset=dataset_check(dataset), rounds=rounds, log=self.stdout.write)
        except BenchmarkError as exc:
            raise CommandError(str(exc)) from None
        results = {"machine": machine_info(), **results}
        for case in results["conversations"]:
            self.stdout.write(f"enrich/conversation {case['messages']:4d} messages  p50 {case['p50_ms']:7.1f} ms  "
                              f"p95 {case['p95_ms']:7.1f} ms  ({case['tokens_before']} tokens in, "
                              f"{case['tokens_freed']} freed, {case['tokens_added']} added)")
        for case in results["memory"]:
            self.stdout.write(f"memory search, {case['case']:48s} p50 {case['p50_ms']:7.1f} ms  "
                              f"p95 {case['p95_ms']:7.1f} ms  ({case['hits_mean']} hits)")
        if json_out:
            json_out.write_text(json.dumps(results, indent=2, default=str))
