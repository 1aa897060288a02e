"""The conversation operations' shapes and bodies: the input shapes both conversation
operations and facts and memory take (messages, user_id), search_conversation's and
enrich_conversation's. `conversation_response` and `enrich_conversation_response` build
what REST (retrieval.conversations.apis) and the MCP tools (retrieval.mcp.tools) both
return."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers

from approvals.serializers import request_id_field
from approvals.services.requests import excerpt, request_context, withheld_requests_raise
from catalog.auth import RequestUser, get_catalog_for_caller
from catalog.errors import ConflictError
from catalog.models import Agent, Catalog
from catalog.reads import replica_read
from catalog.rest.fields import (
    StrictBooleanField,
    StrictCharField,
    StrictFloatField,
    StrictIntegerField,
    StrictSlugField,
)
from retrieval.citations.selectors import Citation, citations_of
from retrieval.citations.serializers import CITE_HELP
from retrieval.citations.services import served_trace_record
from retrieval.conversations.injection import TOKENIZERS, enrich_conversation
from retrieval.conversations.messages import ROLES, Message, messages_of
from retrieval.conversations.search import (
    SEARCH_MODES,
    ConversationOptions,
    ConversationResult,
    ConversationTooLong,
    conversation_search,
)
from retrieval.enrichment.caller import Caller
from retrieval.enrichment.formatting import injection_signer
from retrieval.enrichment.serializers import catalogs_field
from retrieval.models import END_USER_MAX
from retrieval.search.selectors import requests_due, with_requests
from retrieval.search.serializers import (
    SESSION_TOP_K,
    ChunkHitSerializer,
    WithheldHitsSerializer,
    default_top_k,
    search_trace,
    withheld_report,
)
from retrieval.search.vector import SearchUnavailable


class MessageSerializer(serializers.Serializer[dict[str, Any]]):
    role = serializers.ChoiceField(choices=ROLES)
    content = StrictCharField(max_length=settings.LECTERN_MAX_ENRICH_CHARS, allow_blank=True, trim_whitespace=False,
                              help_text="The message's text, as the model reads it.")


def messages_field(**kwargs: Any) -> serializers.ListField:
    """Oldest first; at least one, at most LECTERN_CONVERSATION_MAX_MESSAGES."""
    return serializers.ListField(child=MessageSerializer(), min_length=1,
                                 max_length=settings.LECTERN_CONVERSATION_MAX_MESSAGES, **kwargs)


def user_id_field(*, help_text: str = "The end user, as the agent names them.", **kwargs: Any) -> StrictCharField:
    return StrictCharField(max_length=END_USER_MAX, help_text=help_text, **kwargs)


# --- conversation search (search_conversation) ---------------------------------------

QUERY_CHUNK_EXCERPT_CHARS = 200


class QueryChunkSerializer(serializers.Serializer[dict[str, Any]]):
    index = serializers.IntegerField(min_value=0, help_text="Which query chunk of the conversation, from 0.")
    excerpt = serializers.CharField(
        help_text=f"Its first {QUERY_CHUNK_EXCERPT_CHARS} characters, whitespace collapsed (… when cut).")


class ConversationHitSerializer(ChunkHitSerializer):
    similarity = serializers.FloatField(help_text="Cosine similarity to the query chunk that found it.")
    query_chunk = QueryChunkSerializer(help_text="The query chunk that found it (the most similar, if several).")


class ConversationCountsSerializer(serializers.Serializer[dict[str, Any]]):
    chunks = serializers.IntegerField(min_value=0, help_text="Query chunks the conversation was cut into.")
    results = serializers.IntegerField(min_value=0, help_text="Hits of all query chunks, at least min_similarity.")
    deduplicated = serializers.IntegerField(
        min_value=0, help_text="Left after keeping each chunk once and per_document chunks of each document.")
    final = serializers.IntegerField(min_value=0, help_text="Returned: at most top_k.")


class ConversationSearchInputSerializer(serializers.Serializer[None]):
    catalog = StrictSlugField(max_length=64)
    messages = messages_field(help_text="The conversation, oldest first: cut at paragraph boundaries into chunks "
                                        "the embedding model reads whole, each searched as a query.")
    top_k = StrictIntegerField(
        min_value=1, max_value=100, required=False,
        help_text="Hits to return; default: the calling agent's `default_top_k`, "
                  f"{SESSION_TOP_K} for a person's session.")
    per_document = StrictIntegerField(min_value=1, max_value=10, default=1,
                                      help_text="Chunks kept per document, the most similar.")
    mmr_lambda = StrictFloatField(
        min_value=0, max_value=1, required=False,
        help_text="Maximal marginal relevance: 1 or absent ranks by similarity alone; lower trades similarity for "
                  "hits unlike those ranked above them (0: as unlike as possible).")
    min_similarity = StrictFloatField(min_value=-1, max_value=1, default=0.0,
                                      help_text="Hits less similar (cosine) to their query chunk are dropped.")
    mode = serializers.ChoiceField(choices=SEARCH_MODES, default="approximate",
                                   help_text="approximate (the HNSW index) or exact (every chunk compared).")
    user_id = user_id_field(required=False, help_text=(
        "The end user whose conversation it is (enrich/conversation's `user_id`): what Lectern added to "
        "their messages, and what enrich added for the caller, is removed before searching. Absent: what "
        "enrich added for the caller."))


class ConversationSearchOutputSerializer(serializers.Serializer[dict[str, Any]]):
    results = ConversationHitSerializer(many=True)
    counts = ConversationCountsSerializer()
    mode = serializers.ChoiceField(choices=SEARCH_MODES)
    took_ms = serializers.FloatField()
    withheld = WithheldHitsSerializer(
        help_text="Sources that need an approval the caller lacks: left out before ranking, each named "
                  "whatever the conversation. Where the policies disclose matches, a chunk counts when it is at "
                  "least as similar to some query chunk as the least similar hit returned (min_similarity, when "
                  "fewer than top_k were found). Never any content.")


def conversation_response(caller: RequestUser, params: dict[str, Any]) -> dict[str, Any]:
    """The conversation search endpoint's body for validated `params` (REST and the MCP
    tool). The search reads from the replica when it is fresh enough for this caller
    (catalog.reads), with each hit's citation; the requests it calls for are raised after
    it, on the primary, then the trace is stored with the passages it served."""
    agent = caller if isinstance(caller, Agent) else None
    messages = messages_of(params["messages"])
    catalog, result, citations = replica_read(
        agent=agent, read=lambda: _conversation_search(caller, agent, messages, params))
    asked = next((m.content for m in reversed(messages) if m.role == "user"), "")
    raised = withheld_requests_raise(agent=agent, decisions=requests_due(result.withheld, result.gate),
                                     via="search", context=request_context("conversation search", asked))
    result.withheld = with_requests(result.withheld, raised)
    served_trace_record(trace=search_trace(caller, catalog, asked, result.mode, result.took_ms, citations,
                                           result.withheld), citations=citations)
    return ConversationSearchOutputSerializer(_conversation_body(result, citations)).data


def _conversation_search(caller: RequestUser, agent: Agent | None, messages: list[Message],
                         params: dict[str, Any]) -> tuple[Catalog, ConversationResult, list[Citation]]:
    params = {"top_k": default_top_k(caller), **params}
    catalog = get_catalog_for_caller(caller, params.pop("catalog"))
    params.pop("messages")
    person = "" if isinstance(caller, Agent) else caller.get_username()
    signer = injection_signer(agent=agent, person=person, end_user=params.pop("user_id", ""))
    try:
        result = conversation_search(catalog=catalog, messages=messages, options=ConversationOptions(**params),
                                     agent=agent, signer=signer)
    except ConversationTooLong as exc:
        raise serializers.ValidationError({"messages": [str(exc)]}) from None
    except SearchUnavailable as exc:
        raise ConflictError(f"vector search is unavailable: {exc}", code="embeddings_unavailable") from None
    return catalog, result, citations_of(catalog=catalog, hits=result.hits, agent=agent)


def _conversation_body(result: ConversationResult, citations: list[Citation]) -> dict[str, Any]:
    chunks = [{"index": i, "excerpt": excerpt(" ".join(text.split()), QUERY_CHUNK_EXCERPT_CHARS)}
              for i, text in enumerate(result.chunks)]
    hits = [{**hit.__dict__, **citation.fields(), "citation": hit.citation, "rank": i,
             "query_chunk": chunks[hit.query_chunk]}
            for i, (hit, citation) in enumerate(zip(result.hits, citations, strict=True), start=1)]
    counts = {"chunks": len(result.chunks), "results": result.results, "deduplicated": result.deduplicated,
              "final": len(result.hits)}
    return {"results": hits, "counts": counts, "mode": result.mode, "took_ms": round(result.took_ms, 2),
            "withheld": withheld_report(result.withheld)}


# --- enrich/conversation (enrich_conversation) ---------------------------------------------


class ConversationOptionsSerializer(serializers.Serializer[None]):
    rag_relevance_threshold = StrictFloatField(
        min_value=0.0, max_value=1.0, required=False,
        help_text="Lowest relevance of a memory or passage to add (default: the agent's, 0.3).")
    rag_max_results = StrictIntegerField(
        min_value=0, max_value=20, required=False,
        help_text="Most memories and passages to add (default: the agent's, 3).")
    tokenizer = serializers.ChoiceField(
        choices=TOKENIZERS, default="model",
        help_text="How tokens are counted: the embedding model's tokenizer, or characters / 4.")


class ContextItemSerializer(serializers.Serializer[dict[str, Any]]):
    kind = serializers.ChoiceField(choices=["memory", "passage"])
    text = serializers.CharField()
    score = serializers.FloatField(help_text="A memory's score (relevance x recency); a passage's cosine similarity.")
    ref = serializers.CharField(help_text="A passage's reference, as `@ref` names it; empty for a memory.")
    catalog = serializers.CharField()
    source_id = serializers.CharField()
    document_id = serializers.CharField()
    memory_id = serializers.IntegerField(allow_null=True)
    citation = serializers.CharField(default="", help_text="A passage's place in its document, as one line to quote "
                                               "(`path:lines`, `file p. 3`, ... as a search hit's); empty for a "
                                               "memory, and in a trace.")
    cite = serializers.CharField(default="", help_text=f"{CITE_HELP} Empty for a memory, and in a trace.")
    fingerprint = serializers.CharField(default="", help_text="sha256 of the passage's text as served (the "
                                                              "whole passage, before the context line cuts it); "
                                                              "empty for a memory, and in a trace.")
    byte_start = serializers.IntegerField(allow_null=True, default=None,
                                          help_text="The passage's first byte in its document's UTF-8 text; null "
                                                    "for a memory, and in a trace.")
    byte_end = serializers.IntegerField(allow_null=True, default=None, help_text="The byte after its last.")
    approval_id = serializers.IntegerField(
        allow_null=True, default=None, help_text="The approval request that let the passage's source through; "
                                                 "null where it needs none, for a memory, and in a trace.")


class ConversationWithheldSerializer(serializers.Serializer[dict[str, Any]]):
    source_id = serializers.CharField()
    catalog = serializers.CharField()
    ref = serializers.CharField()
    reason = serializers.CharField()
    request_id = request_id_field()
    count = serializers.IntegerField(
        allow_null=True, help_text="Its passages that matched the message, where its policies disclose matches; "
                                   "null otherwise (named whatever the message).")


class TokensSerializer(serializers.Serializer[dict[str, Any]]):
    before = serializers.IntegerField(help_text="The messages as received.")
    after = serializers.IntegerField(help_text="The messages as returned.")
    freed = serializers.IntegerField(help_text="Removed with earlier turns' injections.")
    added = serializers.IntegerField(help_text="The new injection.")


class EnrichConversationInputSerializer(serializers.Serializer[None]):
    messages = messages_field(help_text="The conversation, oldest first, as the client holds it (what it "
                                        "received from an earlier call included).")
    user_id = user_id_field()
    memory = StrictBooleanField(default=True, help_text="False: no facts and no memory for this request.")
    catalogs = catalogs_field()
    options = ConversationOptionsSerializer(required=False)


class EnrichConversationOutputSerializer(serializers.Serializer[dict[str, Any]]):
    messages = MessageSerializer(many=True)
    injected_into = serializers.IntegerField(allow_null=True,
                                             help_text="The index of the message that carries the injection.")
    facts = serializers.ListField(child=serializers.DictField(child=serializers.CharField()))
    # named like Field.context (see PinnedReferenceSerializer)
    context = ContextItemSerializer(many=True)  # type: ignore[assignment]
    withheld = ConversationWithheldSerializer(many=True)
    tokens = TokensSerializer()
    tokenizer = serializers.ChoiceField(choices=TOKENIZERS)
    trace_id = serializers.UUIDField()
    took_ms = serializers.FloatField()
    degraded = serializers.CharField(allow_null=True)


def enrich_conversation_response(user: RequestUser, params: dict[str, Any]) -> dict[str, Any]:
    """The enrich/conversation body for validated `params` (REST and the MCP tool)."""
    options = params.get("options") or {}
    result = enrich_conversation(
        caller=Caller.of(user, params.get("catalogs")), messages=messages_of(params["messages"]),
        user_id=params["user_id"], memory=params.get("memory", True),
        threshold=options.get("rag_relevance_threshold"), max_results=options.get("rag_max_results"),
        tokenizer=options.get("tokenizer", "model"))
    return EnrichConversationOutputSerializer({
        "messages": [{"role": m.role, "content": m.content} for m in result.messages],
        "injected_into": result.injected_into, "facts": result.facts,
        "context": [item.as_dict() for item in result.context], "withheld": result.withheld,
        "tokens": result.tokens, "tokenizer": result.tokenizer, "trace_id": result.trace.id,
        "took_ms": result.trace.took_ms, "degraded": result.degraded}).data
