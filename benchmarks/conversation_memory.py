"""Conversations and memory (issue 14): POST /api/v1/enrich/conversation on a 50- and a
500-message conversation, and memory search with 100,000 memories for one end user and
100,000 spread over 1,000 end users (100 each).

The conversation agent reads the `bench-pages` catalog (100 sources of NFCorpus,
benchmarks/pages.py builds it once), every source approved for it, and holds facts and
100 memories for its end user. A conversation is NFCorpus test queries asked by the
user with the assistant's answers between them, the earlier user messages carrying the
injections an earlier call gave them (sent back, as a client does); the call strips
them, counts every message's tokens, and enriches the newest.

The memories are NFCorpus sentences, stored through the write path's pieces: seed 001's
keywords, and the model's embedding; 20,000 distinct sentences are embedded, and each
memory beyond them reuses one with a small random turn of its vector (renormalised),
so that 200,000 memories cost 20,000 embeddings and the HNSW index still holds 200,000
distinct points. Built once, reused."""

from __future__ import annotations

import hashlib
import json
import random
import re
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from approvals.services.decisions import request_decide
from approvals.services.requests import request_raise
from benchmarks.common import BenchmarkError, Log, bench_person, nfcorpus_test_queries
from benchmarks.pages import pages_catalog_ensure
from catalog.agents import agent_token_rotate
from catalog.auth import REVIEWER_GROUP
from catalog.embedder import get_embedder, vector_literal
from catalog.models import Agent
from retrieval.evaluation.metrics import percentile
from retrieval.memory.keywords import keywords
from retrieval.memory.selectors import memory_search
from retrieval.memory.services import fact_set, memory_store
from retrieval.models import MemoryEntry

AGENT = "bench-conversation"
MEMORY_AGENT = "bench-memory"
ONE_USER = "one-user"
MANY = 1000  # end users of the spread case, 100 memories each
PER_USER = 100
DISTINCT = 20_000  # sentences embedded; the other memories turn one of these
TURN = 0.15  # how far a reused vector is turned (noise norm, before renormalising)
REVIEWER = "bench-conversation-reviewer"


