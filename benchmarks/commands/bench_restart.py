import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.common import BenchmarkError, dataset_check, machine_info
from benchmarks.restart import restart_benchmark


class Command(BaseCommand):
    help = ("The first searches after the database server restarts: for each catalog and mode, the embedded "
            "Postgres is stopped and started, then the first --queries NFCorpus test queries are timed; "
            "medians over --rounds. See docs/benchmarks.md.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", type=Path, required=True,
                            help="BEIR NFCorpus folder (queries.jsonl, qrels/test.tsv)")
        parser.add_argument("--catalogs", default="nfcorpus", help="catalog slugs, comma-separated")
        parser.add_argument("--modes", default="vector,hybrid", help="search modes, comma-separated")
        parser.add_argument("--queries", type=int, default=10, help="queries timed after each restart")
        parser.add_argument("--rounds", type=int, default=3)
        parser.add_argument("--json", dest="json_out", type=Path, help="also write the results as JSON here")

    def handle(self, *args: Any, dataset: Path, catalogs: str, modes: str, queries: int, rounds: int,
               json_out: Path | None, **options: Any) -> None:
        if min(queries, rounds) < 1:
            raise CommandError("--queries and --rounds must be positive")
        try:
            reports = restart_benchmark(dataset=dataset_check(dataset), slugs=catalogs.split(","),
                                        modes=modes.split(","), queries=queries, rounds=rounds,
                                        log=self.stdout.write)
        except BenchmarkError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{'catalog':<14}{'chunks':>8} {'mode':<8}{'first ms':>10}{'mean ms':>10}  first, each round")
        for r in reports:
            self.stdout.write(f"{r.catalog:<14}{r.chunks:>8} {r.mode:<8}{r.first_ms:>10.1f}{r.mean_ms:>10.1f}  "
                              f"{', '.join(f'{x:.1f}' for x in r.first_runs)}")
        if json_out:
            json_out.write_text(json.dumps({"machine": machine_info(), "restart": [asdict(r) for r in reports]},
                                           indent=2) + "\n")
