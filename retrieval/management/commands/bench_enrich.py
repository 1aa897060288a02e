import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from retrieval.benchmarks import BenchmarkError, default_dataset_dir, machine_info
from retrieval.enrich_bench import enrich_benchmark


class Command(BaseCommand):
    help = ("p50/p95 of POST /api/v1/enrich (every detection pass, tags + semantic, trace written) over a "
            "catalog of --sources references built from NFCorpus. See docs/benchmarks.md.")

    def add_arguments(self, parser):
        parser.add_argument("--sources", type=int, default=1000)
        parser.add_argument("--calls", type=int, default=300, help="prompts measured (tool results: a third)")
        parser.add_argument("--warmup", type=int, default=20)
        parser.add_argument("--dataset", type=Path, default=None, help="BEIR NFCorpus folder")
        parser.add_argument("--json", dest="json_out", type=Path, help="also write the results as JSON here")

    def handle(self, *args, sources, calls, warmup, dataset, json_out, **options):
        if min(sources, calls) < 1 or warmup < 0:
            raise CommandError("--sources and --calls must be positive, --warmup not negative")
        try:
            results = enrich_benchmark(sources=sources, dataset=dataset or default_dataset_dir(), calls=calls,
                                       warmup=warmup, log=self.stdout.write)
        except BenchmarkError as exc:
            raise CommandError(str(exc)) from None
        results = {"machine": machine_info(), **results}
        self.stdout.write(f"{results['sources']} sources, {results['tags']} distinct tags; "
                          f"first call (index build) {results['first_call_ms']} ms")
        for key in ("prompt", "tool_result_4kb"):
            r = results[key]
            self.stdout.write(f"{key:16s} calls {r['calls']:4d}  p50 {r['p50_ms']:7.2f} ms  p95 {r['p95_ms']:7.2f} ms"
                              f"  mean {r['mean_ms']:7.2f} ms  hints/call {r['hints_per_call']:.2f}"
                              f"  tag pass p50 {r['tag_pass_p50_ms']:.3f} ms"
                              f"  semantic pass p50 {r['semantic_pass_p50_ms']:.2f} ms")
        if json_out:
            json_out.write_text(json.dumps(results, indent=2, default=str))
