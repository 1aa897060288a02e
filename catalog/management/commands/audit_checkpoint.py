"""manage.py audit_checkpoint: write a checkpoint of the audit chain's head into
LECTERN_AUDIT_CHECKPOINT_DIR now (the schedule `lectern-audit-checkpoint` does it every
LECTERN_AUDIT_CHECKPOINT_MINUTES), unless the newest already names it. A directory that
cannot be written ends it with one line."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from catalog.audit.checkpoints import CheckpointWriteFailed, audit_checkpoint_write, checkpoint_directory


class Command(BaseCommand):
    help = "Write a signed checkpoint of the audit log's newest entry (when it moved since the last one)."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            written = audit_checkpoint_write()
        except CheckpointWriteFailed as exc:
            raise CommandError(str(exc)) from None
        if written is None:
            self.stdout.write(f"audit checkpoint unchanged: the newest in {checkpoint_directory()} names the "
                              "chain's head (or the log is empty)")
            return
        self.stdout.write(f"audit checkpoint written: {written.path} (seq {written.checkpoint.seq})")
