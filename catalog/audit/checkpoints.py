"""Audit checkpoints as files: the chain's head written outside the database, signed.

A checkpoint is one JSON file in LECTERN_AUDIT_CHECKPOINT_DIR, named by its time and seq
(`audit-checkpoint-20261123T055400123456Z-000000000124.json`, so names sort in the order
they were written), made once and never rewritten: written aside, then linked into
place. It holds the newest entry's seq and hash, the count of entries, the time, the
checkpoint before it (file name and content hash), the signing key's id and an
HMAC-SHA256 signature (catalog.audit.anchors); never a secret. The schedule
`lectern-audit-checkpoint` and `manage.py audit_checkpoint` write one when the chain's
head has moved since the newest, one writer at a time; `manage.py audit_verify` checks
them all, with the current key or any it replaced (the fallbacks).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
from dataclasses import dataclass, replace
from datetime import UTC
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Window
from django.utils import timezone

from catalog.audit.anchors import Checkpoint, CheckpointInvalid, Link, checkpoint_key, checkpoint_parse, first_gap
from catalog.audit.chain import GENESIS, timestamp
from catalog.models import AuditEntry

PREFIX = "audit-checkpoint-"
SUFFIX = ".json"
# Writers take turns, so each names the newest before it and the checkpoints never fork
# (beside the log's own append lock, catalog.audit.log.AUDIT_LOCK).
CHECKPOINT_LOCK = (0x4C41, 2)


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
    """Every checkpoint in `directory` as (file name, checkpoint), oldest first, each
    signature checked and each naming the one before it; CheckpointInvalid naming the
    first file that does not hold."""
    found = []
    for path in checkpoint_files(directory):
        try:
            found.append((_link_to(path), checkpoint_parse(path.read_text(encoding="utf-8", errors="replace"), keys)))
        except CheckpointInvalid as exc:
            raise CheckpointInvalid(f"audit checkpoint {path.name}: {exc}") from None
    gap = first_gap(found)
    if gap is not None:
        raise CheckpointInvalid(gap)
    return [(link.name, point) for link, point in found]


def _link_to(path: Path) -> Link:
    return Link(path.name, hashlib.sha256(path.read_bytes()).hexdigest())


def audit_head() -> Checkpoint:
    """The chain's newest entry and the count of entries, now (seq 0 when empty)."""
    # One statement, so the count and the head are read in one snapshot.
    head = (AuditEntry.objects.annotate(total=Window(Count("seq"))).order_by("-seq")
            .values_list("seq", "hash", "total").first())
    seq, digest, count = head or (0, GENESIS, 0)
    return Checkpoint(seq=seq, hash=digest, count=count, at=timestamp(timezone.now()))


def audit_checkpoint_write() -> Written | None:
    """Steps, holding CHECKPOINT_LOCK until the caller's transaction ends: read the
    chain's head and the newest checkpoint; None when the chain is empty or the newest
    already names the head; else write one naming the head and the newest."""
    directory = checkpoint_directory()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", CHECKPOINT_LOCK)
        head = audit_head()
        newest = checkpoint_files(directory)[-1:]
        if head.seq == 0 or (newest and _names(newest[0], head)):
            return None
        head = replace(head, previous=_link_to(newest[0]) if newest else None)
        return Written(_write(directory, head, signing_key()), head)


def _names(path: Path, head: Checkpoint) -> bool:
    try:
        last = checkpoint_parse(path.read_text(encoding="utf-8", errors="replace"), verifying_keys())
    except CheckpointInvalid:
        return False  # audit_verify names it; a new checkpoint is written after it
    return (last.seq, last.hash) == (head.seq, head.hash)


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
