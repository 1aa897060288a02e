from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from catalog.demo_loader import ADMIN_USERNAME, AGENT_NAME, demo_load
from catalog.models import ReferenceSource
from catalog.progress import ProgressBar, command_logging
from catalog.sources.errors import SourceError
from retrieval.enrichment.detection import catalog_index

CURL = ("curl -s -X POST http://127.0.0.1:8000/api/v1/search -H \"Authorization: Bearer $TOKEN\" "
        "-H 'Content-Type: application/json' "
        "-d '{\"catalog\":\"demo\",\"query\":\"how should we handle transient failures?\",\"top_k\":3}'")


class Command(BaseCommand):
    help = ("Load the demo catalog (catalog/demo/), index what changed, ensure the admin user (printing its "
            "random password when it is created) and print a fresh token for the demo agent. Safe to run repeatedly.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args: Any, no_progress: bool, **options: Any) -> None:
        command_logging(options["verbosity"])
        progress = ProgressBar(enabled=not no_progress)
        try:
            report = demo_load(progress=progress)
        except SourceError as exc:
            raise CommandError(str(exc)) from None
        except ValidationError as exc:  # AUTH_PASSWORD_VALIDATORS refused the admin's new password
            raise CommandError(f"the {ADMIN_USERNAME} user's new password: {' '.join(exc.messages)}") from None
        finally:
            progress.close()
        catalog = report.catalog
        catalog_index(catalog)  # embed the sources' detection profiles now, not in the first enrich request
        self.stdout.write(f"Catalog {catalog.slug} ({catalog.name}): {catalog.sources.count()} sources, "
                          f"{catalog.chunk_count} chunks")
        for slug, run in report.indexed.items():
            mode = "lexical only" if run.source.status == ReferenceSource.Status.LEXICAL_ONLY else "hybrid"
            c = run.counts
            documents = c["documents_added"] + c["documents_changed"] + c["documents_unchanged"]
            self.stdout.write(f"  indexed {slug}: {documents} documents, {c['chunks_written']} chunks written "
                              f"({mode}; run {run.pk})")
        if report.unchanged:
            self.stdout.write(f"  unchanged, not re-indexed: {len(report.unchanged)} sources")
        if report.admin_password:
            # Shown this once, on stdout only (never logged); only its hash is stored.
            self.stdout.write(f"Superuser: {ADMIN_USERNAME} / {report.admin_password} "
                              f"(a new random password, shown only now; sign in at /accounts/login/)")
        else:
            self.stdout.write(f"Superuser {ADMIN_USERNAME} exists; its password was left unchanged "
                              f"(manage.py changepassword {ADMIN_USERNAME} sets a new one)")
        self.stdout.write(f"Agent token ({AGENT_NAME}): {report.token}")
        self.stdout.write("Try it (the previous demo token no longer works):")
        self.stdout.write(f"  export TOKEN={report.token}")
        self.stdout.write(f"  {CURL}")
