"""Conversation enrichment: a whole conversation in, the same conversation
out with `[facts: ...]` and `[context: ...]` postfixed onto its newest user message.

- Never into the system prompt, never as a separate message: the prompt cache of a
  model keeps everything before the newest user message.
- What Lectern added to earlier turns is stripped first, exactly (the signed markers of
  retrieval.enrichment.formatting): a client may send back what it received, and each
  message gets its pre-injection text again. The tokens that frees are reported. Only
  what was placed for this agent and end user, or for this agent alone (enrich's blocks
  on a message the agent sent on), at the end of the message it was appended to: a
  block pasted elsewhere, or from another end user's or agent's conversation, is the
  user's.
- Context is the end user's memories (with `memory`) and passages of the caller's
  catalogs, each at least `threshold` relevant (a memory's score, a passage's cosine
  similarity to the message), the best `max_results` of both. Passages come through
  chunk_search with the caller as the agent: the governance gate leaves out what needs
  approval, raising the agent's request as every read path does, and the trace names it.
- Facts come with memory (the end user's facts are memory too: `memory: false` turns
  both off for the request).
- Nothing to add: the messages come back as they were (stripped of old injections).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from approvals.services.requests import request_context, withheld_requests_raise
from catalog.embedder import get_embedder
from retrieval.citations.selectors import Citation, citations_of
from retrieval.citations.services import served_trace_record
from retrieval.conversations.chunking import SPECIAL_TOKENS
from retrieval.conversations.context_text import context_text
from retrieval.conversations.messages import USER, Message
from retrieval.enrichment.caller import Caller
from retrieval.enrichment.formatting import append_blocks, caller_signer, strip_injection
from retrieval.memory.selectors import MemoryHit, end_user_digest, facts_line, facts_of, memory_search
from retrieval.models import Fact, Trace
from retrieval.search.selectors import SearchOptions, chunk_search, requests_due, with_requests
from retrieval.search.vector import SearchUnavailable, embed_query

TOKENIZERS = ("model", "characters")
UNCITED = {"cite": "", "fingerprint": "", "byte_start": None, "byte_end": None, "approval_id": None}
CHARS_PER_TOKEN = 4  # the "characters" tokenizer's estimate


@dataclass(frozen=True)
class ContextItem:
    kind: str  # memory | passage
    text: str
    score: float
    ref: str = ""  # a passage's reference as the caller writes it (`source`, or `catalog/source`)
    catalog: str = ""
    source: str = ""
    document_id: str = ""
    memory_id: int | None = None
    citation: str = ""  # a passage's place in its document (catalog.sources.locators.cite)
    cited: Citation | None = None  # a passage's cite, fingerprint, bytes and approval

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "score": round(self.score, 4), "ref": self.ref,
                "catalog": self.catalog, "source_id": self.source, "document_id": self.document_id,
                "memory_id": self.memory_id, "citation": self.citation,
                **(self.cited.fields() if self.cited else UNCITED)}


@dataclass
class ConversationResult:
    messages: list[Message]
    injected_into: int | None  # the index of the message that carries the new injection
    facts: list[dict[str, str]]
    context: list[ContextItem]
    withheld: list[dict[str, Any]]
    tokens: dict[str, int]  # before, after, freed
    tokenizer: str
    trace: Trace
    degraded: str | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)


def token_counter(tokenizer: str) -> Any:
    """A function counting the tokens of each of a list of texts: the embedding model's
    tokenizer ("model", characters / 4 while the model is not loaded) or "characters"."""
    embedder = get_embedder() if tokenizer == "model" else None
    if embedder is not None:  # the text's own tokens: the [CLS] and [SEP] a count includes are the model's
        return lambda texts: [count - SPECIAL_TOKENS for count in embedder.count_tokens(texts)] if texts else []
    return lambda texts: [-(-len(text) // CHARS_PER_TOKEN) for text in texts]


def _total(count: Any, messages: list[Message]) -> int:
    return int(sum(count([m.content for m in messages if m.content])))


@dataclass
class _Recalled:
    """What the newest user message recalled: the end user's facts and memories, the
    catalogs' passages and what the gate withheld of them."""

    facts: list[Fact] = field(default_factory=list)
    memories: list[MemoryHit] = field(default_factory=list)
    passages: list[ContextItem] = field(default_factory=list)
    withheld: list[dict[str, Any]] = field(default_factory=list)
    degraded: str | None = None

    def context(self, threshold: float, limit: int) -> list[ContextItem]:
        """Memories and passages at least `threshold` relevant, the best `limit`."""
        items = [ContextItem("memory", hit.content, hit.score, memory_id=hit.entry_id) for hit in self.memories]
        kept = [item for item in items + self.passages if item.score >= threshold]
        return sorted(kept, key=lambda item: -item.score)[:limit]


