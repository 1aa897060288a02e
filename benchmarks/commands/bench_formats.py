import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from benchmarks.formats import run_formats_bench


class Command(BaseCommand):
    help = ("Documents per second per format (Markdown, HTML, PDF, DOCX, PPTX) becoming text, on generated "
            "10-section files: the median of --repeat extractions each.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--repeat", type=int, default=30)
        parser.add_argument("--json", dest="json_out")

    def handle(self, *args: Any, repeat: int, json_out: str | None, **options: Any) -> None:
        figures = run_formats_bench(repeat=repeat, log=self.stdout.write)
        if json_out:
            Path(json_out).write_text(json.dumps([asdict(f) for f in figures], indent=2) + "\n")
