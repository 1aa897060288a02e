import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.common import BenchmarkError, dataset_check, machine_info
from benchmarks.indexing import IndexBenchmark, index_benchmark
from benchmarks.search import SearchBenchmark, search_benchmark
from catalog.progress import ProgressBar


class Command(BaseCommand):
    help = ("Search latency and indexing throughput. --search: p50/p95 search latency on NFCorpus and on a "
            "synthetic catalog of --chunks chunks grown from it. --index: full indexing pipeline vs bare ONNX "
            "Runtime, in chunks/s. Without either flag, runs both at 100k chunks. See docs/benchmarks.md.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--search", action="store_true", help="measure search latency")
        parser.add_argument("--index", action="store_true", help="measure indexing throughput")
        parser.add_argument("--chunks", type=int, default=100_000, help="synthetic catalog size (bench-<N>)")
        parser.add_argument("--rebuild", action="store_true", help="rebuild bench-<N> even if it has N chunks")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar while bench-<N> is built")
        parser.add_argument("--base-only", action="store_true",
                            help="time the base catalog alone (no bench-<N>): what it answers without a neighbour")
        parser.add_argument("--base", default="nfcorpus", help="real catalog the synthetic one is grown from")
        parser.add_argument("--seed", type=int, default=42)
        parser.add_argument("--dataset", type=Path, required=True,
                            help="BEIR NFCorpus folder (corpus.jsonl, queries.jsonl, qrels/test.tsv); "
                                 "`make bench` gives ../shared/datasets/nfcorpus")
        parser.add_argument("--repeat", type=int, default=3,
                            help="--search runs; each figure is the median over them")
        parser.add_argument("--documents", type=int, default=400, help="corpus documents per --index run")
        parser.add_argument("--rounds", type=int, default=3, help="A/B rounds for --index")
        parser.add_argument("--wait-timeout", type=float, default=7200,
                            help="seconds to wait for the base catalog's import to finish")
        parser.add_argument("--json", dest="json_out", type=Path, help="also write the results as JSON here")

    def handle(self, *args: Any, search: bool, index: bool, chunks: int, rebuild: bool, no_progress: bool,
               base_only: bool, base: str, seed: int, dataset: Path, repeat: int, documents: int, rounds: int,
               wait_timeout: float, json_out: Path | None, **options: Any) -> None:
        if not search and not index:
            search = index = True
        if min(chunks, repeat, documents, rounds) < 1:
            raise CommandError("--chunks, --repeat, --documents and --rounds must be positive")
        log = self.stdout.write
        results: dict[str, object] = {"machine": machine_info()}
        try:
            dataset_check(dataset)
            if search:
                progress = ProgressBar(enabled=not no_progress)
                try:
                    outcome = search_benchmark(chunks=chunks, base_slug=base, dataset=dataset, rebuild=rebuild,
                                               repeat=repeat, seed=seed, wait_timeout_s=wait_timeout,
                                               progress=progress, base_only=base_only, log=log)
                finally:
                    progress.close()
                self._print_search(outcome)
                results["search"] = asdict(outcome)
            if index:
                throughput = index_benchmark(dataset=dataset, documents=documents, rounds=rounds, log=log)
                self._print_index(throughput)
                results["index"] = throughput.as_dict()
        except BenchmarkError as exc:
            raise CommandError(str(exc)) from None
        if json_out:
            json_out.write_text(json.dumps(results, indent=2) + "\n")

    def _print_search(self, outcome: SearchBenchmark) -> None:
        if outcome.build_s is not None:
            self.stdout.write(f"built bench-{outcome.chunks} in {outcome.build_s:.0f}s")
        self.stdout.write(f"{'catalog':<14}{'chunks':>8} {'mode':<11}{'queries':>8}{'p50 ms':>9}{'p95 ms':>9}"
                          f"{'mean ms':>9}{'passes':>8}")
        for r in outcome.reports:
            passes = f"{r.bm25_passes:.2f}" if r.bm25_passes is not None else "-"
            self.stdout.write(f"{r.catalog:<14}{r.chunks:>8} {r.mode:<11}{r.queries:>8}{r.p50_ms:>9.1f}"
                              f"{r.p95_ms:>9.1f}{r.mean_ms:>9.1f}{passes:>8}")
        for check in outcome.exact:
            self.stdout.write(f"bm25 top {check.depth} on {check.catalog} identical to the full SQL walk: "
                              f"{check.identical}/{check.queries} queries; p50/p95 ms blocks "
                              f"{check.top_ms[0]:.1f}/{check.top_ms[1]:.1f}, "
                              f"walk {check.walk_ms[0]:.1f}/{check.walk_ms[1]:.1f}")
        for r in outcome.missed():
            self.stdout.write(self.style.WARNING(
                f"target missed: {r.mode} p95 {r.p95_ms:.1f} ms > {outcome.targets_p95_ms[r.mode]:.0f} ms"))

    def _print_index(self, throughput: IndexBenchmark) -> None:
        self.stdout.write(
            f"indexing {throughput.documents} documents / {throughput.chunks} chunks "
            f"({throughput.threads} threads, batch {throughput.batch_size}): "
            f"pipeline {throughput.pipeline_median:.1f} chunks/s, bare onnx {throughput.bare_median:.1f} chunks/s, "
            f"ratio {throughput.ratio:.3f}, median per-round ratio {throughput.paired_ratio:.3f} (target >= 0.9)")
        stages = ", ".join(f"{stage} {seconds:.1f}s" for stage, seconds in throughput.pipeline_stages_s.items())
        self.stdout.write(f"pipeline stages (median): {stages}")
