"""manage.py audit_verify: walk the audit log's hash chain from its first entry; exit 0
with a one-line summary when every link holds, 1 naming the first broken link."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from approvals.audit.log import audit_verify


class Command(BaseCommand):
    help = "Check the audit log's hash chain; name the first broken link."

    def handle(self, *args: Any, **options: Any) -> None:
        result = audit_verify()
        if result.broken is not None:
            raise CommandError(str(result))
        self.stdout.write(str(result))
