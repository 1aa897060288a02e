"""manage.py audit_verify: walk the audit log's hash chain from its first entry and check
it against every checkpoint in LECTERN_AUDIT_CHECKPOINT_DIR; exit 0 with a one-line
summary when all holds, 1 with one line naming what failed: the first broken link, an
entry cut from the tail or rewritten below a checkpoint, or a checkpoint file that is
forged, altered or unreadable."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from approvals.audit.log import audit_verify


class Command(BaseCommand):
    help = "Check the audit log's hash chain and its checkpoints; name the first thing that fails."

    def handle(self, *args: Any, **options: Any) -> None:
        result = audit_verify()
        if result.broken is not None or result.problem is not None:
            raise CommandError(str(result))
        self.stdout.write(str(result))
