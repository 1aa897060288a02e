from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.text import slugify

from catalog.indexing.runs import source_import
from catalog.models import Catalog, IndexRun, ReferenceSource
from catalog.progress import ProgressBar, command_logging
from catalog.sources.beir import parse_beir_jsonl
from catalog.sources.errors import SourceError


class Command(BaseCommand):
    help = ("Import a BEIR corpus (JSON lines with _id, title, text) as one upload source of a catalog, "
            "indexed as an IndexRun under the source's lock (a running worker leaves it alone).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="path to corpus.jsonl")
        parser.add_argument("--catalog", required=True, help="catalog slug (created when missing)")
        parser.add_argument("--source", help="source slug (default: the file name)")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args: Any, file: str, catalog: str, source: str | None, no_progress: bool,
               **options: Any) -> None:
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
        command_logging(options["verbosity"])
        progress = ProgressBar(enabled=not no_progress)
        try:
            run = source_import(catalog=target, slug=slug, documents=documents, trigger=IndexRun.Trigger.COMMAND,
                                progress=progress)
        except SourceError as exc:
            raise CommandError(str(exc)) from None
        finally:
            progress.close()
        if run.status != IndexRun.Status.SUCCEEDED:
            raise CommandError(f"{catalog}/{slug}: run {run.pk} {run.status}: {run.error}")
        lexical = run.source.status == ReferenceSource.Status.LEXICAL_ONLY
        self.stdout.write(f"{catalog}/{slug}: run {run.pk}: {len(documents)} documents, "
                          f"{run.counts['chunks_written']} chunks written "
                          f"({'lexical only' if lexical else 'hybrid'}) in {sum(run.timings.values()):.1f}s")
