import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.common import BenchmarkError, dataset_check, machine_info
from benchmarks.enrich import enrich_benchmark


class Command(BaseCommand):
    help = ("Enrichment latency: p50/p95 of POST /api/v1/enrich (every detection pass, tags + semantic, trace "
            "written) over a catalog of --sources references built from NFCorpus. See docs/benchmarks.md.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--sources", type=int, default=1000)
        parser.add_argument("--calls", type=int, default=300, help="prompts measured (tool results: a third)")
        parser.add_argument("--warmup", type=int, default=20)
        parser.add_argument("--dataset", type=Path, required=True,
                            help="BEIR NFCorpus folder (corpus.jsonl, queries.jsonl, qrels/test.tsv)")
        parser.add_argument("--tool-tokens", default="48,64,96,128",
                            help="comma-separated head lengths (model tokens) to run tool results with, side by side")
        parser.add_argument("--repeat", type=int, default=3, help="rounds; every figure is the median over rounds")
        parser.add_argument("--json", dest="json_out", type=Path, help="also write the results as JSON here")

    def handle(self, *args: Any, sources: int, calls: int, warmup: int, dataset: Path, tool_tokens: str,
               repeat: int, json_out: Path | None, **options: Any) -> None:
        if min(sources, calls, repeat) < 1 or warmup < 0:
            raise CommandError("--sources, --calls and --repeat must be positive, --warmup not negative")
        try:
            heads = [int(t) for t in tool_tokens.split(",")]
        except ValueError:
            raise CommandError(f"--tool-tokens must be comma-separated integers, not {tool_tokens!r}") from None
        if not heads or min(heads) < 8:
            raise CommandError("--tool-tokens: each head length must be at least 8 tokens")
        try:
            results = enrich_benchmark(sources=sources, dataset=dataset_check(dataset), calls=calls,
                                       warmup=warmup, tool_tokens=heads, repeat=repeat, log=self.stdout.write)
        except BenchmarkError as exc:
            raise CommandError(str(exc)) from None
        results = {"machine": machine_info(), **results}
        self.stdout.write(f"{results['sources']} sources, {results['tags']} distinct tags; "
                          f"first call (index build) {results['first_call_ms']} ms")
        rows = [("prompt", results["prompt"])]
        rows += [(f"tool 4KB @{tokens}t", r) for tokens, r in results["tool_result_4kb"].items()]
        for label, r in rows:
            line = (f"{label:16s} calls {r['calls']:4.0f}  p50 {r['p50_ms']:7.2f} ms  p95 {r['p95_ms']:7.2f} ms"
                    f" (rounds {'/'.join(f'{p:.1f}' for p in r['p95_ms_by_round'])})"
                    f"  mean {r['mean_ms']:7.2f} ms  hints/call {r['hints_per_call']:.2f}"
                    f"  tag pass p50 {r['tag_pass_p50_ms']:.3f} ms  embed p50 {r['embed_p50_ms']:.2f} ms")
            if "semantic_self_recall" in r:
                recall = r["semantic_self_recall"]
                line += f"  semantic recall@1 {recall['recall_at_1']:.3f} @5 {recall['recall_at_5']:.3f}"
            self.stdout.write(line)
        if json_out:
            json_out.write_text(json.dumps(results, indent=2, default=str))
