from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.utils.text import slugify

from catalog.models import Catalog
from catalog.progress import ProgressBar
from catalog.services import SourceError, parse_beir_jsonl, source_import_documents


class Command(BaseCommand):
    help = "Import a BEIR corpus (JSON lines with _id, title, text) as one upload source of a catalog."

    def add_arguments(self, parser):
        parser.add_argument("file", help="path to corpus.jsonl")
        parser.add_argument("--catalog", required=True, help="catalog slug (created when missing)")
        parser.add_argument("--source", help="source slug (default: the file name)")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, file: str, catalog: str, source: str | None, no_progress: bool, **options):
        path = Path(file)
        if not path.is_file():
            raise CommandError(f"no such file: {path}")
        try:
            with path.open(encoding="utf-8") as handle:
                documents = parse_beir_jsonl(handle)
        except UnicodeDecodeError:
            raise CommandError(f"{path} is not UTF-8") from None
        except SourceError as exc:
            raise CommandError(f"{path}: {exc}") from None
        if not documents:
            raise CommandError(f"{path} holds no documents")
        target, _ = Catalog.objects.get_or_create(slug=catalog, defaults={"name": catalog})
        slug = source or slugify(path.stem) or "import"
        progress = ProgressBar(enabled=not no_progress)
        try:
            _, report = source_import_documents(catalog=target, slug=slug, documents=documents, progress=progress)
        except SourceError as exc:
            raise CommandError(str(exc)) from None
        finally:
            progress.close()
        self.stdout.write(f"{catalog}/{slug}: {report.documents} documents, {report.chunks} chunks "
                          f"({'hybrid' if report.embedded else 'lexical only'}) in "
                          f"{sum(report.timings.values()):.1f}s")
