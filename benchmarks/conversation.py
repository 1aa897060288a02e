"""The measurement behind `python -m benchmarks bench_conversation_recall`: does cutting a
conversation into query chunks (seed 002) find what each of its topics needs, where
one query of the whole conversation does not?

  1. the catalog: `nfcorpus` (what `make nfcorpus` imports) when it is there and
     ready, else built once from corpus.jsonl; with --documents, a slice of the corpus
     (every document the conversations need, then the first others) in its own catalog
  2. conversations, deterministic: each 3-5 NFCorpus test queries whose judged-relevant
     sets are disjoint (different topics), each asked by the user, then chatter that
     carries no topic (assistant replies and small talk, fixed texts chosen by a seeded
     random generator)
  3. for each conversation, recall@10 of the union of its queries' relevant documents,
     and the wall time, for (a) conversation_search (chunked, per_document 1, top_k 10)
     and (b) one query of the whole conversation's markdown, as the model reads it (its
     head), ranked by the same vector search under the same agent's governance, one
     chunk per document, top_k 10; and, for reference, (c) the user's questions alone,
     without the chatter, searched as (a)
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from approvals.selectors.gate import withheld_sources
from benchmarks.common import BenchmarkError, Log, nfcorpus_test_judged
from benchmarks.synthetic import base_wait
from catalog.agents import agent_token_rotate
from catalog.embedder import get_embedder
from catalog.indexing.runs import source_import
from catalog.models import Agent, Catalog, Document, IndexRun
from catalog.sources.beir import parse_beir_jsonl
from catalog.sources.documents import DocumentInput
from retrieval.conversations.messages import Message, conversation_markdown
from retrieval.conversations.ranking import Candidate, best_per_document
from retrieval.conversations.search import CHUNK_QUERY_DEPTH, ConversationOptions, conversation_search
from retrieval.evaluation.metrics import percentile, recall_at
from retrieval.search.vector import embed_query, vector_search

AGENT = "bench-conversation-agent"
TOP_K = 10
BASE = "nfcorpus"

# How a user brings up a topic ({query}: an NFCorpus test query).
ASKING = ["{query}", "Can you tell me about this: {query}", "Next question. {query}",
          "I have been reading about this lately: {query}. What does the research say?"]
# What carries no topic: the assistant's filler and the user's small talk.
REPLIES = [
    "Sure, happy to help with that. Let me put together what I can find and get back to you in a moment.",
    "That is a good question. I will look into it carefully and summarise the main points for you below.",
    "Here is a short overview. Tell me if you would like more detail on any part of it, or a different angle.",
    "I can go through this step by step. First the background, then the details, then what it means for you.",
    "Thanks for waiting. I have collected a few points; some of them are still debated, so take them as a "
    "starting point rather than the final word.",
]
SMALL_TALK = ["Thanks, that helps a lot!", "Great, thank you.", "Okay, got it.", "Interesting, I did not know that.",
              "By the way, the weather has been lovely here this week.", "Sorry, I was away from my desk for a bit.",
              "Let me grab a coffee and then we can continue.", "Makes sense. Let us move on."]


@dataclass(frozen=True)
class Conversation:
    queries: tuple[str, ...]  # query ids
    messages: tuple[Message, ...]
    relevant: frozenset[str]  # document ids: the union of the queries' relevant sets


@dataclass
class ApproachReport:
    name: str
    recall_at_10: float  # mean over conversations
    p50_ms: float
    p95_ms: float
    mean_chunks: float  # query chunks per conversation (1 for the single query)


@dataclass
class ConversationRecall:
    catalog: str
    chunks: int
    conversations: int
    mean_queries: float
    mean_messages: float
    mean_relevant: float
    chunked: ApproachReport
    single: ApproachReport
    asked_only: ApproachReport  # the questions without the chatter: what the chatter costs

    @property
    def ratio(self) -> float:
        return self.chunked.recall_at_10 / self.single.recall_at_10 if self.single.recall_at_10 else float("inf")

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": round(self.ratio, 3)}


def judged_queries(dataset: Path, max_relevant: int) -> tuple[dict[str, str], dict[str, frozenset[str]]]:
    """The test queries' texts and relevant sets (graded > 0), those with at most `max_relevant`."""
    texts, judged = nfcorpus_test_judged(dataset)
    relevant = {qid: frozenset(doc for doc, grade in docs.items() if grade > 0) for qid, docs in judged.items()}
    kept = {qid: docs for qid, docs in relevant.items() if qid in texts and 0 < len(docs) <= max_relevant}
    return {qid: texts[qid] for qid in kept}, kept


