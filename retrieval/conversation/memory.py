"""Facts and memory, kept per agent and end user.

Facts are key=value pairs the agent sets and deletes. Memories are what the agent asks
to remember (`store_memory`): the same text stored twice is one entry, remembered again.
A message finds memories two ways, by its keywords (the share of
the message's keywords a memory holds) and by meaning (cosine similarity of the two
embeddings); a memory's relevance is the better of the two, and its score that
relevance boosted by recency (MEMORY_HALF_LIFE_DAYS, MEMORY_RECENCY_WEIGHT). Only the
end user's erasure deletes memories: all of them, the facts, and the traces of their
conversations, audited (the audit entry names the user by a keyed hash, never in clear:
the log is kept for good)."""

from __future__ import annotations

import hashlib
import logging
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone
from django.utils.crypto import salted_hmac

from catalog.audit.log import Action, Actor, AuditEvent, audit_append
from catalog.embedder import get_embedder, vector_literal
from catalog.models import Agent
from catalog.reads import read_alias, read_connection
from retrieval.conversation.facts_text import facts_text
from retrieval.conversation.keywords import keywords
from retrieval.models import Fact, MemoryEntry, Trace

log = logging.getLogger(__name__)

DAY_SECONDS = 86_400.0
# A memory's relevance to a message is boosted by its recency,
# score = relevance * (1 + weight * 2^(-age / half-life)) / (1 + weight): a memory stored
# just now keeps its whole relevance, a very old one 1 / (1 + weight) of it.
MEMORY_HALF_LIFE_DAYS = 30.0
MEMORY_RECENCY_WEIGHT = 0.5
# An end user with at most this many memories has them ranked by meaning exactly (sorted);
# more, and the HNSW index is walked.
MEMORY_EXACT_MAX = 5000


# --- facts -------------------------------------------------------------------------------


def facts_of(*, agent: Agent, user_id: str) -> list[Fact]:
    return list(Fact.objects.filter(agent=agent, user_id=user_id).order_by("key"))


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


def facts_line(facts: list[Fact]) -> str:
    """Seed 001's `[facts: key=value, ...]`, escaped (retrieval.conversation.facts_text;
    '' when there are none)."""
    return facts_text((fact.key, fact.value) for fact in facts)


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


def memories_of(*, agent: Agent, user_id: str) -> QuerySet[MemoryEntry]:
    """Newest (last stored) first."""
    return MemoryEntry.objects.filter(agent=agent, user_id=user_id).defer("embedding").order_by("-stored_at", "-id")


# --- searching ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryHit:
    entry_id: int
    content: str
    stored_at: datetime
    lexical: float  # share of the message's keywords the memory holds
    similarity: float | None  # cosine similarity of the embeddings (None: no vector to compare)
    recency: float  # the boost's factor, 1 / (1 + weight) .. 1
    score: float  # max(lexical, similarity) * recency

    @property
    def relevance(self) -> float:
        return max(self.lexical, self.similarity or 0.0)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.entry_id, "content": self.content, "stored_at": self.stored_at,
                "lexical": round(self.lexical, 4),
                "similarity": None if self.similarity is None else round(self.similarity, 4),
                "recency": round(self.recency, 4), "score": round(self.score, 4)}


def recency_factor(stored_at: datetime, now: datetime) -> float:
    weight = MEMORY_RECENCY_WEIGHT
    age_days = max((now - stored_at).total_seconds(), 0.0) / DAY_SECONDS
    return (1 + weight * math.pow(2.0, -age_days / MEMORY_HALF_LIFE_DAYS)) / (1 + weight)


def memory_search(*, agent: Agent, user_id: str, text: str, limit: int, vector: str | None = None,
                  now: datetime | None = None) -> list[MemoryHit]:
    """The end user's memories most relevant to `text`, best score first. `vector`: the
    text's embedding when the caller has it (pgvector's literal); otherwise it is made
    here, when the model is loaded (without it, keywords alone)."""
    if limit <= 0:
        return []
    now = now or timezone.now()
    depth = max(limit * 10, 50)
    words = keywords(text)
    lexical = _lexical(agent, user_id, words, depth) if words else {}
    if vector is None and (embedder := get_embedder()) is not None and text.strip():
        vector = vector_literal(embedder.embed_head(text)[0])
    similar = _similar(agent, user_id, vector, depth) if vector is not None else {}
    ids = set(lexical) | set(similar)
    if not ids:
        return []
    rows = MemoryEntry.objects.filter(pk__in=ids).values_list("pk", "content", "stored_at")
    hits = []
    for pk, content, stored_at in rows:
        share = lexical.get(pk, 0) / len(words) if words else 0.0
        similarity = similar.get(pk)  # None beyond the nearest `depth`: below theirs, so its keywords decide
        recency = recency_factor(stored_at, now)
        relevance = max(share, similarity or 0.0)
        hits.append(MemoryHit(pk, content, stored_at, share, similarity, recency, relevance * recency))
    hits.sort(key=lambda hit: (-hit.score, -hit.stored_at.timestamp(), -hit.entry_id))
    return hits[:limit]


