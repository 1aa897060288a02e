"""manage.py apply_decisions: read the decision directory now (what the schedule
`lectern-apply-decision-files` does each minute); one line per file; exit 1 when a file
was refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals.channels.files import decision_files_apply


class Command(BaseCommand):
    help = "Apply the decision files waiting in LECTERN_DECISION_DIR (or --dir), each all or nothing, once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dir", type=Path, help="another directory than LECTERN_DECISION_DIR")

    def handle(self, *args: Any, dir: Path | None, **options: Any) -> None:
        outcomes = decision_files_apply(directory=dir)
        for outcome in outcomes:
            detail = f"{outcome.applied} decisions" if outcome.status == "processed" else outcome.reason
            self.stdout.write(f"{outcome.name}: {outcome.status}: {detail}")
        if not outcomes:
            self.stdout.write("no decision files waiting")
        failed = [o.name for o in outcomes if o.status != "processed"]
        if failed:
            raise CommandError(f"not applied: {', '.join(failed)}")
