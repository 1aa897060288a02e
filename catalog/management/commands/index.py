from django.core.management.base import BaseCommand, CommandError

from catalog.models import Catalog
from catalog.progress import ProgressBar
from catalog.services import SourceError, catalog_index, source_index


class Command(BaseCommand):
    help = "Rebuild the index of a catalog's glob and inline sources (or of one source)."

    def add_arguments(self, parser):
        parser.add_argument("--catalog", required=True, help="catalog slug")
        parser.add_argument("--source", help="index only this source (slug)")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, catalog: str, source: str | None, no_progress: bool, **options):
        found = Catalog.objects.filter(slug=catalog).first()
        if found is None:
            raise CommandError(f"no catalog {catalog!r}")
        progress = ProgressBar(enabled=not no_progress)
        try:
            if source:
                target = found.sources.select_related("catalog").filter(slug=source).first()
                if target is None:
                    raise CommandError(f"catalog {catalog!r} has no source {source!r}")
                reports = {source: source_index(source=target, progress=progress)}
            else:
                reports = catalog_index(catalog=found, progress=progress)
        except SourceError as exc:
            raise CommandError(str(exc)) from None
        finally:
            progress.close()
        for slug, report in reports.items():
            mode = "hybrid" if report.embedded else "lexical only"
            self.stdout.write(f"{slug}: {report.documents} documents, {report.chunks} chunks ({mode})")
            for path, reason in report.skipped:
                self.stdout.write(f"  skipped {path}: {reason}")
