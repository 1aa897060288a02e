"""Conversation retrieval: a catalog's passages for every topic of a
conversation, not only the one a single query of it would average towards.

conversation_search() runs:
  1. the messages as markdown (conversation_markdown), without what Lectern injected
     for the caller (and, with `user_id`, in that end user's conversation), cut into
     query chunks at paragraph boundaries, each what the embedding model reads whole
     (retrieval.conversations.chunking, the catalog's chunker settings for a paragraph
     too long for one chunk)
  2. every chunk embedded in one call of the model (one batch: a conversation costs one
     inference pass per LECTERN_EMBEDDING_BATCH chunks, not a round trip per chunk)
  3. per chunk, the catalog's nearest chunks (retrieval.search.vector, HNSW or sorted
     rows), the sources the approval gate withholds from the caller left out in the SQL
     as chunk_search leaves them out, before any ranking or limit
  4. hits below min_similarity dropped; each catalog chunk once; the best per_document
     of each document (retrieval.conversations.ranking)
  5. MMR over what is left when mmr_lambda < 1, else the similarity order; top_k
  6. the hits' content read in one statement; every withheld source named, as search
     names them (retrieval.search.selectors.withheld_named): where its policies disclose
     matches, its chunks as similar to some query chunk as the least similar hit shown
     counted (never shown) and the agent's approval request raised when some are
The counts of each retrieval (chunks, results, deduplicated, final) are logged at INFO
and returned; the conversation's text is never logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.conf import settings

from approvals.selectors.gate import InjectionDecision, withheld_sources
from catalog.embedder import Embedder, embedder_status, get_embedder, vector_literal
from catalog.models import Agent, Catalog, Chunk
from catalog.sources.locators import cite
from retrieval.conversations.chunking import conversation_chunks
from retrieval.conversations.messages import Message, conversation_markdown
from retrieval.conversations.ranking import Candidate, best_per_document, mmr
from retrieval.enrichment.formatting import InjectionSigner, injection_signer, strip_injection
from retrieval.search.selectors import (
    WithheldHits,
    chunk_rows,
    disclosed,
    withheld_hits,
    withheld_named,
)
from retrieval.search.vector import SearchUnavailable, vector_search

logger = logging.getLogger(__name__)

APPROXIMATE, EXACT = "approximate", "exact"
SEARCH_MODES = (APPROXIMATE, EXACT)
# Chunks each query chunk fetches per chunk kept: `chunks_per_query` (5 per
# chunk query, for its top 5), with room for what per-document dedup drops.
CHUNK_QUERY_DEPTH = 5
MMR_POOL = 5  # MMR picks top_k among the top_k x this most similar


class ConversationTooLong(ValueError):
    """The conversation makes more query chunks than LECTERN_CONVERSATION_MAX_CHUNKS."""


@dataclass(frozen=True)
class ConversationOptions:
    top_k: int = 10
    per_document: int = 1  # chunks kept per document
    mmr_lambda: float | None = None  # None or 1: no MMR
    min_similarity: float = 0.0  # cosine; weaker hits are dropped before dedup
    mode: str = APPROXIMATE


@dataclass
class ConversationHit:
    chunk_pk: int
    document_pk: int
    similarity: float
    query_chunk: int  # index into ConversationResult.chunks
    key: str
    document_id: str
    title: str
    source: str
    content: str
    byte_offset: int
    locator: dict[str, Any] = field(default_factory=dict)
    source_pk: int = 0

    @property
    def citation(self) -> str:
        return cite(self.locator, self.document_id)


@dataclass
class ConversationResult:
    hits: list[ConversationHit]
    chunks: list[str]  # the query chunks, in conversation order
    results: int  # hits of every query chunk, at least min_similarity
    deduplicated: int  # after each chunk once and per_document per document
    mode: str
    took_ms: float
    withheld: list[WithheldHits] = field(default_factory=list)
    gate: dict[int, InjectionDecision] = field(default_factory=dict)  # as in SearchResult


def conversation_search(*, catalog: Catalog, messages: Sequence[Message], options: ConversationOptions,
                        agent: Agent | None = None, signer: InjectionSigner | None = None) -> ConversationResult:
    """`catalog`'s passages for the conversation `messages`, as `agent` may read them
    (None: a signed-in person); what Lectern injected for `signer`'s scopes (default:
    the agent's, without an end user; retrieval.enrichment.formatting.injection_signer)
    is removed first. See the module docstring for the steps."""
    started = time.perf_counter()
    embedder = get_embedder()
    if embedder is None:
        raise SearchUnavailable(embedder_status()["reason"] or "no embedding model")
    signer = signer or injection_signer(agent=agent)  # what Lectern added, sent back by the client, is not the talk
    markdown = conversation_markdown([Message(m.role, strip_injection(m.content, signer=signer)) for m in messages])
    chunks = query_chunks(catalog, markdown, embedder)
    logger.info("Chunked conversation into %d chunks for retrieval from catalog %s", len(chunks), catalog.slug)
    vectors = [vector_literal(v) for v in embedder.embed(chunks)] if chunks else []
    withheld = withheld_sources(agent=agent, catalog_ids=[catalog.pk])
    # Each query chunk could fill the answer alone: top_k documents of per_document
    # chunks, five times over, for the chunks dedup drops.
    depth = options.top_k * options.per_document * CHUNK_QUERY_DEPTH
    found = [Candidate(chunk, document, similarity, index)
             for index, vector in enumerate(vectors)
             for chunk, document, similarity in vector_search(catalog=catalog, vector=vector, limit=depth,
                                                              withheld=withheld, exact=options.mode == EXACT)
             if similarity >= options.min_similarity]
    logger.info("Collected %d results from %d chunks", len(found), len(chunks))
    deduplicated = best_per_document(found, options.per_document)
    logger.debug("Deduplication: %d results -> %d (n=%d per document)", len(found), len(deduplicated),
                 options.per_document)
    final = _final(catalog, deduplicated, options)
    logger.info("Conversation retrieval complete: %d chunks -> %d results -> %d deduplicated -> %d final",
                len(chunks), len(found), len(deduplicated), len(final))
    report: list[WithheldHits] = []
    if withheld:
        matched = withheld_hits(catalog, disclosed(withheld), [], vectors=vectors,
                                similar=_similarity_floor(final, options))
        report = withheld_named(withheld, matched)
    return ConversationResult(_hits(catalog, final), chunks, len(found), len(deduplicated), options.mode,
                              (time.perf_counter() - started) * 1000, report, withheld)


def query_chunks(catalog: Catalog, markdown: str, embedder: Embedder) -> list[str]:
    """The conversation's query chunks, each within what the model reads whole; the
    overlap between neighbours in the catalog's proportion (chunk_overlap / chunk_size)."""
    chunks = conversation_chunks(
        markdown, count_tokens=embedder.count_tokens, max_tokens=embedder.max_tokens,
        overlap_tokens=embedder.max_tokens * catalog.chunk_overlap // catalog.chunk_size,
        size=catalog.chunk_size, overlap=catalog.chunk_overlap)
    limit = settings.LECTERN_CONVERSATION_MAX_CHUNKS
    if len(chunks) > limit:
        raise ConversationTooLong(
            f"the conversation makes {len(chunks)} query chunks of at most {embedder.max_tokens} tokens; at most "
            f"{limit} are searched at once (LECTERN_CONVERSATION_MAX_CHUNKS): send its most recent part")
    return chunks


