"""Audit checkpoints as files: the chain's head written outside the database, signed.

A checkpoint is one JSON file in LECTERN_AUDIT_CHECKPOINT_DIR, named by its time and seq
(`audit-checkpoint-20261123T055400123456Z-000000000124.json`, so names sort in the order
they were written), made once and never rewritten: written aside, then linked into
place. It holds the newest entry's seq and hash, the count of entries, the time, the
signing key's id and an HMAC-SHA256 signature (approvals.audit.anchors); never a secret.
The schedule `lectern-audit-checkpoint` and `manage.py audit_checkpoint` write one when
the chain's head has moved since the newest; `manage.py audit_verify` checks them all,
with the current key or any it replaced (the fallbacks).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path

from django.conf import settings
from django.db.models import Count, Window
from django.utils import timezone

from approvals.audit.anchors import Checkpoint, CheckpointInvalid, checkpoint_key, checkpoint_parse
from approvals.audit.chain import GENESIS, timestamp
from approvals.models import AuditEntry

PREFIX = "audit-checkpoint-"
SUFFIX = ".json"


class CheckpointWriteFailed(Exception):
    """The checkpoint directory cannot be written: one line saying where and why."""


@dataclass(frozen=True)
class Written:
    path: Path
    checkpoint: Checkpoint


def signing_key() -> bytes:
    """LECTERN_AUDIT_CHECKPOINT_KEY, else SECRET_KEY, as a key of its own: new
    checkpoints are always signed with it."""
    return verifying_keys()[0]


def verifying_keys() -> list[bytes]:
    """The signing key, then those it replaced, so a key rotated with the old one kept
    still verifies the checkpoints it signed: LECTERN_AUDIT_CHECKPOINT_KEY_FALLBACKS, and
    for the key derived from SECRET_KEY, SECRET_KEY_FALLBACKS too (a key of its own
    replaces SECRET_KEY here alone, so SECRET_KEY's old values do not apply to it)."""
    current = settings.LECTERN_AUDIT_CHECKPOINT_KEY or settings.SECRET_KEY
    configured: list[str | bytes] = [current, *settings.LECTERN_AUDIT_CHECKPOINT_KEY_FALLBACKS]
    if not settings.LECTERN_AUDIT_CHECKPOINT_KEY:
        configured += settings.SECRET_KEY_FALLBACKS
    return [checkpoint_key(secret) for secret in configured]


def checkpoint_directory() -> Path:
    return Path(settings.LECTERN_AUDIT_CHECKPOINT_DIR)


def checkpoint_files(directory: Path) -> list[Path]:
    """The checkpoint files in `directory`, oldest first (none when it does not exist)."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.name.startswith(PREFIX) and p.name.endswith(SUFFIX))


def checkpoints_read(directory: Path, keys: list[bytes]) -> list[tuple[str, Checkpoint]]:
    """Every checkpoint in `directory` as (file name, checkpoint), signatures checked;
    CheckpointInvalid naming the first file that does not hold."""
    found = []
    for path in checkpoint_files(directory):
        try:
            found.append((path.name, checkpoint_parse(path.read_text(encoding="utf-8", errors="replace"), keys)))
        except CheckpointInvalid as exc:
            raise CheckpointInvalid(f"audit checkpoint {path.name}: {exc}") from None
    return found


def audit_head() -> Checkpoint:
    """The chain's newest entry and the count of entries, now (seq 0 when empty)."""
    # One statement, so the count and the head are read in one snapshot.
    head = (AuditEntry.objects.annotate(total=Window(Count("seq"))).order_by("-seq")
            .values_list("seq", "hash", "total").first())
    seq, digest, count = head or (0, GENESIS, 0)
    return Checkpoint(seq=seq, hash=digest, count=count, at=timestamp(timezone.now()))


def audit_checkpoint_write() -> Written | None:
    """Write a checkpoint of the chain's head, unless the chain is empty or the newest
    checkpoint already names that head (None then)."""
    directory = checkpoint_directory()
    head = audit_head()
    if head.seq == 0:
        return None
    newest = checkpoint_files(directory)[-1:]
    if newest:
        try:
            last = checkpoint_parse(newest[0].read_text(encoding="utf-8", errors="replace"), verifying_keys())
        except CheckpointInvalid:
            last = None  # audit_verify names it; a new checkpoint is written beside it
        if last is not None and (last.seq, last.hash) == (head.seq, head.hash):
            return None
    return Written(_write(directory, head, signing_key()), head)


def _write(directory: Path, checkpoint: Checkpoint, key: bytes) -> Path:
    """Aside, flushed to disk, then linked into place: a reader never sees half a file,
    and an existing checkpoint is never replaced."""
    moment = timezone.now().astimezone(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    path = directory / f"{PREFIX}{moment}-{checkpoint.seq:012d}{SUFFIX}"
    aside = directory / f".{path.name}.{secrets.token_hex(4)}.tmp"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with open(aside, "x", encoding="utf-8") as handle:
            handle.write(json.dumps(checkpoint.signed(key), indent=1, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.link(aside, path)
    except OSError as exc:
        raise CheckpointWriteFailed(f"audit checkpoint: cannot write to {directory}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(OSError):
            aside.unlink()
    return path