def _sentences(dataset: Path) -> Iterator[str]:
    with (dataset / "corpus.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            for sentence in re.split(r"(?<=[.!?])\s+", json.loads(line).get("text", "")):
                if 40 <= len(sentence) <= 300:
                    yield sentence


def memory_world_ensure(*, dataset: Path, log: Log, users: int = MANY, per_user: int = PER_USER,
                        distinct: int = DISTINCT) -> Agent:
    """The memory agent with users x per_user memories of ONE_USER and per_user of each
    of `users` others (100,000 and 1,000 x 100)."""
    agent = agent_token_rotate(name=MEMORY_AGENT, catalogs=[], is_active=True)[0]
    wanted = per_user * users * 2
    have = MemoryEntry.objects.filter(agent=agent).count()
    if have >= wanted:
        return agent
    embedder = get_embedder()
    if embedder is None:
        raise BenchmarkError("the embedding model is not loaded: memories need their vectors")
    folded: dict[str, str] = {}  # one sentence per text as memory tells texts apart (spacing, case)
    for sentence in _sentences(dataset):
        folded.setdefault(" ".join(sentence.split()).casefold(), sentence)
    sentences = list(folded.values())[:distinct]
    if len(sentences) < distinct:
        raise BenchmarkError(f"{dataset} has only {len(sentences)} usable sentences")
    log(f"embedding {len(sentences)} NFCorpus sentences for {wanted} memories")
    started = time.perf_counter()
    vectors = embedder.embed(sentences)
    log(f"  {time.perf_counter() - started:.0f} s")
    MemoryEntry.objects.filter(agent=agent).delete()
    rng = np.random.default_rng(14)
    owners = [ONE_USER] * (per_user * users) + [f"user-{n:04d}" for n in range(users) for _ in range(per_user)]
    now = timezone.now()
    batch: list[MemoryEntry] = []
    for number, owner in enumerate(owners):
        base = number % len(sentences)
        vector = vectors[base]
        content = sentences[base]
        if number >= len(sentences):
            vector = vector + rng.normal(scale=TURN / np.sqrt(vector.size), size=vector.size).astype(np.float32)
            vector /= np.linalg.norm(vector)
            content = f"{content} (noted {number})"
        batch.append(MemoryEntry(agent=agent, user_id=owner, content=content,
                                 content_sha256=hashlib.sha256(" ".join(content.split()).casefold().encode())
                                 .hexdigest(),
                                 keywords=keywords(content), embedding=vector, stored_at=now))
        if len(batch) == 5000:
            MemoryEntry.objects.bulk_create(batch)
            batch = []
            log(f"  {number + 1}/{len(owners)} memories, {time.perf_counter() - started:.0f} s")
    MemoryEntry.objects.bulk_create(batch)
    if not connection.in_atomic_block:  # steady state: what autovacuum gives a table after a bulk write
        with connection.cursor() as cursor:
            cursor.execute("VACUUM (ANALYZE) retrieval_memoryentry")
    return agent


def conversation_agent_ensure(*, dataset: Path, log: Log, sources: int = 100,
                              documents: int | None = None) -> tuple[Agent, str]:
    """The conversation agent over bench-pages, every source approved for it, its end
    user's facts and 100 memories; (agent, token)."""
    catalog = pages_catalog_ensure(dataset=dataset, sources=sources, documents=documents, log=log)
    agent, token = agent_token_rotate(name=AGENT, catalogs=[catalog], is_active=True)
    reviewer = bench_person(REVIEWER, REVIEWER_GROUP)
    approved = set(ApprovalRequest.objects.filter(agent=agent, state="approved").values_list("source_id", flat=True))
    missing = [source for source in catalog.sources.all() if source.pk not in approved]
    if missing:
        log(f"approving {len(missing)} sources for {AGENT}")
    for source in missing:
        request = request_raise(agent=agent, source=source, by=agent, context="bench_conversation")
        if request.state == "pending":
            request_decide(request_id=request.pk, reviewer=reviewer, verdict="approve", comment="bench")
    for key, value in (("name", "Ana"), ("age", "67"), ("condition", "osteopenia")):
        fact_set(agent=agent, user_id="ana", key=key, value=value)
    if MemoryEntry.objects.filter(agent=agent, user_id="ana").count() < PER_USER:
        for sentence in list(_sentences(dataset))[:PER_USER]:
            memory_store(agent=agent, user_id="ana", content=sentence)
    return agent, token


CHATTER = ["Thanks, that helps.", "Could you say more?", "I see. What should I ask my doctor?",
           "That is a lot to take in.", "Okay, noted."]


def conversation(queries: list[str], length: int, client: APIClient, seed: int) -> list[dict[str, str]]:
    """`length` messages: a system prompt, then user questions (NFCorpus queries, some
    chatter) and assistant answers; the earlier user messages are enriched once, as an
    earlier call returned them, so the call under test strips them."""
    rng = random.Random(seed)
    messages = [{"role": "system", "content": "You are a careful health librarian."}]
    while len(messages) < length:
        question = rng.choice(queries) if rng.random() < 0.7 else rng.choice(CHATTER)
        messages.append({"role": "user", "content": question})
        if len(messages) < length:
            messages.append({"role": "assistant", "content": "Here is what the studies say about it. " * 4})
    if messages[-1]["role"] != "user":
        messages[-1] = {"role": "user", "content": rng.choice(queries)}
    # an earlier call's answer for the first half, as the client sends it back
    half = next(i for i in range(len(messages) // 2, 0, -1) if messages[i]["role"] == "user")
    earlier = client.post("/api/v1/enrich/conversation", {"messages": messages[: half + 1], "user_id": "ana"},
                          format="json")
    if earlier.status_code != 200:
        raise BenchmarkError(f"enrich/conversation answered {earlier.status_code}: {earlier.content[:200]!r}")
    sent_back: list[dict[str, str]] = earlier.json()["messages"]
    return sent_back + messages[half + 1:]


def _figures(samples: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(samples), 1), "p95_ms": round(percentile(samples, 95), 1),
            "max_ms": round(max(samples), 1)}


def conversation_benchmark(*, dataset: Path, rounds: int, log: Log, lengths: tuple[int, ...] = (50, 500),
                           users: int = MANY, per_user: int = PER_USER, distinct: int = DISTINCT,
                           sources: int = 100, documents: int | None = None) -> dict[str, Any]:
    queries = nfcorpus_test_queries(dataset)
    _, token = conversation_agent_ensure(dataset=dataset, log=log, sources=sources, documents=documents)
    memory_agent = memory_world_ensure(dataset=dataset, log=log, users=users, per_user=per_user, distinct=distinct)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    results: dict[str, Any] = {"conversations": [], "memory": []}
    for length in lengths:
        bodies = [conversation(queries, length, client, seed) for seed in range(5)]
        chars = sum(len(m["content"]) for m in bodies[0])
        samples, tokens = [], []
        for round_no in range(rounds + 2):  # two warm-up calls
            body = bodies[round_no % len(bodies)]
            started = time.perf_counter()
            response = client.post("/api/v1/enrich/conversation", {"messages": body, "user_id": "ana"},
                                   format="json")
            elapsed = (time.perf_counter() - started) * 1000
            if response.status_code != 200:
                raise BenchmarkError(f"enrich/conversation answered {response.status_code}")
            if round_no >= 2:
                samples.append(elapsed)
                tokens.append(response.json()["tokens"])
        results["conversations"].append({
            "messages": length, "characters": chars, **_figures(samples),
            "tokens_before": tokens[0]["before"], "tokens_freed": tokens[0]["freed"],
            "tokens_added": tokens[0]["added"], "context_items": len(response.json()["context"])})
        log(f"enrich/conversation, {length} messages ({chars} characters): {results['conversations'][-1]}")
    embedder = get_embedder()
    if embedder is None:
        raise BenchmarkError("the embedding model is not loaded")
    texts = queries[:rounds + 2]
    literals = [vector_literal(vector) for vector in embedder.embed(texts)]
    rng = random.Random(7)
    for case, owners in ((f"{users * per_user:,} memories of one end user", [ONE_USER]),
                         (f"one of {users:,} end users with {per_user} memories each",
                          [f"user-{n:04d}" for n in range(users)])):
        samples, found = [], []
        for number, (text, literal) in enumerate(zip(texts, literals, strict=True)):
            user = rng.choice(owners)
            started = time.perf_counter()
            hits = memory_search(agent=memory_agent, user_id=user, text=text, limit=10, vector=literal)
            elapsed = (time.perf_counter() - started) * 1000
            if number >= 2:
                samples.append(elapsed)
                found.append(len(hits))
        results["memory"].append({"case": case, **_figures(samples), "hits_mean": round(statistics.mean(found), 1)})
        log(f"memory search, {case}: {results['memory'][-1]}")
    results["rounds"] = rounds
    return results
