"""Writes of facts and memory, kept per agent and end user (the reads are selectors.py).

Facts are key=value pairs the agent sets and deletes. Memories are what the agent asks
to remember (`store_memory`): the same text stored twice is one entry, remembered again,
its embedding and keywords kept for the searches. Only the
end user's erasure deletes memories: all of them, the facts, and the traces of their
conversations, audited (the audit entry names the user by a keyed hash, never in clear:
the log is kept for good)."""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from catalog.audit.log import Action, Actor, AuditEvent, audit_append
from catalog.embedder import get_embedder
from catalog.models import Agent
from retrieval.memory.keywords import keywords
from retrieval.memory.selectors import end_user_digests
from retrieval.models import Fact, MemoryEntry, Trace

log = logging.getLogger(__name__)


# --- facts -------------------------------------------------------------------------------


def fact_set(*, agent: Agent, user_id: str, key: str, value: str) -> tuple[Fact, bool]:
    """(fact, created): the key's value set, replacing an earlier one."""
    fact, created = Fact.objects.update_or_create(agent=agent, user_id=user_id, key=key, defaults={"value": value})
    return fact, created


def fact_delete(*, agent: Agent, user_id: str, key: str) -> Fact | None:
    """The fact deleted (None: there was no such fact)."""
    fact = Fact.objects.filter(agent=agent, user_id=user_id, key=key).first()
    if fact is not None:
        Fact.objects.filter(pk=fact.pk).delete()
    return fact


# --- storing --------------------------------------------------------------------------------


def _folded(content: str) -> str:
    """What makes two memories the same: the words, whatever their spacing and case."""
    return " ".join(content.split()).casefold()


def memory_store(*, agent: Agent, user_id: str, content: str) -> tuple[MemoryEntry, bool]:
    """(entry, created). Stored again, a text is the same entry, remembered again: its
    `times` counts up and its recency starts over."""
    digest = hashlib.sha256(_folded(content).encode()).hexdigest()
    now = timezone.now()
    found = MemoryEntry.objects.filter(agent=agent, user_id=user_id, content_sha256=digest)
    embedder = get_embedder()
    if found.update(times=F("times") + 1, stored_at=now):
        entry = found.get()
        if entry.embedding is None and embedder is not None:  # stored while no model was loaded
            entry.embedding = embedder.embed([entry.content])[0]
            found.update(embedding=entry.embedding)
        return entry, False
    embedding = embedder.embed([content.strip()])[0] if embedder is not None else None
    with transaction.atomic():
        entry, created = MemoryEntry.objects.get_or_create(
            agent=agent, user_id=user_id, content_sha256=digest,
            defaults={"content": content.strip(), "keywords": keywords(content), "embedding": embedding,
                      "stored_at": now})
        if not created:  # stored by another call between the two statements
            found.update(times=F("times") + 1, stored_at=now)
            entry.refresh_from_db()
    return entry, created


# --- searching ------------------------------------------------------------------------------


# --- end users, for the curators' page -----------------------------------------------------


# --- export and erasure ---------------------------------------------------------------------


def memory_erase(*, agent: Agent, user_id: str, by: Any) -> dict[str, int]:
    """Delete the end user's memories and facts, and the traces of their conversations
    (which hold their messages and what was recalled for them), and audit it;
    {"memories": n, "facts": n, "traces": n}."""
    digests = end_user_digests(agent, user_id)
    digest = digests[0]
    theirs = Q()
    for known in digests:
        theirs |= Q(steps__contains=[{"pass": "conversation", "end_user": known}])
    with transaction.atomic():
        memories, _ = MemoryEntry.objects.filter(agent=agent, user_id=user_id).delete()
        facts, _ = Fact.objects.filter(agent=agent, user_id=user_id).delete()
        traces, _ = Trace.objects.filter(theirs, agent=agent, surface=Trace.Surface.CONVERSATION).delete()
        counts = {"memories": memories, "facts": facts, "traces": traces}
        audit_append(AuditEvent(Action.MEMORY_ERASED, Actor.of(by), agent_id=agent.pk,
                                payload={"end_user": digest, **counts}))
    log.info("erased %d memories, %d facts and %d conversation traces of an end user of %s", memories, facts,
             traces, agent.name)
    return counts