def _final(catalog: Catalog, candidates: list[Candidate], options: ConversationOptions) -> list[Candidate]:
    """top_k of the deduplicated hits: by MMR when mmr_lambda < 1, else by similarity."""
    if options.mmr_lambda is None or options.mmr_lambda >= 1:
        return candidates[: options.top_k]
    pool = candidates[: options.top_k * MMR_POOL]  # the most similar: MMR reorders, it does not dig deeper
    vectors = {pk: np.asarray(v, dtype=np.float32)
               for pk, v in Chunk.objects.filter(catalog=catalog, pk__in=[c.chunk for c in pool])
               .values_list("pk", "embedding")
               if v is not None}
    # a chunk a reindex removed meanwhile is no longer a candidate
    return mmr([c for c in pool if c.chunk in vectors], vectors, lam=options.mmr_lambda, k=options.top_k)


def _similarity_floor(final: list[Candidate], options: ConversationOptions) -> float:
    """How similar to a query chunk a withheld chunk must be to count as matching: as
    the least similar hit shown, or min_similarity when fewer than top_k were found."""
    if len(final) < options.top_k:
        return options.min_similarity
    return max(options.min_similarity, min(c.similarity for c in final))


def _hits(catalog: Catalog, final: list[Candidate]) -> list[ConversationHit]:
    rows = chunk_rows(catalog, [c.chunk for c in final])
    hits = []
    for c in final:
        if c.chunk not in rows:  # removed by a reindex since it was found
            continue
        row = rows[c.chunk]
        hits.append(ConversationHit(c.chunk, c.document, c.similarity, c.query_chunk, row.key, row.path, row.title,
                                    row.source, row.content, row.byte_offset, row.locator, row.source_pk))
    return hits
