import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.common import BenchmarkError, dataset_check, machine_info
from benchmarks.gate import gate_benchmark


class Command(BaseCommand):
    help = ("The approval gate's cost: p50/p95 of POST /api/v1/enrich (prompt, tool result) and POST /api/v1/search "
            "(bm25, vector, hybrid) with a catalog policy on and off, side by side, over --sources NFCorpus "
            "references and ten agents each approved for every one. See docs/benchmarks.md.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--sources", type=int, default=1000, help="references (approvals: ten agents each)")
        parser.add_argument("--calls", type=int, default=300, help="per path (tool results: a third)")
        parser.add_argument("--warmup", type=int, default=20)
        parser.add_argument("--dataset", type=Path, required=True,
                            help="BEIR NFCorpus folder (corpus.jsonl, queries.jsonl, qrels/test.tsv)")
        parser.add_argument("--repeat", type=int, default=2, help="times the A B B A order runs")
        parser.add_argument("--json", dest="json_out", type=Path, help="also write the results as JSON here")

    def handle(self, *args: Any, sources: int, calls: int, warmup: int, dataset: Path, repeat: int,
               json_out: Path | None, **options: Any) -> None:
        if min(sources, calls, repeat) < 1 or warmup < 0:
            raise CommandError("--sources, --calls and --repeat must be positive, --warmup not negative")
        try:
            results = gate_benchmark(sources=sources, dataset=dataset_check(dataset), calls=calls, warmup=warmup,
                                     repeat=repeat, log=self.stdout.write)
        except BenchmarkError as exc:
            raise CommandError(str(exc)) from None
        results = {"machine": machine_info(), **results}
        self.stdout.write(f"{results['sources']} sources ({results['chunks']} chunks), {results['agents']} agents, "
                          f"{results['approvals']} approvals; {results['rounds']} rounds; same answers on and off")
        for path, r in results["paths"].items():
            off, on = r["off"], r["on"]
            self.stdout.write(
                f"{path:20s} off p50 {off['p50_ms']:7.2f} p95 {off['p95_ms']:7.2f} ms | on p50 {on['p50_ms']:7.2f} "
                f"p95 {on['p95_ms']:7.2f} ms | p95 on/off {r['p95_ratio']:.3f} (rounds off "
                f"{'/'.join(f'{p:.1f}' for p in r['p95_by_round']['off'])}, on "
                f"{'/'.join(f'{p:.1f}' for p in r['p95_by_round']['on'])})")
        if json_out:
            json_out.write_text(json.dumps(results, indent=2, default=str))
