import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.common import BenchmarkError, indexed_catalog, machine_info, nfcorpus_test_queries
from benchmarks.feedback import as_dicts, feedback_latency


class Command(BaseCommand):
    help = (
        "Feedback benchmark: search latency (top_k 10) without pseudo-relevance feedback, with BM25 feedback "
        "(RM3, 10 chunks), vector feedback (3 chunks) and both, the same queries alternated. See "
        "docs/benchmarks.md, 'Tuning NFCorpus ranking, held out'."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--catalog", default="nfcorpus")
        parser.add_argument("--dataset", type=Path, required=True,
                            help="the catalog's BEIR folder (its qrels/test.tsv queries are searched)")
        parser.add_argument("--rounds", type=int, default=2, help="times each query is searched per setting")
        parser.add_argument("--json", dest="json_out", type=Path, help="also write the results as JSON here")

    def handle(self, *args: Any, catalog: str, dataset: Path, rounds: int, json_out: Path | None,
               **options: Any) -> None:
        if rounds < 1:
            raise CommandError("--rounds must be positive")
        try:
            target = indexed_catalog(catalog)
            queries = nfcorpus_test_queries(dataset)
        except BenchmarkError as exc:
            raise CommandError(str(exc)) from None
        results = feedback_latency(catalog=target, queries=queries, rounds=rounds)
        self.stdout.write(f"{target.slug} ({target.chunk_count} chunks), {len(queries)} queries x {rounds} rounds")
        self.stdout.write(f"{'mode':<8}{'feedback':<10}{'p50 ms':>9}{'p95 ms':>9}{'p50 / none':>12}")
        for r in results:
            self.stdout.write(f"{r.mode:<8}{r.feedback:<10}{r.p50_ms:>9.1f}{r.p95_ms:>9.1f}{r.p50_ratio:>12.2f}")
        if json_out:
            json_out.write_text(json.dumps({"machine": machine_info(), "feedback": as_dicts(results)}, indent=2)
                                + "\n")
