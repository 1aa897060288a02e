from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from catalog.indexing.runs import source_index_now
from catalog.models import Catalog, IndexRun, ReferenceSource
from catalog.progress import ProgressBar, command_logging


class Command(BaseCommand):
    help = ("Bring a catalog's sources (or one source) up to date: only added and changed "
            "documents are chunked and embedded, unless --full. Each source's run is recorded as an IndexRun "
            "and waits for any other writer of that source.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--catalog", required=True, help="catalog slug")
        parser.add_argument("--source", help="index only this source (slug)")
        parser.add_argument("--full", action="store_true", help="re-chunk and re-embed every document")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args: Any, catalog: str, source: str | None, full: bool, no_progress: bool,
               **options: Any) -> None:
        found = Catalog.objects.filter(slug=catalog).first()
        if found is None:
            raise CommandError(f"no catalog {catalog!r}")
        sources = found.sources.select_related("catalog").order_by("slug")
        if source:
            sources = sources.filter(slug=source)
            if not sources:
                raise CommandError(f"catalog {catalog!r} has no source {source!r}")
        command_logging(options["verbosity"])
        progress = ProgressBar(enabled=not no_progress)
        failed = []
        try:
            for target in sources:
                run = source_index_now(source=target, trigger=IndexRun.Trigger.COMMAND, full=full, progress=progress)
                if run.status == IndexRun.Status.SUCCEEDED:
                    self._report(target, run)
                else:
                    failed.append(f"{target.slug}: run {run.pk} {run.status}: {run.error}")
        finally:
            progress.close()
        if failed:
            raise CommandError("; ".join(failed))

    def _report(self, source: ReferenceSource, run: IndexRun) -> None:
        c = run.counts
        self.stdout.write(
            f"{source.slug}: run {run.pk} {run.status}: +{c['documents_added']} ~{c['documents_changed']} "
            f"-{c['documents_removed']} ={c['documents_unchanged']} documents, {c['chunks_embedded']} chunks "
            f"embedded, {c['chunks_reused']} reused from cache")
        source.refresh_from_db()
        if source.last_error:
            self.stdout.write(f"  {source.last_error}")
