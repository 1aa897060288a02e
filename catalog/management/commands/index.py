from django.core.management.base import BaseCommand, CommandError

from catalog.models import Catalog, IndexRun, ReferenceSource
from catalog.progress import ProgressBar
from catalog.reindex import index_run_create, index_run_execute
from catalog.services import SourceError


class Command(BaseCommand):
    help = ("Bring a catalog's sources (or one source) up to date: only added and changed "
            "documents are chunked and embedded, unless --full. Each source's run is recorded as an IndexRun.")

    def add_arguments(self, parser):
        parser.add_argument("--catalog", required=True, help="catalog slug")
        parser.add_argument("--source", help="index only this source (slug)")
        parser.add_argument("--full", action="store_true", help="re-chunk and re-embed every document")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, catalog: str, source: str | None, full: bool, no_progress: bool, **options):
        found = Catalog.objects.filter(slug=catalog).first()
        if found is None:
            raise CommandError(f"no catalog {catalog!r}")
        sources = found.sources.select_related("catalog")
        if source:
            sources = found.sources.select_related("catalog").filter(slug=source)
            if not sources:
                raise CommandError(f"catalog {catalog!r} has no source {source!r}")
        progress = ProgressBar(enabled=not no_progress)
        try:
            for target in sources:
                run = index_run_create(source=target, trigger=IndexRun.Trigger.COMMAND, full=full)
                self._report(target, index_run_execute(run_id=run.pk, progress=progress))
        except SourceError as exc:
            raise CommandError(str(exc)) from None
        finally:
            progress.close()

    def _report(self, source: ReferenceSource, run: IndexRun) -> None:
        c = run.counts
        self.stdout.write(
            f"{source.slug}: run {run.pk} {run.status}: +{c['documents_added']} ~{c['documents_changed']} "
            f"-{c['documents_removed']} ={c['documents_unchanged']} documents, {c['chunks_embedded']} chunks "
            f"embedded, {c['chunks_reused']} reused from cache")
        source.refresh_from_db()
        if source.last_error:
            self.stdout.write(f"  {source.last_error}")