def enrich_conversation(*, caller: Caller, messages: list[Message], user_id: str = "", memory: bool = True,
                        threshold: float | None = None, max_results: int | None = None,
                        tokenizer: str = "model") -> ConversationResult:
    """The conversation with its earlier injections removed and, when it ends with a user
    message, facts and context postfixed onto that message; a trace stored."""
    started = time.perf_counter()
    threshold = caller.profile.rag_relevance_threshold if threshold is None else threshold
    max_results = caller.profile.rag_max_results if max_results is None else max_results
    # signs for this agent and end user; strips that and the agent's own enrich blocks
    signer, count = caller_signer(caller, user_id), token_counter(tokenizer)
    steps: list[dict[str, Any]] = []
    restored = [Message(m.role, strip_injection(m.content, signer=signer)) for m in messages]
    before, restored_total = _total(count, messages), _total(count, restored)
    steps.append({"pass": "strip", "ms": _ms(started), "messages": len(messages),
                  "freed_tokens": before - restored_total,
                  "restored": [i for i, (a, b) in enumerate(zip(messages, restored, strict=True)) if a != b]})
    # The guard: only when the conversation ends with a user message (after a tool
    # result or an assistant turn, an injection would change what the model cached).
    index = len(restored) - 1 if restored and restored[-1].role == USER else None
    text = restored[index].content if index is not None else ""
    recalled = _recall(caller, text, user_id if memory else "", threshold, max_results, steps)
    context = recalled.context(threshold, max_results)
    context_line = context_text((item.ref, item.text) for item in context)  # each item escaped
    block = "\n".join(line for line in (facts_line(recalled.facts), context_line) if line)
    result = list(restored)
    if index is not None and block:
        result[index] = Message(USER, append_blocks(text, [block], signer=signer))
    after = _total(count, result)
    tokens = {"before": before, "after": after, "freed": before - restored_total, "added": after - restored_total}
    steps.append({"pass": "conversation", "ms": _ms(started), "injected_into": index if block else None,
                  # how the end user's erasure finds this trace (their id is not kept in clear)
                  **({"end_user": end_user_digest(caller.agent, user_id)} if caller.agent and user_id else {}),
                  "facts": len(recalled.facts), "context": [_traced(item) for item in context], "tokens": tokens})
    trace = Trace(agent=caller.agent, caller=caller.name, surface=Trace.Surface.CONVERSATION,
                  text=text if settings.LECTERN_TRACE_STORE_TEXT else None, steps=steps,
                  hints=[_hint(item) for item in context if item.kind == "passage"] + recalled.withheld,
                  degraded=recalled.degraded or "", took_ms=_ms(started))
    served_trace_record(trace=trace, citations=[item.cited for item in context if item.cited is not None])
    return ConversationResult(result, index if block else None,
                              [{"key": f.key, "value": f.value} for f in recalled.facts], context, recalled.withheld,
                              tokens, tokenizer if tokenizer != "model" or get_embedder() is not None else "characters",
                              trace, recalled.degraded, steps)


