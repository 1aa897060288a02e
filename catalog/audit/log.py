"""Appending to the audit log and verifying it (the chain's links, then the checkpoints
kept outside the database: catalog.audit.checkpoints).

Appends serialise on one transaction-level advisory lock: the appender reads the last
entry and writes the next ones while holding it, and the lock is released only when its
transaction commits, so the next appender reads what it wrote and the chain never
forks. Services append last in their transaction (after every row lock they take), so
the lock is held for the commit only and never waited on while holding it.

The log stands on the floor (catalog) so that every service, whichever app it lives
in, writes its entries inline, in the transaction of the change they record (as
Zulip's services write RealmAuditLog): no signal between a change and its entry. A
service whose entries drive a channel hands them on itself (approvals' request services
call approvals.channels.events.events_record with what audit_append_many returned).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import connection, transaction
from django.utils import timezone

from catalog.audit.anchors import Checkpoint, CheckpointInvalid, first_contradiction, staleness
from catalog.audit.chain import GENESIS, Break, entry_hash, first_break
from catalog.audit.checkpoints import checkpoint_directory, checkpoints_read, verifying_keys
from catalog.models import Agent, AuditEntry

logger = logging.getLogger(__name__)

AUDIT_LOCK = (0x4C41, 1)  # "LA": Lectern audit; catalog's source locks use (0x4C43, source id)


class Action(StrEnum):
    REQUEST_RAISED = "request.raised"
    APPROVAL_RECORDED = "request.approval_recorded"  # one approval of several required
    REQUEST_APPROVED = "request.approved"
    REQUEST_REJECTED = "request.rejected"
    REQUEST_REVOKED = "request.revoked"
    REQUEST_EXPIRED = "request.expired"
    REQUEST_LAPSED = "request.lapsed"
    REQUEST_NOTIFIED = "request.notified"  # reviewers were e-mailed about it
    POLICY_CREATED = "policy.created"
    POLICY_UPDATED = "policy.updated"
    POLICY_DELETED = "policy.deleted"
    SOURCE_CHANGED = "source.changed"
    TOKEN_ISSUED = "token.issued"
    TOKEN_REVOKED = "token.revoked"
    AGENT_UPDATED = "agent.updated"  # scope, pinned references or profile
    RUNTIME_RESET = "runtime.reset"  # the embedding model reloaded and cached matchers dropped (status reset)
    WEBHOOK_ENDPOINT_CREATED = "webhook.endpoint_created"
    WEBHOOK_ENDPOINT_UPDATED = "webhook.endpoint_updated"
    WEBHOOK_ENDPOINT_DELETED = "webhook.endpoint_deleted"
    WEBHOOK_SECRET_ROTATED = "webhook.secret_rotated"
    DECISION_RECEIVED = "decision.received"  # by which channel (webhook message, decision file) decisions came
    CHUNKING_CHANGED = "catalog.chunking_changed"  # a tuning run's shadow chunking applied to the live catalog
    RANKING_CHANGED = "catalog.ranking_changed"  # its ranking settings, by hand or a tuning run applied
    MEMORY_ERASED = "memory.erased"  # an end user's facts and memories, at their request (retrieval.conversations)


@dataclass(frozen=True)
class Actor:
    """Who did it: a person, an agent, Lectern itself (a task, a reindex, a command), or
    a channel acting for no one person."""

    kind: str  # AuditEntry.ActorKind
    name: str
    id: int | None = None

    @classmethod
    def of(cls, who: AbstractBaseUser | AnonymousUser | Agent | None, *, system: str = "system") -> Actor:
        if isinstance(who, Agent):
            return cls(AuditEntry.ActorKind.AGENT, who.name, who.pk)
        if who is None or not who.is_authenticated:
            return cls(AuditEntry.ActorKind.SYSTEM, system)
        return cls(AuditEntry.ActorKind.USER, who.get_username(), who.pk)

    @classmethod
    def channel(cls, name: str) -> Actor:
        return cls(AuditEntry.ActorKind.CHANNEL, name)


@dataclass(frozen=True)
class AuditEvent:
    action: str
    actor: Actor
    request_id: int | None = None
    policy_id: int | None = None
    source_id: int | None = None
    agent_id: int | None = None
    fingerprint: str = ""
    payload: dict[str, Any] = field(default_factory=dict)


def audit_append(event: AuditEvent) -> AuditEntry:
    return audit_append_many([event])[0]


def audit_append_many(events: Sequence[AuditEvent]) -> list[AuditEntry]:
    """Append `events` in order, chained after the last entry; in the caller's
    transaction (so an event is logged if and only if what it records commits)."""
    if not events:
        return []
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", AUDIT_LOCK)
        last = AuditEntry.objects.order_by("-seq").values_list("seq", "hash").first()
        seq, prev = last or (0, GENESIS)
        now = timezone.now()
        entries = []
        for event in events:
            seq += 1
            entry = AuditEntry(
                seq=seq, at=now, actor_kind=event.actor.kind, actor_id=event.actor.id,
                actor_name=event.actor.name[:150], action=event.action, request_id=event.request_id,
                policy_id=event.policy_id, source_id=event.source_id, agent_id=event.agent_id,
                fingerprint=event.fingerprint, payload=_as_stored(event.payload), prev_hash=prev)
            entry.hash = prev = entry_hash(_record(entry), prev)
            entries.append(entry)
        return AuditEntry.objects.bulk_create(entries)


def _as_stored(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload as it comes back from jsonb (string keys, JSON types), so the hash
    computed now is the one recomputed from the stored row."""
    stored: dict[str, Any] = json.loads(json.dumps(payload, default=str))
    return stored


