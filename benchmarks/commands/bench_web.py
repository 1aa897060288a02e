import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.common import BenchmarkError
from benchmarks.web import crawl_timings


class Command(BaseCommand):
    help = ("Web-source crawl speed: pages per second for a first crawl of a generated local site and for a "
            "re-crawl where every page answers 304. See benchmarks/web.py.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--pages", type=int, default=300, help="pages in the generated site (default 300)")
        parser.add_argument("--json", dest="json_out", type=Path, help="also write the results as JSON here")

    def handle(self, *args: Any, pages: int, json_out: Path | None, **options: Any) -> None:
        try:
            results = crawl_timings(pages)
        except BenchmarkError as exc:
            raise CommandError(str(exc)) from None
        for name, label in (("first", "first crawl"), ("again", "re-crawl (304)")):
            timing = results[name]
            self.stdout.write(f"{label:<16}{timing.pages:>6} pages {timing.read:>6} read {timing.requests:>6} "
                              f"requests {timing.seconds:>8.2f} s {timing.pages_per_second:>9.1f} pages/s")
        if json_out:
            json_out.write_text(json.dumps({"pages": pages, **{name: {**asdict(results[name]),
                                                                       "pages_per_second": results[name]
                                                                       .pages_per_second}
                                                               for name in ("first", "again")}}, indent=2))
