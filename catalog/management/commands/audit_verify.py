"""manage.py audit_verify: walk the audit log's hash chain from its first entry and check
it against every checkpoint in LECTERN_AUDIT_CHECKPOINT_DIR; exit 0 with a one-line
summary when all holds, 1 with one line naming what failed: the first broken link, an
entry cut from the tail or rewritten below a checkpoint, a checkpoint file that is
forged, altered or unreadable, or one missing between two others. Exit 3 (STALE), with
one line, when all that holds but entries appended more than two
LECTERN_AUDIT_CHECKPOINT_MINUTES ago have no checkpoint: newer checkpoints were removed,
or no worker writes them. Not 1, which proves tampering: a stopped worker looks the
same, and a script that alerts on anything but 0 still alerts."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from catalog.audit.log import audit_verify

STALE = 3


class Command(BaseCommand):
    help = "Check the audit log's hash chain and its checkpoints; name the first thing that fails."

    def handle(self, *args: Any, **options: Any) -> None:
        result = audit_verify()
        if result.broken is not None or result.problem is not None:
            raise CommandError(str(result))
        if result.stale is not None:
            raise CommandError(str(result), returncode=STALE)
        self.stdout.write(str(result))
