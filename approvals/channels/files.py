"""The decision-file channel: a JSON file of decisions dropped into
LECTERN_DECISION_DIR is applied once, all or nothing, then moved aside.

A file is `{"request_id": 17, "fingerprint": "9f2c...", "verdict": "approve", "reviewer":
"rita", "comment": "..."}` or a list of such objects: each names the request it decides
and the content (the request's fingerprint) the reviewer looked at, and a decision for
other content than the request's is refused (`fingerprint_mismatch`). Only `*.json`
files at the top of the directory are read (write under another name, e.g.
`x.json.tmp`, and rename when done), and only once unmodified for SETTLE (a file still
being written is left for the next run).

1. Claim: rename the file into processing/ under a name of its own. A rename is atomic,
   so of two workers (the schedule and `manage.py apply_decisions`, or two clusters)
   one wins and the other finds the file gone.
2. Validate the whole file (JSON shape, fields, no repeats, every reviewer an active
   user) before deciding anything.
3. Decide every item through request_decide in one transaction, after locking every
   source and request involved in id order (before the audit log's lock, as the
   services require); any refusal rolls them all back.
4. Move it to processed/, or to failed/ beside a `.error.txt` saying why. A database
   that cannot be reached puts the file back, to be read again.

A worker that dies between commit and move leaves the file in processing/; after
CLAIM_LEASE it is claimed again and, its decisions recorded already, refused into
failed/ ("already decided"): never applied twice.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import OperationalError, transaction
from django.utils import timezone

from approvals.models import COMMENT_MAX_CHARS, ApprovalRequest, Decision
from approvals.services.decisions import request_decide
from catalog.audit.log import Action, Actor, AuditEvent, audit_append_many
from catalog.errors import ApplicationError
from catalog.models import ReferenceSource

logger = logging.getLogger(__name__)

SETTLE = timedelta(seconds=5)
CLAIM_LEASE = timedelta(minutes=10)
MAX_FILE_BYTES = 1_048_576
MAX_ITEMS = 1000
FIELDS = {"request_id", "fingerprint", "verdict", "reviewer", "comment"}
REQUIRED = ("request_id", "fingerprint", "verdict", "reviewer")
FINGERPRINT_MAX_CHARS = 64


@dataclass(frozen=True)
class Item:
    request_id: int
    fingerprint: str
    verdict: str
    reviewer: str
    comment: str = ""


class FileRefused(Exception):
    """Why a file is not applied (written beside it in failed/)."""


@dataclass(frozen=True)
class Outcome:
    name: str
    status: str  # processed, failed, retry
    applied: int = 0
    reason: str = ""
    moved_to: Path | None = None


# --- validating (pure) -----------------------------------------------------------------


def parse_decisions(raw: bytes) -> list[Item]:
    """The file's decisions, or FileRefused listing every problem found."""
    if len(raw) > MAX_FILE_BYTES:
        raise FileRefused(f"the file is over {MAX_FILE_BYTES} bytes")
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FileRefused(f"not JSON: {exc}") from None
    entries = document if isinstance(document, list) else [document]
    if not entries or len(entries) > MAX_ITEMS:
        raise FileRefused(f"a file holds one decision or a list of 1 to {MAX_ITEMS}")
    problems = [f"item {n}: {problem}" for n, entry in enumerate(entries, 1) if (problem := _problem(entry))]
    if problems:
        raise FileRefused("; ".join(problems))
    items = [Item(**entry) for entry in entries]
    seen: set[tuple[int, str]] = set()
    for n, item in enumerate(items, 1):
        if (item.request_id, item.reviewer) in seen:
            raise FileRefused(f"item {n}: request {item.request_id} by {item.reviewer!r} appears twice")
        seen.add((item.request_id, item.reviewer))
    return items


def _problem(entry: Any) -> str | None:
    if not isinstance(entry, dict):
        return "not an object"
    unknown, missing = sorted(set(entry) - FIELDS), [name for name in REQUIRED if name not in entry]
    if unknown:
        return f"unknown fields {unknown}"
    if missing:
        return f"missing {missing}"
    request_id, verdict, reviewer, comment = (entry.get(name, "") for name in ("request_id", "verdict", "reviewer",
                                                                                 "comment"))
    if not isinstance(request_id, int) or isinstance(request_id, bool) or request_id < 1:
        return "request_id is a positive integer"
    fingerprint = entry["fingerprint"]
    if not isinstance(fingerprint, str) or not fingerprint or len(fingerprint) > FINGERPRINT_MAX_CHARS:
        return "fingerprint is the content fingerprint of the request (its approval.requested event's)"
    if verdict not in Decision.Verdict.values:
        return f"verdict is approve or reject, not {verdict!r}"
    if not isinstance(reviewer, str) or not reviewer.strip() or len(reviewer) > 150:
        return "reviewer is a username"
    if not isinstance(comment, str) or len(comment) > COMMENT_MAX_CHARS:
        return f"comment is a text of at most {COMMENT_MAX_CHARS} characters"
    if "\x00" in reviewer + comment:
        return "NUL characters are not allowed"
    return None


# --- applying --------------------------------------------------------------------------


