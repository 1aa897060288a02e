"""What each process caches, and resetting it in every process.

A process keeps two things in memory: the embedding model (catalog.embedder, loaded
once, or the reason it could not be, remembered until reset) and each catalog's
detection index (retrieval.enrichment.detection: source cards, the tag matcher, the
profile matrix). `runtime_reset` drops both, loads the model again and says how that
went; it is curator-only and audited, and the audit entry it appends is also how the
other processes hear of it:

- the process that answers the reset applies it at once;
- every other process (the other gunicorn workers, the django-q2 worker, a `manage.py
  mcp` server) applies it on its next request, task or tool call, at most
  LECTERN_RUNTIME_POLL_SECONDS later: `runtime_follow` reads the newest `runtime.reset`
  entry (one index lookup on the audit log's (action, seq) index, at most once per
  interval per process) and resets its own caches when that entry is newer than the
  one it applied; on its first look, when the entry is newer than the process (a
  process that started later filled its caches after the reset).

0 turns following off (the test settings: a poll would add a query to whichever
request happened to come due, and the query counts are pinned); a process then applies
only the resets it answers itself.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import DatabaseError, transaction

from catalog.audit.log import Action, Actor, AuditEvent, audit_append
from catalog.auth import is_curator
from catalog.embedder import embedder_status, reset_embedder
from catalog.errors import ForbiddenError
from catalog.models import Agent, AuditEntry
from retrieval.enrichment.detection import forget_indexes

logger = logging.getLogger(__name__)

STARTED_AT = time.time()  # this module is imported as the app starts (RetrievalConfig.ready)

_applied: int | None = None  # seq of the newest reset this process has applied; None: not looked yet
_checked = float("-inf")  # time.monotonic() of the last look
_follow_lock = threading.Lock()


@dataclass(frozen=True)
class ResetRecord:
    seq: int
    at: datetime
    by: str  # the person's username or the agent's name


@dataclass(frozen=True)
class ResetOutcome:
    reset: ResetRecord
    indexes_dropped: int
    embeddings: dict[str, str | None]  # catalog.embedder.embedder_status() after the reload


def last_reset() -> ResetRecord | None:
    entry = (AuditEntry.objects.filter(action=Action.RUNTIME_RESET).order_by("-seq")
             .only("seq", "at", "actor_name").first())
    return None if entry is None else ResetRecord(entry.seq, entry.at, entry.actor_name)


def applied_reset() -> int | None:
    """The seq of the newest reset this process has applied (None: it has not looked)."""
    return _applied


def caches_reset() -> int:
    """Drop this process's cached detection indexes and its embedding model (loaded
    again on next use); how many indexes were dropped."""
    dropped = forget_indexes()
    reset_embedder()
    return dropped


def runtime_reset(*, by: User | AnonymousUser | Agent) -> ResetOutcome:
    """The reset: audited first (no reset goes unrecorded; the entry tells the other
    processes), then this process's caches dropped and the model loaded again. A
    curator only: a person in the curator group or an agent marked curator."""
    global _applied, _checked
    if not is_curator(by):
        raise ForbiddenError("only curators reset the model and the caches", code="forbidden")
    with transaction.atomic():
        entry = audit_append(AuditEvent(Action.RUNTIME_RESET, Actor.of(by), payload={"pid": os.getpid()}))
    with _follow_lock:
        dropped = caches_reset()
        _applied, _checked = entry.seq, time.monotonic()
    return ResetOutcome(ResetRecord(entry.seq, entry.at, entry.actor_name), dropped, embedder_status())


def runtime_follow() -> None:
    """Apply a reset another process answered, if one came since this process last
    looked (at most once per LECTERN_RUNTIME_POLL_SECONDS; see the module docstring).
    On its first look a process applies only a reset made after it started (its caches
    were all filled since). Never raises for the database: a request that needs it will
    say so itself."""
    global _applied, _checked
    poll = settings.LECTERN_RUNTIME_POLL_SECONDS
    if poll <= 0 or time.monotonic() - _checked < poll:
        return
    if not _follow_lock.acquire(blocking=False):  # another thread of this process is looking
        return
    try:
        if time.monotonic() - _checked < poll:
            return
        try:
            newest = AuditEntry.objects.filter(action=Action.RUNTIME_RESET).order_by("-seq") \
                .values_list("seq", "at").first()
        except DatabaseError:
            return
        _checked = time.monotonic()
        seq, at = newest or (0, None)
        if _applied is None:
            due = at is not None and at.timestamp() > STARTED_AT
        else:
            due = seq > _applied
        if due:
            dropped = caches_reset()
            logger.info("applied reset #%d answered by another process: model to reload, %d detection index%s "
                        "dropped (pid %d)", seq, dropped, "" if dropped == 1 else "es", os.getpid())
        _applied = seq
    finally:
        _follow_lock.release()


def follow_before_task(**kwargs: object) -> None:
    """django-q2's pre_execute: the worker follows resets before each task."""
    runtime_follow()
