from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from retrieval.traces.services import PURGE_BATCH, trace_retention_cutoff, traces_purge


class Command(BaseCommand):
    help = ("Delete enrichment traces older than the retention (LECTERN_TRACE_RETENTION_DAYS, or --days), "
            "in batches. The worker does the same every hour.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, default=None,
                            help="keep this many days instead of the setting; 0 deletes every trace made before now")
        parser.add_argument("--batch-size", type=int, default=PURGE_BATCH, dest="batch_size")

    def handle(self, *args: Any, days: int | None, batch_size: int, **options: Any) -> None:
        if (days is not None and days < 0) or batch_size < 1:
            raise CommandError("--days must be >= 0 and --batch-size >= 1")
        if days is None:
            days = settings.LECTERN_TRACE_RETENTION_DAYS
            before = trace_retention_cutoff()
            if before is None:
                self.stdout.write("Traces are kept forever (LECTERN_TRACE_RETENTION_DAYS=0); pass --days N to purge.")
                return
        else:
            before = timezone.now() - timedelta(days=days)
        deleted = traces_purge(before=before, batch_size=batch_size)
        self.stdout.write(f"Deleted {deleted} traces made before {before.isoformat(timespec='seconds')} "
                          f"(kept {days} days).")