def conversations_make(texts: dict[str, str], relevant: dict[str, frozenset[str]], *, count: int,
                       seed: int) -> list[Conversation]:
    """`count` conversations of 3-5 queries with disjoint relevant sets, each topic
    followed by chatter; the same for the same inputs and seed."""
    rng = random.Random(seed)
    pool = sorted(texts)
    made = []
    for _ in range(count):
        wanted, chosen = rng.randint(3, 5), []
        covered: set[str] = set()
        for qid in rng.sample(pool, len(pool)):
            if not relevant[qid] & covered:
                chosen.append(qid)
                covered |= relevant[qid]
                if len(chosen) == wanted:
                    break
        if len(chosen) < 3:
            raise BenchmarkError("too few test queries with disjoint relevant sets for a conversation")
        made.append(Conversation(tuple(chosen), tuple(_talk(rng, [texts[q] for q in chosen])), frozenset(covered)))
    return made


def _talk(rng: random.Random, queries: list[str]) -> list[Message]:
    """Each query asked, then two to four exchanges of chatter."""
    messages = [Message("assistant", "Hello! What would you like to talk about today?")]
    for query in queries:
        messages.append(Message("user", rng.choice(ASKING).format(query=query.rstrip("?. "))))
        for _ in range(rng.randint(2, 4)):
            messages.append(Message("assistant", rng.choice(REPLIES)))
            messages.append(Message("user", rng.choice(SMALL_TALK)))
    return messages


def catalog_ensure(*, dataset: Path, documents: int | None, needed: set[str], log: Log) -> Catalog:
    """`nfcorpus`, reused as it is when there (`make nfcorpus` imports it), else imported
    once; with `documents`, `bench-conversation-<N>`: the `needed` documents and the
    first others up to N (imported again each run: only what changed is embedded)."""
    slug = BASE if documents is None else f"bench-conversation-{documents}"
    catalog = Catalog.objects.filter(slug=slug).first()
    if documents is None and catalog is not None and catalog.chunk_count:
        return base_wait(slug=slug, poll_s=30, timeout_s=7200, log=log)
    with (dataset / "corpus.jsonl").open(encoding="utf-8") as lines:
        corpus = parse_beir_jsonl(lines)
    if documents is not None:
        corpus = _slice(corpus, documents, needed)
    catalog, _ = Catalog.objects.get_or_create(slug=slug, defaults={"name": slug})
    log(f"importing {len(corpus)} NFCorpus documents into {slug}")
    run = source_import(catalog=catalog, slug="corpus", documents=corpus, trigger=IndexRun.Trigger.COMMAND)
    if run.status != IndexRun.Status.SUCCEEDED:
        raise BenchmarkError(f"importing {slug} failed: {run.error}")
    catalog.refresh_from_db()
    return catalog


def _slice(corpus: list[DocumentInput], documents: int, needed: set[str]) -> list[DocumentInput]:
    others = [doc for doc in corpus if doc.path not in needed][: max(documents - len(needed), 0)]
    return [doc for doc in corpus if doc.path in needed] + others


def _chunked(catalog: Catalog, agent: Agent, conversation: Conversation) -> tuple[list[str], int]:
    return _searched(catalog, agent, conversation.messages)