def _recall(caller: Caller, text: str, user_id: str, threshold: float, max_results: int,
            steps: list[dict[str, Any]]) -> _Recalled:
    """Facts and memories (an agent's, with an end user), then the passages of the
    caller's catalogs, for `text`; a step each."""
    recalled = _Recalled()
    if not text.strip():
        return recalled
    embedded = None
    try:
        embedded = embed_query(text)
    except SearchUnavailable as exc:
        recalled.degraded = f"lexical-only: {exc}"
    vector = embedded[0] if embedded else None
    if caller.agent is not None and user_id:
        started = time.perf_counter()
        recalled.facts = facts_of(agent=caller.agent, user_id=user_id)
        recalled.memories = memory_search(agent=caller.agent, user_id=user_id, text=text,
                                          limit=max(max_results, 1), vector=vector)
        steps.append({"pass": "memory", "ms": _ms(started), "facts": [f.key for f in recalled.facts],
                      "hits": [_memory_step(hit, threshold) for hit in recalled.memories]})
    if max_results > 0 and embedded is not None:
        started = time.perf_counter()
        recalled.passages, recalled.withheld = _passages(caller, text, max_results, embedded)
        steps.append({"pass": "passages", "ms": _ms(started), "catalogs": [c.slug for c in caller.catalogs],
                      "hits": [{**_traced(item), "kept": item.score >= threshold} for item in recalled.passages],
                      "withheld": recalled.withheld})
    return recalled


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _memory_step(hit: MemoryHit, threshold: float) -> dict[str, Any]:
    return {**{k: v for k, v in hit.as_dict().items() if k != "stored_at"},
            "stored_at": hit.stored_at.isoformat(), "kept": hit.score >= threshold}


def _traced(item: ContextItem) -> dict[str, Any]:
    """A context item as its trace keeps it: a memory whole (the agent's own), a passage
    by its reference and score only, neither its text nor its document's path nor its
    cite: a trace is read later, when the approval that let the passage through may have
    ended (its text is kept apart, for curators: retrieval.citations)."""
    return item.as_dict() if item.kind == "memory" else {**item.as_dict(), "text": "", "document_id": "",
                                                         "citation": "", **UNCITED}


def _passages(caller: Caller, text: str, limit: int,
              embedded: tuple[str, int] | None) -> tuple[list[ContextItem], list[dict[str, Any]]]:
    """The best passages of each of the caller's catalogs by meaning, through the
    governance gate (an agent's request raised for what it withholds), and what was
    withheld, as trace hints."""
    items: list[ContextItem] = []
    withheld: list[dict[str, Any]] = []
    for catalog in caller.catalogs:
        # The query's own similarity, which rag_relevance_threshold bounds: never a
        # vector moved by the catalog's feedback (it lifts every score toward its hits).
        options = SearchOptions(mode="vector", top_k=limit, vector_feedback=0)
        found = chunk_search(catalog=catalog, query=text, options=options, agent=caller.agent, embedded=embedded)
        raised = withheld_requests_raise(  # the end user's words stay out of the requests
            agent=caller.agent, decisions=requests_due(found.withheld, found.gate), via="search",
            context=request_context("conversation enrichment", ""))
        found.withheld = with_requests(found.withheld, raised)
        citations = citations_of(catalog=catalog, hits=found.hits, agent=caller.agent)
        for hit, cited in zip(found.hits, citations, strict=True):
            similarity = hit.scores.get("vector")
            if similarity is None:
                continue
            ref = f"{catalog.slug}/{hit.source}" if caller.qualify else hit.source
            items.append(ContextItem("passage", hit.content, similarity, ref=ref, catalog=catalog.slug,
                                     source=hit.source, document_id=hit.document_id, citation=hit.citation,
                                     cited=cited))
        withheld += [{"source_id": entry.source, "catalog": catalog.slug,
                      "ref": f"{catalog.slug}/{entry.source}" if caller.qualify else entry.source, "name": entry.source,
                      "matched": [], "via": "semantic", "score": None, "injected": "none", "withheld": True,
                      "reason": entry.reason, "request_id": entry.request_id, "count": entry.count}
                     for entry in found.withheld]
    return items, withheld


def _hint(item: ContextItem) -> dict[str, Any]:
    return {"source_id": item.source, "catalog": item.catalog, "ref": item.ref, "name": item.source,
            "matched": [], "via": "semantic", "score": round(item.score, 4), "injected": "context",
            "withheld": False, "reason": "", "request_id": None}