def _lexical(agent: Agent, user_id: str, words: list[str], depth: int) -> dict[int, int]:
    """Memory id -> how many of `words` it holds, for those holding any (the GIN index
    on keywords finds them)."""
    with read_connection().cursor() as cursor:
        cursor.execute("""
            SELECT id, cardinality(ARRAY(SELECT unnest(keywords) INTERSECT SELECT unnest(%(words)s::varchar[])))
                AS matched
            FROM retrieval_memoryentry
            WHERE agent_id = %(agent)s AND user_id = %(user)s AND keywords && %(words)s::varchar[]
            ORDER BY matched DESC, stored_at DESC LIMIT %(depth)s
            """, {"agent": agent.pk, "user": user_id, "words": words, "depth": depth})
        return {pk: matched for pk, matched in cursor.fetchall()}


def _similar(agent: Agent, user_id: str, vector: str, depth: int) -> dict[int, float]:
    """Memory id -> cosine similarity, for the `depth` nearest: sorted exactly when the
    end user has at most MEMORY_EXACT_MAX memories, else by the HNSW index."""
    params: dict[str, Any] = {"agent": agent.pk, "user": user_id, "vector": vector, "depth": depth,
              "cap": MEMORY_EXACT_MAX + 1}
    where = "agent_id = %(agent)s AND user_id = %(user)s AND embedding IS NOT NULL"
    with transaction.atomic(using=read_alias()), read_connection().cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM (SELECT 1 FROM retrieval_memoryentry WHERE {where} LIMIT %(cap)s) n",
                       params)
        (count,) = cursor.fetchone()
        sql = f"""
            SELECT id, 1 - (embedding <=> %(vector)s::vector) FROM retrieval_memoryentry
            WHERE {where} ORDER BY {{order}} LIMIT %(depth)s
            """
        exact = sql.format(order="(embedding <=> %(vector)s::vector) + 0")  # "+ 0": an order no index serves
        if count <= MEMORY_EXACT_MAX:
            cursor.execute(exact, params)
            return {pk: float(similarity) for pk, similarity in cursor.fetchall()}
        cursor.execute("SELECT '[0]'::vector, set_config('hnsw.ef_search', %s, true), "
                       "set_config('hnsw.iterative_scan', 'relaxed_order', true)", [str(min(max(depth, 40), 1000))])
        cursor.execute(sql.format(order="embedding <=> %(vector)s::vector"), params)
        rows = cursor.fetchall()
        if len(rows) < depth:  # the scan stopped short (hnsw.max_scan_tuples): the others' memories around
            cursor.execute(exact, params)
            rows = cursor.fetchall()
        return {pk: float(similarity) for pk, similarity in rows}


# --- end users, for the curators' page -----------------------------------------------------


@dataclass(frozen=True)
class EndUser:
    user_id: str
    facts: int
    memories: int
    last_stored: datetime | None


_KEPT = """
    SELECT user_id, count(*) AS facts, 0 AS memories, NULL::timestamptz AS last_stored
    FROM retrieval_fact WHERE agent_id = %(agent)s AND user_id ILIKE %(like)s GROUP BY user_id
    UNION ALL
    SELECT user_id, 0, count(*), max(stored_at)
    FROM retrieval_memoryentry WHERE agent_id = %(agent)s AND user_id ILIKE %(like)s GROUP BY user_id
"""


def _like(contains: str) -> str:
    return "%" + contains.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def end_users(*, agent: Agent, contains: str = "", limit: int = 100, offset: int = 0) -> list[EndUser]:
    """A page of the end users the agent keeps facts or memories of (their id contains
    `contains`), the most recently active first."""
    with read_connection().cursor() as cursor:
        cursor.execute(f"""
            SELECT user_id, sum(facts)::int, sum(memories)::int, max(last_stored) FROM ({_KEPT}) kept
            GROUP BY user_id ORDER BY max(last_stored) DESC NULLS LAST, user_id LIMIT %(limit)s OFFSET %(offset)s
            """, {"agent": agent.pk, "like": _like(contains), "limit": limit, "offset": offset})
        return [EndUser(*row) for row in cursor.fetchall()]


def end_users_count(*, agent: Agent, contains: str = "") -> int:
    with read_connection().cursor() as cursor:
        cursor.execute(f"SELECT count(DISTINCT user_id) FROM ({_KEPT}) kept",
                       {"agent": agent.pk, "like": _like(contains)})
        return int(cursor.fetchone()[0])


# --- export and erasure ---------------------------------------------------------------------


def memory_export(*, agent: Agent, user_id: str) -> dict[str, Any]:
    """Everything kept about the end user, as the API returns it."""
    return {"agent": agent.name, "user_id": user_id, "exported_at": timezone.now(),
            "facts": [{"key": f.key, "value": f.value, "updated_at": f.updated_at}
                      for f in facts_of(agent=agent, user_id=user_id)],
            "memories": [{"id": m.pk, "content": m.content, "created_at": m.created_at, "stored_at": m.stored_at,
                          "times": m.times} for m in memories_of(agent=agent, user_id=user_id)]}


def end_user_digest(agent: Agent, user_id: str, *, secret: str | None = None) -> str:
    """How the audit log and the traces name one agent's end user: a keyed hash of the
    agent and the id (SECRET_KEY; `secret`: another), so whoever holds an id can check it
    was erased, nothing holds anyone's id in clear, and one person is not linkable
    across agents."""
    return salted_hmac("lectern.memory.end_user", f"{agent.pk}:{user_id}", secret=secret,
                       algorithm="sha256").hexdigest()


def end_user_digests(agent: Agent, user_id: str) -> list[str]:
    """The end user's digest under the current secret and each earlier one (rotating
    SECRET_KEY must not hide their traces from their erasure)."""
    return [end_user_digest(agent, user_id, secret=str(secret))
            for secret in (settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS)]


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
