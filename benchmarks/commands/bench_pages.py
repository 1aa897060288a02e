import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.common import BenchmarkError, dataset_check, machine_info
from benchmarks.pages import pages_benchmark


class Command(BaseCommand):
    help = ("Server time of every page: p50/p95 of each page fetched in-process by a signed-in curator and "
            "reviewer, on a catalog of 100 sources and about 10,000 NFCorpus chunks. See docs/benchmarks.md.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", type=Path, required=True,
                            help="BEIR NFCorpus folder (corpus.jsonl, queries.jsonl, qrels/test.tsv)")
        parser.add_argument("--rounds", type=int, default=30, help="fetches of each page, in rotated order")
        parser.add_argument("--warmup", type=int, default=3, help="fetches of each page before timing")
        parser.add_argument("--json", dest="json_out", type=Path, help="also write the results as JSON here")

    def handle(self, *args: Any, dataset: Path, rounds: int, warmup: int, json_out: Path | None,
               **options: Any) -> None:
        if rounds < 1 or warmup < 0:
            raise CommandError("--rounds must be positive, --warmup not negative")
        try:
            results = pages_benchmark(dataset=dataset_check(dataset), rounds=rounds, warmup=warmup,
                                      log=self.stdout.write)
        except BenchmarkError as exc:
            raise CommandError(str(exc)) from None
        results = {"machine": machine_info(), **results}
        self.stdout.write(f"{results['sources']} sources, {results['chunks']} chunks, {results['requests']} "
                          f"approval requests; {rounds} rounds")
        for page in results["pages"]:
            self.stdout.write(f"{page['page']:36s} p50 {page['p50_ms']:7.1f} ms  p95 {page['p95_ms']:7.1f} ms  "
                              f"max {page['max_ms']:7.1f} ms  {page['queries']:3d} queries  {page['url']}")
        if json_out:
            json_out.write_text(json.dumps(results, indent=2, default=str))