def _asked_only(catalog: Catalog, agent: Agent, conversation: Conversation) -> tuple[list[str], int]:
    """The reference: the user's questions alone, no chatter, searched the chunked way."""
    asked = tuple(m for m in conversation.messages if m.role == "user" and m.content not in SMALL_TALK)
    return _searched(catalog, agent, asked)


def _searched(catalog: Catalog, agent: Agent, messages: tuple[Message, ...]) -> tuple[list[str], int]:
    result = conversation_search(catalog=catalog, messages=messages,
                                 options=ConversationOptions(top_k=TOP_K, per_document=1), agent=agent)
    return [hit.document_id for hit in result.hits], len(result.chunks)


def _single(catalog: Catalog, agent: Agent, conversation: Conversation) -> tuple[list[str], int]:
    """The whole conversation as one query: its markdown's head, the same vector search
    and governance, one chunk per document."""
    vector, _ = embed_query(conversation_markdown(conversation.messages))
    withheld = withheld_sources(agent=agent, catalog_ids=[catalog.pk])
    rows = vector_search(catalog=catalog, vector=vector, limit=TOP_K * CHUNK_QUERY_DEPTH, withheld=withheld)
    kept = best_per_document([Candidate(chunk, document, similarity, 0) for chunk, document, similarity in rows], 1)
    paths = dict(Document.objects.filter(pk__in=[c.document for c in kept]).values_list("pk", "path"))
    return [paths[c.document] for c in kept[:TOP_K]], 1


def _measure(name: str, run: Any, catalog: Catalog, agent: Agent,
             conversations: list[Conversation]) -> ApproachReport:
    recalls, latencies, chunks = [], [], []
    for conversation in conversations:
        started = time.perf_counter()
        ranked, chunk_count = run(catalog, agent, conversation)
        latencies.append((time.perf_counter() - started) * 1000)
        recalls.append(recall_at(ranked, dict.fromkeys(conversation.relevant, 1), TOP_K))
        chunks.append(chunk_count)
    return ApproachReport(name, round(statistics.fmean(recalls), 4), round(percentile(latencies, 50), 1),
                          round(percentile(latencies, 95), 1), round(statistics.fmean(chunks), 2))


def conversation_recall(*, dataset: Path, conversations: int, documents: int | None, max_relevant: int, seed: int,
                        log: Log) -> ConversationRecall:
    """Both approaches over the same conversations; see the module docstring."""
    if get_embedder() is None:
        raise BenchmarkError("no embedding model loaded: conversation retrieval needs one")
    texts, relevant = judged_queries(dataset, max_relevant)
    talks = conversations_make(texts, relevant, count=conversations, seed=seed)
    needed = set().union(*(talk.relevant for talk in talks))
    catalog = catalog_ensure(dataset=dataset, documents=documents, needed=needed, log=log)
    agent, _ = agent_token_rotate(name=AGENT, catalogs=[catalog], is_active=True)
    _chunked(catalog, agent, talks[0])  # warm: the model's first batches, the catalog's pages
    _single(catalog, agent, talks[0])
    log(f"{len(talks)} conversations on {catalog.slug} ({catalog.chunk_count} chunks)")
    chunked = _measure("chunked", _chunked, catalog, agent, talks)
    single = _measure("single", _single, catalog, agent, talks)
    asked_only = _measure("asked only", _asked_only, catalog, agent, talks)
    return ConversationRecall(
        catalog=catalog.slug, chunks=catalog.chunk_count, conversations=len(talks),
        mean_queries=round(statistics.fmean(len(t.queries) for t in talks), 2),
        mean_messages=round(statistics.fmean(len(t.messages) for t in talks), 1),
        mean_relevant=round(statistics.fmean(len(t.relevant) for t in talks), 1), chunked=chunked, single=single,
        asked_only=asked_only)
