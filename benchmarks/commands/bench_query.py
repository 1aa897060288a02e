import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.common import BenchmarkError, indexed_catalog, machine_info
from benchmarks.long_queries import QueryBenchmark, query_benchmark


class Command(BaseCommand):
    help = (
        "Long-query benchmark: search latency per mode (top_k 10) for passages of --chars characters built from "
        "the catalog's own corpus (NFCorpus), the stages of the lexical side, and how often the best hit is one "
        "of the passage's documents. See docs/benchmarks.md, 'Long queries'."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--catalog", default="nfcorpus")
        parser.add_argument("--corpus", type=Path, required=True,
                            help="the catalog's BEIR corpus.jsonl (NFCorpus's for the nfcorpus catalog)")
        parser.add_argument("--chars", default="20000", help="comma-separated passage lengths, in characters")
        parser.add_argument("--passages", type=int, default=20, help="passages per length")
        parser.add_argument("--seed", type=int, default=42)
        parser.add_argument("--merged-terms-max", type=int, default=None,
                            help="override lexical.MERGED_TERMS_MAX (0: join every query's postings)")
        parser.add_argument("--json", dest="json_out", type=Path, help="also write the results as JSON here")

    def handle(self, *args: Any, catalog: str, corpus: Path, chars: str, passages: int, seed: int,
               merged_terms_max: int | None, json_out: Path | None, **options: Any) -> None:
        try:
            target = indexed_catalog(catalog)
        except BenchmarkError as exc:
            raise CommandError(str(exc)) from None
        if not corpus.is_file():
            raise CommandError(f"no such file: {corpus} (NFCorpus's: ../shared/datasets/nfcorpus/corpus.jsonl)")
        lengths = [int(n) for n in chars.split(",") if n.strip()]
        if passages < 1 or not lengths or min(lengths) < 1:
            raise CommandError("--passages and every --chars must be positive")
        results = []
        for length in lengths:
            self.stdout.write(f"{passages} passages of {length} characters:")
            outcome = query_benchmark(catalog=target, corpus=corpus, chars=length, passages=passages, seed=seed,
                                      merged_max=merged_terms_max, log=self.stdout.write)
            self._print(outcome)
            results.append(outcome.as_dict())
        if json_out:
            json_out.write_text(json.dumps({"machine": machine_info(), "query": results}, indent=2) + "\n")

    def _print(self, r: QueryBenchmark) -> None:
        self.stdout.write(
            f"{r.catalog} ({r.chunks} chunks): {r.passages} passages, {r.mean_chars:.0f} characters and "
            f"{r.mean_terms:.0f} distinct catalog terms on average, the model reading {r.vector_chars:.0f}; "
            f"MERGED_TERMS_MAX {r.merged_terms_max}")
        self.stdout.write(f"{'mode':<15}{'p50 ms':>9}{'p95 ms':>9}{'mean ms':>9}{'found':>8}{'passes':>8}")
        for m in r.modes:
            self.stdout.write(f"{m.mode:<15}{m.p50_ms:>9.1f}{m.p95_ms:>9.1f}{m.mean_ms:>9.1f}{m.found:>8.2f}"
                              f"{m.bm25_passes:>8.2f}")
        self.stdout.write("stages (median ms): " + ", ".join(f"{k} {v:.1f}" for k, v in r.stages_p50_ms.items()))
