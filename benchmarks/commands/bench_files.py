import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.common import BenchmarkError
from benchmarks.files import files_crossed


class Command(BaseCommand):
    help = ("How many product files a search, an enrich and a reviewer's decision each run code in, counted "
            "by a profiler on throwaway data rolled back afterwards. See docs/architecture.md.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--list", action="store_true", help="also list each request's files")
        parser.add_argument("--json", dest="json_out", type=Path, help="also write the results as JSON here")

    def handle(self, *args: Any, list: bool, json_out: Path | None, **options: Any) -> None:
        try:
            results = files_crossed()
        except BenchmarkError as exc:
            raise CommandError(str(exc)) from None
        for request, files in results.items():
            self.stdout.write(f"{request:<10}{len(files):>4} files")
            if list:
                self.stdout.write("".join(f"    {name}\n" for name in files))
        if json_out:
            json_out.write_text(json.dumps(results, indent=2))
