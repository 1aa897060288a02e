"""rag_search's shapes and its body: `search_response` builds what REST
(retrieval.search.apis) and the MCP tool (retrieval.mcp.tools) both return, so the two
never drift. The hit and withheld shapes, `withheld_report` and `default_top_k` are
conversation search's too (retrieval.conversations.serializers)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from approvals.serializers import gate_state_field, request_id_field
from approvals.services.requests import request_context, withheld_requests_raise
from catalog.auth import RequestUser, get_catalog_for_caller
from catalog.errors import ConflictError
from catalog.models import Agent, Catalog
from catalog.ranking import FUSIONS, MODES, NORMALISATIONS
from catalog.reads import replica_read
from catalog.rest.fields import (
    StrictBooleanField,
    StrictCharField,
    StrictFloatField,
    StrictIntegerField,
    StrictSlugField,
)
from retrieval.citations.selectors import Citation, citations_of
from retrieval.citations.serializers import CitedSerializer
from retrieval.citations.services import served_trace_record
from retrieval.models import Trace
from retrieval.search.selectors import (
    SearchOptions,
    SearchResult,
    WithheldHits,
    chunk_search,
    requests_due,
    with_requests,
)
from retrieval.search.vector import SearchUnavailable

# top_k when a person's session searches without one (an agent gets its default_top_k).
SESSION_TOP_K = 10


_WEIGHT = {"type": "number", "minimum": 0, "maximum": 100}



@extend_schema_field({
    "type": "object", "properties": {"bm25": _WEIGHT, "vector": _WEIGHT}, "additionalProperties": False,
    "description": "Per-component weights (RRF or convex); at least one positive. A component not named "
                   "keeps the catalog's weight.",
    "anyOf": [{"required": ["bm25"], "properties": {"bm25": {"minimum": 0, "exclusiveMinimum": True}}},
              {"required": ["vector"], "properties": {"vector": {"minimum": 0, "exclusiveMinimum": True}}}],
})
class WeightsField(serializers.DictField):
    child = StrictFloatField(min_value=0, max_value=100)


class SearchScoresSerializer(serializers.Serializer[dict[str, Any]]):
    bm25 = serializers.FloatField(help_text="0 when no query term is in the chunk.")
    vector = serializers.FloatField(allow_null=True, help_text="Cosine similarity; null without embeddings.")
    fused = serializers.FloatField(help_text="The score the hits are ranked by.")


class SearchRanksSerializer(serializers.Serializer[dict[str, Any]]):
    bm25 = serializers.IntegerField(allow_null=True, help_text="Null when the lexical list did not hold it.")
    vector = serializers.IntegerField(allow_null=True, help_text="Null when the vector list did not hold it.")


class LocatorSerializer(serializers.Serializer[dict[str, Any]]):
    """Where a chunk sits in what it was read from; each field only where it applies."""

    format = serializers.CharField(required=False, help_text="What the document was read as: markdown, text, "
                                                             "html, pdf, docx or pptx.")
    lines = serializers.ListField(child=serializers.IntegerField(min_value=1), min_length=2, max_length=2,
                                  required=False, help_text="First and last line (text and Markdown files).")
    pages = serializers.ListField(child=serializers.IntegerField(min_value=1), min_length=2, max_length=2,
                                  required=False, help_text="First and last page (PDF).")
    slides = serializers.ListField(child=serializers.IntegerField(min_value=1), min_length=2, max_length=2,
                                   required=False, help_text="First and last slide (PPTX).")
    heading = serializers.CharField(required=False, help_text="The heading path where the chunk starts, "
                                                              "`Setup › Linux`.")
    commit = serializers.CharField(required=False, help_text="The commit a git file's text was read at.")
    link = serializers.URLField(required=False, help_text="The git file's page at that commit on its forge, at "
                                                          "the chunk's lines (GitHub, GitLab, Gitea hosts).")
    url = serializers.URLField(required=False, help_text="The web page the chunk was read from.")


# What every search hit shows of its chunk (each search adds its scores). A comment, not
# a docstring: drf-spectacular would give every hit's schema that description.
class ChunkHitSerializer(CitedSerializer):
    rank = serializers.IntegerField(min_value=1)
    chunk_id = serializers.CharField(source="key", help_text="catalog:source:path:byte_offset")
    document_id = serializers.CharField(help_text="The document's path within its source.")
    title = serializers.CharField()
    source = serializers.CharField(  # type: ignore[assignment]  # the stubs' Field.source: see catalog.apis
        help_text="The source's slug (the reference id).")
    byte_offset = serializers.IntegerField(min_value=0)
    content = serializers.CharField()
    locator = LocatorSerializer()
    citation = serializers.CharField(
        help_text="Where the chunk sits, as one line to quote: `path:lines`, `file p. 3`, `deck slide 2`, "
                  "`path:lines @ commit` or `URL`, then ` — heading path` where it has one.")


class SearchHitSerializer(ChunkHitSerializer):
    score = serializers.FloatField()
    scores = SearchScoresSerializer()
    ranks = SearchRanksSerializer()


class WithheldSourceSerializer(serializers.Serializer[dict[str, Any]]):
    source = serializers.CharField(  # type: ignore[assignment]  # the stubs' Field.source: see catalog.apis
        help_text="The withheld source's slug (the reference id).")
    count = serializers.IntegerField(
        min_value=0, allow_null=True,
        help_text="Its chunks that match the query, where the policies covering the source disclose matches "
                  "(`disclose_matches`); null otherwise: the source is named whatever the query.")
    state = gate_state_field()
    reason = serializers.CharField(help_text="Why it is withheld from this caller.")
    request_id = request_id_field()


class WithheldHitsSerializer(serializers.Serializer[dict[str, Any]]):
    count = serializers.IntegerField(min_value=0, help_text="Matching chunks left out, over the sources that "
                                                            "disclose matches.")
    sources = WithheldSourceSerializer(
        many=True, help_text="Every source of the catalog withheld from the caller: those with matches disclosed, "
                             "most matching first, then the rest by id.")


class SearchInputSerializer(serializers.Serializer[None]):
    catalog = StrictSlugField(max_length=64)
    query = StrictCharField(
        max_length=settings.LECTERN_MAX_ENRICH_CHARS,
        help_text="What to look for: a question, or a whole passage (a tool result, an argument) to find its "
                  "counterpart. BM25 scores every term; the embedding model reads the head (see "
                  "`query_truncated`).")
    top_k = StrictIntegerField(
        min_value=1, max_value=1000, required=False,
        help_text="Hits to return; default: the calling agent's `default_top_k` (`create_agent --top-k`), "
                  f"{SESSION_TOP_K} for a person's session.")
    mode = serializers.ChoiceField(
        choices=MODES, required=False,
        help_text="Default: the catalog's ranking settings' mode (hybrid unless its curators chose another).")
    fusion = serializers.ChoiceField(choices=FUSIONS, required=False,
                                     help_text="Hybrid's fusion; default: the catalog's (rrf unless set).")
    normalization = serializers.ChoiceField(choices=NORMALISATIONS, required=False,
                                            help_text="Convex fusion's; default: the catalog's (minmax unless set).")
    weights = WeightsField(required=False)
    dedup = StrictBooleanField(default=False, help_text="One chunk per document.")

    def validate_weights(self, value: dict[str, float]) -> dict[str, float]:
        unknown = set(value) - {"bm25", "vector"}
        if unknown:
            raise serializers.ValidationError(f"unknown components: {sorted(unknown)}; use bm25 and vector")
        if not any(value.values()):
            raise serializers.ValidationError("at least one weight must be positive")
        return value


class SearchOutputSerializer(serializers.Serializer[dict[str, Any]]):
    results = SearchHitSerializer(many=True)
    mode = serializers.ChoiceField(choices=MODES, help_text="The mode that ran: bm25 when degraded.")
    took_ms = serializers.FloatField()
    degraded = serializers.CharField(allow_null=True, help_text="Why search fell back to lexical-only, if it did.")
    withheld = WithheldHitsSerializer(
        help_text="Sources that need an approval the caller lacks: left out before ranking, so `results` "
                  "holds top_k of what may be shown; each named whatever the query. Only where the policies "
                  "disclose matches are its matching chunks counted (and its request raised when some match): "
                  "a chunk counts when it holds a query term (bm25, hybrid, bm25_tiebreak) or, with vectors "
                  "(vector, hybrid), is at least as similar to the query as the least similar hit returned "
                  "(any, when fewer than top_k were found). Never any content.")
    query_truncated = serializers.BooleanField(
        help_text="True when the query is longer than the embedding model reads: the vector side used only its "
                  "first `vector_query_chars` characters. BM25 always scores every term of the query.")
    vector_query_chars = serializers.IntegerField(
        min_value=0, allow_null=True,
        help_text="How many leading characters (code points, surrounding whitespace removed) of the query the "
                  "embedding model read: all of them unless `query_truncated`. Null when no vector was computed "
                  "(mode bm25, or degraded).")


def default_top_k(caller: RequestUser) -> int:
    """How many hits a search without top_k returns: an agent's own default (its
    instructions may promise that many), else SESSION_TOP_K."""
    return caller.default_top_k if isinstance(caller, Agent) else SESSION_TOP_K


def search_response(caller: RequestUser, params: dict[str, Any]) -> dict[str, Any]:
    """The search endpoint's body for validated `params` (REST and the MCP tool). The
    search reads from the replica when it is fresh enough for this caller
    (catalog.reads), with each hit's citation; the requests it calls for are raised
    after it, on the primary, as every write is (their webhook events read the rows they
    write), then the trace is stored with the passages it served."""
    agent = caller if isinstance(caller, Agent) else None  # a person: the gate's rule for people
    query = params["query"]
    catalog, result, citations = replica_read(agent=agent, read=lambda: _search(caller, agent, params))
    raised = withheld_requests_raise(agent=agent, decisions=requests_due(result.withheld, result.gate), via="search",
                                     context=request_context("search", query))  # a request each, once
    result.withheld = with_requests(result.withheld, raised)
    served_trace_record(trace=search_trace(caller, catalog, query, result.mode, result.took_ms, citations,
                                           result.withheld), citations=citations)
    return _search_body(result, citations)


def _search(caller: RequestUser, agent: Agent | None,
            params: dict[str, Any]) -> tuple[Catalog, SearchResult, list[Citation]]:
    params = {"top_k": default_top_k(caller), **params}
    catalog = get_catalog_for_caller(caller, params.pop("catalog"))
    query = params.pop("query")
    try:
        result = chunk_search(catalog=catalog, query=query, options=SearchOptions(**params), agent=agent)
    except SearchUnavailable as exc:
        raise ConflictError(f"vector search is unavailable: {exc}", code="embeddings_unavailable") from None
    return catalog, result, citations_of(catalog=catalog, hits=result.hits, agent=agent)


def search_trace(caller: RequestUser, catalog: Catalog, text: str, mode: str, took_ms: float,
                 citations: list[Citation], withheld: list[WithheldHits]) -> Trace:
    """The trace of a search (a conversation's too), unsaved: the passages it returned
    by reference (their texts are kept apart, by fingerprint), the sources it withheld,
    a hint each so the traces list finds it by reference."""
    served = list(dict.fromkeys(c.source for c in citations))
    hints: list[dict[str, Any]] = [
        {"source_id": slug, "catalog": catalog.slug, "ref": f"{catalog.slug}/{slug}", "name": slug, "matched": [],
         "via": "search", "score": None, "injected": "search", "withheld": False, "reason": "", "request_id": None}
        for slug in served]
    hints += [{"source_id": entry.source, "catalog": catalog.slug, "ref": f"{catalog.slug}/{entry.source}",
               "name": entry.source, "matched": [], "via": "search", "score": None, "injected": "none",
               "withheld": True, "reason": entry.reason, "request_id": entry.request_id, "count": entry.count}
              for entry in withheld]
    step = {"pass": "search", "ms": round(took_ms, 3), "catalog": catalog.slug, "mode": mode,
            "hits": [{"ref": f"{catalog.slug}/{c.source}", "approval_id": c.approval_id} for c in citations],
            "withheld": [hint for hint in hints if hint["withheld"]]}
    agent = caller if isinstance(caller, Agent) else None
    name = caller.name if isinstance(caller, Agent) else caller.get_username()
    return Trace(agent=agent, caller=name, surface=Trace.Surface.SEARCH,
                 text=text if settings.LECTERN_TRACE_STORE_TEXT else None, steps=[step], hints=hints,
                 took_ms=round(took_ms, 3))


def _search_body(result: SearchResult, citations: list[Citation]) -> dict[str, Any]:
    hits = [{**hit.__dict__, **citation.fields(), "citation": hit.citation, "rank": i}
            for i, (hit, citation) in enumerate(zip(result.hits, citations, strict=True), start=1)]
    return SearchOutputSerializer({"results": hits, "mode": result.mode, "took_ms": round(result.took_ms, 2),
                                       "degraded": result.degraded, "withheld": withheld_report(result.withheld),
                                       "query_truncated": result.query_truncated,
                                       "vector_query_chars": result.vector_query_chars}).data


def withheld_report(withheld: list[WithheldHits]) -> dict[str, Any]:
    """A search's `withheld` body: every source withheld, and how many matching chunks
    were left out where that is disclosed."""
    return {"count": sum(entry.count or 0 for entry in withheld), "sources": [entry.__dict__ for entry in withheld]}