def _record(entry: AuditEntry) -> dict[str, Any]:
    return {"seq": entry.seq, "at": entry.at, "actor_kind": entry.actor_kind, "actor_id": entry.actor_id,
            "actor_name": entry.actor_name, "action": entry.action, "request_id": entry.request_id,
            "policy_id": entry.policy_id, "source_id": entry.source_id, "agent_id": entry.agent_id,
            "fingerprint": entry.fingerprint, "payload": entry.payload, "prev_hash": entry.prev_hash,
            "hash": entry.hash}


@dataclass(frozen=True)
class Verification:
    """What audit_verify found: the entries read and the first broken link, or else the
    first checkpoint that does not hold (`problem`); and the checkpoints checked. When
    all of that holds, `stale` says the checkpoints stopped while the log grew."""

    entries: int
    broken: Break | None
    problem: str | None = None
    checkpoints: tuple[tuple[str, Checkpoint], ...] | None = None  # None: not checked
    directory: Path | None = None
    stale: str | None = None

    def __str__(self) -> str:
        if self.broken is not None:
            return str(self.broken)
        if self.problem is not None:
            return self.problem
        if self.stale is not None:
            return self.stale
        summary = f"audit chain intact: {self.entries} entries"
        if self.checkpoints is None:
            return summary
        if not self.checkpoints:
            return f"{summary}; no checkpoint in {self.directory} yet"
        name, newest = self.checkpoints[-1]
        holds = "1 checkpoint holds" if len(self.checkpoints) == 1 else f"{len(self.checkpoints)} checkpoints hold"
        return f"{summary}; {holds} (newest: seq {newest.seq}, {name})"


def audit_verify(*, batch: int = 2000, checkpoints: bool = True) -> Verification:
    """Steps: read the checkpoints first (any written later names an entry the walk will
    read), their signatures checked and each naming the one before it; walk the whole
    chain in seq order for its first broken link; then each checkpoint's entry must be
    in the chain with the hash it recorded; last, the entries after the newest must be
    recent enough that no checkpoint is yet due. `checkpoints=False`: the chain's own
    links only."""
    if not checkpoints:
        return Verification(*first_break(_records(batch)))
    directory = checkpoint_directory()
    try:
        found = tuple(checkpoints_read(directory, verifying_keys()))
    except CheckpointInvalid as exc:
        return Verification(0, None, problem=str(exc), checkpoints=(), directory=directory)
    count, broken = first_break(_records(batch))
    if broken is not None:
        return Verification(count, broken)
    hashes = dict(AuditEntry.objects.filter(seq__in={point.seq for _, point in found}).values_list("seq", "hash"))
    problem = first_contradiction(found, hashes, last_seq=count)
    stale = None if problem else _staleness(found[-1] if found else None, directory)
    return Verification(count, None, problem=problem, checkpoints=found, directory=directory, stale=stale)


def _staleness(newest: tuple[str, Checkpoint] | None, directory: Path) -> str | None:
    """Whether the oldest entry after the newest checkpoint waited too long for one."""
    after = AuditEntry.objects.filter(seq__gt=newest[1].seq if newest else 0).order_by("seq")
    return staleness(newest, after.values_list("seq", "at").first(), now=timezone.now(),
                     minutes=settings.LECTERN_AUDIT_CHECKPOINT_MINUTES, folder=str(directory))


def _records(batch: int) -> Iterator[dict[str, Any]]:
    for entry in AuditEntry.objects.order_by("seq").iterator(chunk_size=batch):
        yield _record(entry)
