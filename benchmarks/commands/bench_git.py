import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from benchmarks.git_sync import run_git_bench


class Command(BaseCommand):
    help = ("Git source benchmark: a repository of N markdown files indexed, then one-file commits detected "
            "and re-synced, each timed end to end; the files each re-sync read, and the mirror's size.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--files", type=int, default=10_000)
        parser.add_argument("--edits", type=int, default=5)
        parser.add_argument("--json", dest="json_out")

    def handle(self, *args: Any, files: int, edits: int, json_out: str | None, **options: Any) -> None:
        figures = run_git_bench(count=files, edits=edits, log=self.stdout.write).as_dict()
        for key, value in figures.items():
            self.stdout.write(f"{key:>26}: {value}")
        if json_out:
            Path(json_out).write_text(json.dumps(figures, indent=2) + "\n")
