import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import OperationalError

from benchmarks.common import machine_info
from benchmarks.detection import DetectionBenchmark, DetectionMismatch, detection_benchmark


class Command(BaseCommand):
    help = (
        "Tag detection benchmark: TagMatcher.find against the per-tag regex loop on a synthetic text of "
        "--text-bytes against --tags synthetic tags; p50/p95 per call, the speed-up and the matcher's build "
        "time. Targets: p50 <= 1 ms and >= 20x at 10,000 tags and 4 KB."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tags", type=int, default=10_000, help="synthetic vocabulary size")
        parser.add_argument("--text-bytes", type=int, default=4096, help="size of the text searched, UTF-8 bytes")
        parser.add_argument("--repeat", type=int, default=300, help="timed TagMatcher.find calls")
        parser.add_argument(
            "--baseline-repeat",
            type=int,
            default=5,
            help="timed regex-loop calls (each takes about a second at 10,000 tags)",
        )
        parser.add_argument("--seed", type=int, default=42)
        parser.add_argument("--json", dest="json_out", type=Path, help="also write the results as JSON here")

    def handle(self, *args: Any, tags: int, text_bytes: int, repeat: int, baseline_repeat: int, seed: int,
               json_out: Path | None, **options: Any) -> None:
        if min(tags, text_bytes, repeat, baseline_repeat) < 1:
            raise CommandError("--tags, --text-bytes, --repeat and --baseline-repeat must be positive")
        try:
            outcome = detection_benchmark(
                tags=tags, text_bytes=text_bytes, repeat=repeat, baseline_repeat=baseline_repeat, seed=seed
            )
        except DetectionMismatch as exc:
            raise CommandError(str(exc)) from None
        self._print(outcome)
        try:
            machine = machine_info()
        except OperationalError as exc:  # the timing stands without the Postgres version
            machine = {"error": f"machine_info: {exc}"}
        self.stdout.write(f"machine: {machine}")
        if json_out:
            json_out.write_text(json.dumps({"machine": machine, "detect": outcome.as_dict()}, indent=2) + "\n")

    def _print(self, r: DetectionBenchmark) -> None:
        self.stdout.write(
            f"{r.tags} tags ({r.keys} keys, {r.irregular_tags} irregular), text {r.text_bytes} bytes / "
            f"{r.text_chars} chars, {r.hits} tags found; load average {r.load_average:.2f} before the timing"
        )
        self.stdout.write(f"{'implementation':<18}{'calls':>7}{'p50 ms':>11}{'p95 ms':>11}")
        self.stdout.write(f"{'TagMatcher.find':<18}{r.repeat:>7}{r.matcher_p50_ms:>11.3f}{r.matcher_p95_ms:>11.3f}")
        self.stdout.write(f"{'regex loop':<18}{r.baseline_repeat:>7}{r.loop_p50_ms:>11.1f}{r.loop_p95_ms:>11.1f}")
        self.stdout.write(
            f"speed-up (p50) {r.ratio:.0f}x; TagMatcher build {r.build_ms:.1f} ms (median of 5); "
            f"regex loop compile {r.baseline_compile_ms:.0f} ms"
        )
        for missed in r.missed():
            self.stdout.write(self.style.WARNING(f"target missed: {missed}"))
