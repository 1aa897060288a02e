import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from benchmarks.reindex import run_reindex_bench


class Command(BaseCommand):
    help = "Reindex benchmark: N markdown files, one edit detected and reindexed; scan and full rebuild timed."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--files", type=int, default=10_000)
        parser.add_argument("--edits", type=int, default=5)
        parser.add_argument("--json", dest="json_out")

    def handle(self, *args: Any, files: int, edits: int, json_out: str | None, **options: Any) -> None:
        figures = run_reindex_bench(count=files, edits=edits, log=self.stdout.write).as_dict()
        for key, value in figures.items():
            self.stdout.write(f"{key:>28}: {value}")
        if json_out:
            Path(json_out).write_text(json.dumps(figures, indent=2) + "\n")