def decisions_apply(*, items: list[Item], name: str, digest: str) -> int:
    """Decide every item, all or nothing; FileRefused naming the first item refused."""
    people = {u.username: u for u in User.objects.filter(username__in={i.reviewer for i in items}, is_active=True)}
    unknown = sorted({i.reviewer for i in items} - set(people))
    if unknown:
        raise FileRefused(f"no active user {', '.join(map(repr, unknown))}")
    with transaction.atomic():
        _lock_in_order([i.request_id for i in items])
        decided = []
        for n, item in enumerate(items, 1):
            try:
                decided.append(request_decide(request_id=item.request_id, reviewer=people[item.reviewer],
                                              verdict=item.verdict, comment=item.comment,
                                              channel=Decision.Channel.FILE, fingerprint=item.fingerprint))
            except ApplicationError as exc:
                raise FileRefused(f"item {n} (request {item.request_id}): {exc.message} [{exc.code}]") from None
        audit_append_many([AuditEvent(
            Action.DECISION_RECEIVED, Actor.channel("file"), request_id=request.pk, source_id=request.source_id,
            agent_id=request.agent_id, fingerprint=request.fingerprint,
            payload={"channel": Decision.Channel.FILE, "file": name, "sha256": digest,
                     "reviewer": item.reviewer, "verdict": item.verdict})
            for item, request in zip(items, decided, strict=True)])
    return len(items)


def _lock_in_order(request_ids: list[int]) -> None:
    """Every source, then every request, in id order: request_decide takes them one
    item at a time, and appends to the audit log (whose lock is held to the commit)
    after each; with all the rows held first, no item waits on a row while holding it."""
    source_ids = ApprovalRequest.objects.filter(pk__in=request_ids).values_list("source_id", flat=True)
    list(ReferenceSource.objects.select_for_update(no_key=True).filter(pk__in=source_ids).order_by("pk")
         .values_list("pk", flat=True))
    list(ApprovalRequest.objects.select_for_update().filter(pk__in=request_ids).order_by("pk")
         .values_list("pk", flat=True))


# --- the directory ---------------------------------------------------------------------


def decision_files_apply(*, directory: Path | None = None, now: datetime | None = None) -> list[Outcome]:
    """Apply every settled decision file in `directory` (default LECTERN_DECISION_DIR),
    and those a dead worker left claimed; what became of each."""
    root = Path(directory or settings.LECTERN_DECISION_DIR)
    now = now or timezone.now()
    for sub in ("processing", "processed", "failed"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    outcomes = []
    for path in sorted(root.glob("*.json")):
        if path.name.startswith(".") or not path.is_file() or not _settled(path, now):
            continue
        claimed = _claim(path, root, path.name, now)
        if claimed is not None:
            outcomes.append(_apply_claimed(claimed, root, path.name))
    for path in sorted((root / "processing").glob("*.json")):
        stamp, _, name = path.name.partition(".")
        name = name.partition(".")[2]
        if stamp.isdigit() and datetime.fromtimestamp(int(stamp), tz=UTC) < now - CLAIM_LEASE:
            claimed = _claim(path, root, name, now)
            if claimed is not None:
                outcomes.append(_apply_claimed(claimed, root, name))
    return outcomes


def _settled(path: Path, now: datetime) -> bool:
    try:
        modified = datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)
    except FileNotFoundError:
        return False
    return now - modified >= SETTLE


def _claim(path: Path, root: Path, name: str, now: datetime) -> Path | None:
    """`path` renamed to processing/<claimed at>.<random>.<name>, or None when another
    worker renamed it first."""
    claimed = root / "processing" / f"{int(now.timestamp())}.{secrets.token_hex(4)}.{name}"
    try:
        os.rename(path, claimed)
    except FileNotFoundError:
        return None
    return claimed


def _apply_claimed(claimed: Path, root: Path, name: str) -> Outcome:
    with claimed.open("rb") as handle:
        raw = handle.read(MAX_FILE_BYTES + 1)  # one byte more than allowed says it is too large
    try:
        applied = decisions_apply(items=parse_decisions(raw), name=name, digest=hashlib.sha256(raw).hexdigest())
    except FileRefused as exc:
        moved = _move(claimed, root / "failed", name)
        moved.with_name(moved.name + ".error.txt").write_text(f"{name}: not applied, nothing decided.\n{exc}\n",
                                                              encoding="utf-8")
        logger.warning("decision file %s refused, moved to %s: %s", name, moved, exc)
        return Outcome(name, "failed", reason=str(exc), moved_to=moved)
    except OperationalError as exc:  # the database away: the file goes back, to be read again
        back = root / name
        if not back.exists():
            os.rename(claimed, back)
        logger.warning("decision file %s not applied, the database failed (%s); it will be read again", name, exc)
        return Outcome(name, "retry", reason=str(exc))
    moved = _move(claimed, root / "processed", name)
    logger.info("decision file %s: %d decisions applied, moved to %s", name, applied, moved)
    return Outcome(name, "processed", applied=applied, moved_to=moved)


def _move(claimed: Path, folder: Path, name: str) -> Path:
    """To `folder` as <UTC time>-<name>, never over another file."""
    stamp = datetime.now(tz=UTC).strftime("%Y%m%dT%H%M%SZ")
    target = folder / f"{stamp}-{name}"
    if target.exists():
        target = folder / f"{stamp}-{secrets.token_hex(4)}-{name}"
    os.rename(claimed, target)
    return target
