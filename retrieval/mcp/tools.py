"""The MCP tools: rag_search, explain_search, search_conversation, list_references,
select_references, read_reference_file, enrich, explain_enrichment, agent_instructions,
approval_requests, enrich_conversation and store_memory, each a typed function whose
docstring and signature the SDK publishes as its description and input schema.

A signature offers every field of the operation's input serializer (the REST view takes the
same one from the feature's serializers module), with its limits,
choices and defaults (tests/retrieval/test_mcp_schema.py holds the two together); the
serializer, not the signature, checks the arguments (retrieval.mcp.calls), so every
parameter is SkipValidation and the SDK only describes it. A null argument counts as
omitted: the defaults of catalog and top_k come from the agent, those of other optional
fields from the serializer.

Whatever a tool withholds for want of an approval, its text names, with the request to
follow (approval_requests lists them): the two searches in their own text, the others in a
second text item after the first (the REST body as JSON, a file's text, the startup
instructions), and structuredContent has `request_id` beside each.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Iterable
from typing import Annotated, Any, Literal, NamedTuple, TypeVar

from django.conf import settings
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import ConfigDict, Field, SkipValidation, with_config
from rest_framework import serializers
from typing_extensions import TypedDict

from approvals.serializers import ApprovalListQuerySerializer, approval_requests_response
from catalog.auth import visible_catalogs
from catalog.errors import ApplicationError
from catalog.models import Agent
from catalog.rest.fields import NOT_BLANK_PATTERN, StrictSlugField
from retrieval.conversations.serializers import (
    ConversationSearchInputSerializer,
    EnrichConversationInputSerializer,
    conversation_response,
    enrich_conversation_response,
)
from retrieval.enrichment import references
from retrieval.enrichment.caller import Caller
from retrieval.enrichment.serializers import (
    REFERENCE_ID,
    EnrichInputSerializer,
    ReferenceFileQuerySerializer,
    ReferenceListQuerySerializer,
    ReferenceSelectInputSerializer,
    enrich_response,
    instructions_response,
    reference_file_response,
    references_response,
)
from retrieval.explain.serializers import (
    EnrichmentExplainInputSerializer,
    ExplainInputSerializer,
    enrichment_explain_response,
    explain_response,
)
from retrieval.mcp.calls import Ctx, Operation, answer, error_result, json_result
from retrieval.memory.serializers import StoreMemorySerializer, store_memory_response
from retrieval.models import END_USER_MAX
from retrieval.search.serializers import SearchInputSerializer, search_response

NO_RESULTS = "No relevant documentation found for your query."
SLUG = r"^[-a-zA-Z0-9_]+$"  # DRF's SlugField, spelled for JSON Schema (Python's \Z is $ there)

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
RECORDS = ToolAnnotations(read_only_hint=False, open_world_hint=False)  # a selection or a trace

Slug = Annotated[str, Field(max_length=64, pattern=SLUG)]
ReferenceId = Annotated[str, Field(max_length=200, pattern=REFERENCE_ID)]
ToolFunction = TypeVar("ToolFunction", bound=Callable[..., Awaitable[CallToolResult]])
# A text as long as enrich reads: a query, a prompt, a tool result (each tool says which).
LongText = Annotated[str, Field(max_length=settings.LECTERN_MAX_ENRICH_CHARS, pattern=NOT_BLANK_PATTERN),
                     SkipValidation]
Surface = Literal["prompt", "tool_result"]
Catalogs = Annotated[
    list[Slug] | None,
    Field(max_length=50, description="Restrict to these catalogs (default: all the agent may see)."),
    SkipValidation,
]


# --- what was withheld ----------------------------------------------------------------------

FOLLOW = "approval_requests lists your requests and their states"


def qualifies(agent: Agent) -> bool:
    """Whether the ids written for `agent` name their catalog (it reads several), as
    enrichment writes them (retrieval.enrichment.caller.Caller.qualify)."""
    return visible_catalogs(agent).count() > 1


def ref_of(qualify: bool, catalog: str, source_id: str) -> str:
    return f"{catalog}/{source_id}" if qualify else source_id


def withheld_reason(reason: str, request_id: int | None) -> str:
    """The gate's reason, naming the request to follow where the reason does not."""
    if request_id is None:
        return f"{reason}; no request yet: select_references asks a reviewer"
    if re.search(rf"\brequest {request_id}\b", reason):
        return reason
    return f"{reason} (request {request_id})"


def withheld_text(entries: Iterable[tuple[str, str, int | None]]) -> str:
    """The references withheld, (ref, reason, request id) each, a line each with the
    request to follow; '' when none."""
    lines = [f"- @{ref}: {withheld_reason(reason, request_id)}" for ref, reason, request_id in entries]
    if not lines:
        return ""
    return "\n".join([f"Withheld for want of an approval ({FOLLOW}):", *lines])


# --- rag_search ---------------------------------------------------------------------------


@with_config(ConfigDict(extra="forbid"))
class Weights(TypedDict, total=False):
    """Per-component weights, at least one positive: RRF's (default 1 each) or convex
    fusion's (default 0.5 each)."""

    bm25: Annotated[float, Field(ge=0, le=100)]
    vector: Annotated[float, Field(ge=0, le=100)]


def _scored(hit: dict[str, Any]) -> str:
    return f"score: {hit['score']:.3f}, source: {hit['document_id']}"


def format_hits(hits: list[dict[str, Any]], label: Callable[[dict[str, Any]], str] = _scored) -> str:
    """rag_search's text: one `--- Result N (score: 0.XXX, source: path) ---`
    block per hit (another `label` says what is in the brackets), or a fixed sentence
    when there is none."""
    if not hits:
        return NO_RESULTS
    return "\n\n".join(f"--- Result {hit['rank']} ({label(hit)}) ---\n{hit['content']}" for hit in hits)


def withheld_note(withheld: dict[str, Any], *, catalog: str, qualify: bool) -> str:
    """The references search left out for want of an approval, why and the request to
    follow (never their content), and how many matching passages each holds where its
    policies disclose that, a line each; '' when none."""
    if not withheld["sources"]:
        return ""
    lines = []
    for entry in withheld["sources"]:
        why = withheld_reason(entry["reason"], entry["request_id"])
        counted = why if entry["count"] is None else f"{entry['count']} ({why})"
        lines.append(f"- @{catalog + '/' if qualify else ''}{entry['source']}: {counted}")
    count = withheld["count"]
    passages = f"{count} matching passage{'' if count == 1 else 's'} in " if count else ""
    return "\n".join([f"Withheld: {passages}references that need an approval ({FOLLOW}):", *lines])


def _search_defaults(agent: Agent, arguments: dict[str, Any]) -> dict[str, Any]:
    """catalog defaults to the agent's only catalog (top_k to its default_top_k, in
    search_response, as for REST)."""
    if "catalog" not in arguments:
        slugs = list(visible_catalogs(agent).order_by("slug").values_list("slug", flat=True))
        if len(slugs) != 1:
            named = f": {', '.join(slugs)}" if slugs else ""
            raise serializers.ValidationError(
                {"catalog": [f"required: this agent may search {len(slugs)} catalogs{named}"]}
            )
        arguments["catalog"] = slugs[0]
    return arguments


def _search(agent: Agent, params: dict[str, Any]) -> CallToolResult:
    return _hits_result(agent, params["catalog"], search_response(agent, params))


def _hits_result(agent: Agent, catalog: str, body: dict[str, Any],
                 label: Callable[[dict[str, Any]], str] = _scored) -> CallToolResult:
    """A search's body as structuredContent, its hits as text, then what it withheld."""
    withheld = body["withheld"]
    note = withheld_note(withheld, catalog=catalog, qualify=bool(withheld["sources"]) and qualifies(agent))
    return json_result(body, text=format_hits(body["results"], label) + (f"\n\n{note}" if note else ""))


SEARCH = Operation(SearchInputSerializer, _search, fill_defaults=_search_defaults)

# rag_search's arguments, explain_search's too (it explains that search).
Query = Annotated[
    LongText,
    Field(description="What to look for, in natural language; or a whole passage (a tool result, an "
                      "argument) to find its counterpart."),
]
SearchCatalog = Annotated[
    Slug | None, Field(description="The catalog to search; default: the agent's only catalog."), SkipValidation
]
TopK = Annotated[
    int | None, Field(ge=1, le=1000, description="How many passages; default: the agent's default_top_k."),
    SkipValidation,
]
Mode = Annotated[
    Literal["bm25", "vector", "hybrid", "bm25_tiebreak"] | None,
    Field(description="bm25 (exact words), vector (meaning), hybrid (both, fused) or bm25_tiebreak (passages "
                      "holding a query word, ranked by BM25, ties by meaning); default: the catalog's (hybrid "
                      "unless its curators chose another)."),
    SkipValidation,
]
Fusion = Annotated[
    Literal["rrf", "convex"] | None,
    Field(description="How hybrid fuses the two rankings: rrf (reciprocal rank) or convex (a weighted sum of "
                      "normalised scores); default: the catalog's."),
    SkipValidation,
]
Normalization = Annotated[
    Literal["minmax", "zscore"] | None,
    Field(description="How convex fusion normalises each ranking's scores; default: the catalog's."),
    SkipValidation,
]
WeightsArgument = Annotated[Weights | None, Field(description="Per-component fusion weights."), SkipValidation]
Dedup = Annotated[bool, Field(description="At most one passage per document."), SkipValidation]


async def rag_search(
    ctx: Ctx,
    query: Query,
    catalog: SearchCatalog = None,
    top_k: TopK = None,
    mode: Mode = None,
    fusion: Fusion = None,
    normalization: Normalization = None,
    weights: WeightsArgument = None,
    dedup: Dedup = False,
) -> CallToolResult:
    """Search a reference catalog for passages relevant to a natural-language query. Returns up to
    top_k passages, best first, each as `--- Result N (score: 0.XXX, source: path) ---` followed by
    its text, then lines naming the catalog's references withheld from you (they need an approval)
    and the approval request each waits on; structuredContent has chunk ids, component scores,
    `withheld`, and each hit's `cite` (quote it to cite the passage: `[lectern:catalog/source/
    path#bSTART-END@FINGERPRINT]`), `fingerprint`, `byte_start`/`byte_end` and `approval_id`."""
    return await answer(ctx, SEARCH)


# --- explain_search -----------------------------------------------------------------------


def _explained(agent: Agent, body: dict[str, Any], *, catalog: str, source_id: str) -> CallToolResult:
    """An explanation's sentences as text; the source or reference it explains named again
    with the request to follow when the gate withheld it."""
    governance = body["governance"]
    note = ""
    if governance is not None and governance["withheld"]:
        ref = ref_of(qualifies(agent), catalog, source_id)
        note = withheld_text([(ref, governance["reason"], governance["request_id"])])
    return json_result(body, text="\n".join(body["sentences"]), note=note)


def _explain(agent: Agent, params: dict[str, Any]) -> CallToolResult:
    """The stages as sentences; a withheld source named again with the request to follow."""
    body = explain_response(agent, params)
    return _explained(agent, body, catalog=params["catalog"], source_id=params["source"])


EXPLAIN = Operation(ExplainInputSerializer, _explain, fill_defaults=_search_defaults)


def _with_search_options(tool: ToolFunction) -> ToolFunction:
    """Publishes `tool`, whose own parameters end in **options, with rag_search's options
    (its parameters with a default) in their place: the signature the SDK reads for the
    input schema. The tool's body reads its arguments from the call, not from them."""
    own = inspect.signature(tool, eval_str=True).parameters.values()
    options = inspect.signature(rag_search, eval_str=True).parameters.values()
    tool.__signature__ = inspect.Signature(  # type: ignore[attr-defined]  # read by inspect.signature
        [*(p for p in own if p.kind is not p.VAR_KEYWORD), *(p for p in options if p.default is not p.empty)],
        return_annotation=CallToolResult)
    return tool


@_with_search_options
async def explain_search(
    ctx: Ctx,
    query: Query,
    source: Annotated[
        str, Field(max_length=100, pattern=SLUG, description="The source's slug (a search hit's `source`)."),
        SkipValidation,
    ],
    document: Annotated[
        str, Field(max_length=1024, pattern=NOT_BLANK_PATTERN,
                   description="The document's path within the source (a search hit's `document_id`)."),
        SkipValidation,
    ],
    **options: Any,
) -> CallToolResult:
    """Why a document was or was not among rag_search's results for the same query and options, stage
    by stage: the source and document in the catalog, the approval gate, its best chunk's BM25 score
    (which query terms it holds and what each adds) and rank, its vector similarity and rank, and its
    fused rank against top_k. Returns sentences ending with the verdict (structuredContent: each stage,
    as POST /api/v1/explain). A source withheld from you (it needs an approval) is answered by the gate
    alone, with the approval request to follow; nothing of its content is told."""
    return await answer(ctx, EXPLAIN)


# --- search_conversation ------------------------------------------------------------------


@with_config(ConfigDict(extra="forbid"))
class ConversationMessage(TypedDict):
    """One message of the conversation: who wrote it and its text."""

    role: Annotated[Literal["system", "developer", "user", "assistant", "tool"], Field(description="Who wrote it.")]
    content: Annotated[str, Field(max_length=settings.LECTERN_MAX_ENRICH_CHARS,
                                  description="The message's text, as the model reads it.")]


def _found_by(hit: dict[str, Any]) -> str:
    return (f"similarity: {hit['similarity']:.3f}, source: {hit['document_id']}, "
            f"query chunk {hit['query_chunk']['index']}")


def _conversation(agent: Agent, params: dict[str, Any]) -> CallToolResult:
    return _hits_result(agent, params["catalog"], conversation_response(agent, params), _found_by)


CONVERSATION = Operation(ConversationSearchInputSerializer, _conversation, fill_defaults=_search_defaults)


async def search_conversation(
    ctx: Ctx,
    messages: Annotated[
        list[ConversationMessage],
        Field(min_length=1, max_length=settings.LECTERN_CONVERSATION_MAX_MESSAGES,
              description="The conversation, oldest first: cut at paragraph boundaries into chunks the embedding "
                          "model reads whole, each searched as a query."),
        SkipValidation,
    ],
    catalog: Annotated[
        Slug | None, Field(description="The catalog to search; default: the agent's only catalog."), SkipValidation
    ] = None,
    top_k: Annotated[
        int | None, Field(ge=1, le=100, description="How many passages; default: the agent's default_top_k."),
        SkipValidation,
    ] = None,
    per_document: Annotated[
        int, Field(ge=1, le=10, description="Passages kept per document, the most similar."), SkipValidation
    ] = 1,
    mmr_lambda: Annotated[
        float | None,
        Field(ge=0, le=1, description="Maximal marginal relevance: 1 or omitted ranks by similarity alone; lower "
                                      "trades similarity for passages unlike those ranked above them."),
        SkipValidation,
    ] = None,
    min_similarity: Annotated[
        float, Field(ge=-1, le=1, description="Passages less similar (cosine) to their query chunk are dropped."),
        SkipValidation,
    ] = 0.0,
    mode: Annotated[
        Literal["approximate", "exact"],
        Field(description="approximate (the HNSW index) or exact (every passage compared)."), SkipValidation,
    ] = "approximate",
    user_id: Annotated[
        str | None,
        Field(max_length=END_USER_MAX, pattern=NOT_BLANK_PATTERN,
              description="The end user whose conversation it is (enrich_conversation's user_id): what Lectern "
                          "added to their messages, and what enrich added for the caller, is removed before "
                          "searching."),
        SkipValidation,
    ] = None,
) -> CallToolResult:
    """Search a reference catalog for passages relevant to every topic of a conversation: it is cut
    into chunks, each searched as a query, the best passages of each document kept. Returns up to
    top_k passages, best first, each as `--- Result N (similarity: 0.XXX, source: path, query chunk
    I) ---` followed by its text, then lines naming the catalog's references withheld from you (they
    need an approval) and the approval request each waits on; structuredContent has the counts
    (chunks, results, deduplicated, final), each hit's query chunk, `cite`, `fingerprint`, bytes and
    `approval_id`, and `withheld`."""
    return await answer(ctx, CONVERSATION)


# --- references -----------------------------------------------------------------------------


def _list(agent: Agent, params: dict[str, Any]) -> CallToolResult:
    body = references_response(agent, params)
    withheld = [ref for ref in body["references"] if ref["withheld"]]
    qualify = bool(withheld) and qualifies(agent)
    return json_result(body, note=withheld_text(
        (ref_of(qualify, ref["catalog"], ref["source_id"]), ref["reason"], ref["request_id"]) for ref in withheld))


LIST = Operation(ReferenceListQuerySerializer, _list)


async def list_references(
    ctx: Ctx,
    tag: Annotated[str, Field(max_length=100, description="Only references with this tag."), SkipValidation] = "",
    q: Annotated[
        str, Field(max_length=200, description="Only references whose id, name, description or tags contain this "
                                               "text."),
        SkipValidation,
    ] = "",
    catalog: Annotated[
        str | None, Field(max_length=64, pattern=SLUG, description="Only references of this catalog."),
        SkipValidation,
    ] = None,
) -> CallToolResult:
    """List the references (documentation sources) this agent may use; those withheld (they need an
    approval) are named again in a second text with the approval request each waits on."""
    return await answer(ctx, LIST)


def _select(agent: Agent, params: dict[str, Any]) -> CallToolResult:
    caller = Caller.of(agent, params.get("catalogs"))
    body = references.select_references(caller=caller, ids=params["ids"], tags=params["tags"])
    return json_result(body, note=withheld_text(
        (f"{w['catalog']}/{w['source_id']}" if caller.qualify else w["source_id"], w["reason"], w["request_id"])
        for w in body["withheld"]))


SELECT = Operation(ReferenceSelectInputSerializer, _select)


async def select_references(
    ctx: Ctx,
    ids: Annotated[
        list[ReferenceId] | None,
        Field(max_length=100, description="Reference ids, `source` or `catalog/source` (a leading @ is allowed)."),
        SkipValidation,
    ] = None,
    tags: Annotated[
        list[Annotated[str, Field(max_length=100, pattern=NOT_BLANK_PATTERN)]] | None,
        Field(max_length=50, description="Select every reference carrying one of these tags."),
        SkipValidation,
    ] = None,
    catalogs: Catalogs = None,
) -> CallToolResult:
    """Select references by id or by tag (give at least one): returns each one's description,
    files and instructions, and those withheld (they need an approval) with the reason and the
    approval request to follow (approval_requests)."""
    return await answer(ctx, SELECT)


class ReadFileArguments(ReferenceFileQuerySerializer):
    """The file endpoint's query plus the two parts of its URL, with the URL's rules."""

    catalog = StrictSlugField(max_length=64)
    source_id = StrictSlugField(max_length=100)


def _read(agent: Agent, params: dict[str, Any]) -> CallToolResult:
    try:
        body = reference_file_response(agent, catalog=params["catalog"], source_id=params["source_id"],
                                       path=params["path"])
    except ApplicationError as exc:
        if exc.code != "withheld":
            raise
        ref = ref_of(qualifies(agent), params["catalog"], params["source_id"])
        return error_result(exc, note=withheld_text([(ref, exc.message, exc.details["request_id"])]))
    return json_result(body, text=body["text"] if body["encoding"] == "utf-8" else None)


READ = Operation(ReadFileArguments, _read)


async def read_reference_file(
    ctx: Ctx,
    catalog: Annotated[Slug, Field(description="The reference's catalog."), SkipValidation],
    source_id: Annotated[
        str, Field(max_length=100, pattern=SLUG, description="The reference id, without @."), SkipValidation
    ],
    path: Annotated[str, Field(max_length=1024, description="The file's path, as `files` lists it."), SkipValidation],
) -> CallToolResult:
    """Read one file of a reference this agent has selected (or has by profile): any path that
    select_references lists in `files`. Returns the file's text (structuredContent: path, title,
    sha256, encoding; a file that is not UTF-8 text comes base64-encoded, as JSON). A reference
    that needs an approval is an error naming the approval request to follow."""
    return await answer(ctx, READ)


# --- enrichment -----------------------------------------------------------------------------


class NoArguments(serializers.Serializer[None]):
    pass


def _instructions(agent: Agent, params: dict[str, Any]) -> CallToolResult:
    body = instructions_response(agent)
    withheld = [source for source in body["sources"] if source["included"] == "withheld"]
    qualify = bool(withheld) and qualifies(agent)
    # the startup text as REST gives it (within the token budget), then what it left out
    return json_result(body, text=body["text"], note=withheld_text(
        (ref_of(qualify, s["catalog"], s["source_id"]), s["reason"], s.get("request_id")) for s in withheld))


INSTRUCTIONS = Operation(NoArguments, _instructions)


async def agent_instructions(ctx: Ctx) -> CallToolResult:
    """This agent's startup instructions: auto references, its preselected ones and those they link to,
    whole or listed within its token budget, and how to search for rag agents. Returns the text
    (structuredContent: which references were included, listed or withheld, and why), then, in a
    second text, those withheld (they need an approval) with the approval request each waits on."""
    return await answer(ctx, INSTRUCTIONS)


def _enrich(agent: Agent, params: dict[str, Any]) -> CallToolResult:
    body = enrich_response(agent, params)
    withheld = {(h["catalog"], h["source_id"]): (h.get("ref") or h["source_id"], h["reason"], h.get("request_id"))
                for h in body["hints"] if h["withheld"]}
    pinned = body["pinned_reference"]
    if pinned is not None and pinned["withheld"] and (pinned["catalog"], pinned["source_id"]) not in withheld:
        withheld[(pinned["catalog"], pinned["source_id"])] = (
            ref_of(qualifies(agent), pinned["catalog"], pinned["source_id"]), pinned["reason"], pinned["request_id"])
    return json_result(body, note=withheld_text(withheld.values()))


ENRICH = Operation(EnrichInputSerializer, _enrich)


async def enrich(
    ctx: Ctx,
    text: Annotated[LongText, Field(description="The user prompt or tool result.")],
    surface: Annotated[
        Surface, Field(description="prompt (a user message) or tool_result (a tool's output)."), SkipValidation
    ],
    catalogs: Catalogs = None,
    selected: Annotated[
        list[ReferenceId] | None,
        Field(max_length=500, description="References already selected in this conversation: not hinted (those "
                                          "select_references or an @id expansion recorded count without being "
                                          "named here)."),
        SkipValidation,
    ] = None,
    paths: Annotated[
        list[Annotated[str, Field(max_length=1024, pattern=NOT_BLANK_PATTERN)]] | None,
        Field(max_length=100, description="Files the tool read (for path containment)."),
        SkipValidation,
    ] = None,
) -> CallToolResult:
    """Enrich a user prompt or a tool result: expands @reference mentions and appends hints for the
    references it is about. Returns the enriched text, the hints and a trace id; references withheld
    (they need an approval) are named again in a second text with the approval request each waits on."""
    return await answer(ctx, ENRICH)


def _explain_enrichment(agent: Agent, params: dict[str, Any]) -> CallToolResult:
    """The passes as sentences; a withheld reference named again with the request to follow."""
    body = enrichment_explain_response(agent, params)
    return _explained(agent, body, catalog=body["catalog"], source_id=body["source_id"])


EXPLAIN_ENRICHMENT = Operation(EnrichmentExplainInputSerializer, _explain_enrichment)


async def explain_enrichment(
    ctx: Ctx,
    prompt: Annotated[LongText, Field(description="The text enrich would read (its `text`).")],
    reference: Annotated[
        ReferenceId, Field(description="The reference: `id` or `catalog/id` (a leading @ is allowed)."),
        SkipValidation,
    ],
    surface: Annotated[
        Surface, Field(description="prompt (a user message) or tool_result (a tool's output), as for enrich."),
        SkipValidation,
    ] = "prompt",
    catalogs: Catalogs = None,
) -> CallToolResult:
    """Why enrich did or did not hint a reference for a text, pass by pass: the @mention, the path read,
    its tags, the semantic pass (its similarity against the threshold, max(semantic_threshold, best match -
    semantic_margin)), links, and the max_hints cut. Runs enrich's own passes and records nothing.
    Returns sentences ending with the verdict (structuredContent: as POST /api/v1/explain/enrichment). A
    reference withheld from you (it needs an approval) is told only what enrich would tell you, with the
    approval request to follow."""
    return await answer(ctx, EXPLAIN_ENRICHMENT)


# --- conversations and memory ----------------------------------------------------


Messages = Annotated[
    list[ConversationMessage],
    Field(min_length=1, max_length=settings.LECTERN_CONVERSATION_MAX_MESSAGES,
          description="The conversation, oldest first, as the client holds it (what an earlier call returned "
                      "included)."),
    SkipValidation,
]
EndUser = Annotated[str, Field(max_length=END_USER_MAX, pattern=NOT_BLANK_PATTERN,
                               description="The end user, as the agent names them."), SkipValidation]


@with_config(ConfigDict(extra="forbid"))
class ConversationOptions(TypedDict, total=False):
    """Overrides of the agent's conversation profile for this call."""

    rag_relevance_threshold: Annotated[float, Field(ge=0.0, le=1.0, description="Lowest relevance to add.")]
    rag_max_results: Annotated[int, Field(ge=0, le=20, description="Most memories and passages to add.")]
    tokenizer: Annotated[Literal["model", "characters"], Field(description="How tokens are counted.")]


def conversation_note(body: dict[str, Any]) -> str:
    return withheld_text((w["ref"], w["reason"], w.get("request_id")) for w in body["withheld"])


def _enrich_conversation(agent: Agent, params: dict[str, Any]) -> CallToolResult:
    body = enrich_conversation_response(agent, params)
    return json_result(body, note=conversation_note(body))


ENRICH_CONVERSATION = Operation(EnrichConversationInputSerializer, _enrich_conversation)


async def enrich_conversation(
    ctx: Ctx,
    messages: Messages,
    user_id: EndUser,
    memory: Annotated[bool, Field(description="False: no facts and no memory for this call."),
                      SkipValidation] = True,
    catalogs: Catalogs = None,
    options: Annotated[ConversationOptions | None, Field(description="Overrides of the agent's profile."),
                       SkipValidation] = None,
) -> CallToolResult:
    """Enrich a whole conversation: the end user's facts and the memories and catalog passages relevant
    to the newest user message are postfixed onto that message as `[facts: ...]` and `[context: ...]`;
    what Lectern added to earlier turns is removed exactly. Returns the messages to send to the model,
    the tokens before, after and freed, and a trace id; references withheld (they need an approval)
    are named again in a second text with the approval request each waits on."""
    return await answer(ctx, ENRICH_CONVERSATION)


def _store_memory(agent: Agent, params: dict[str, Any]) -> CallToolResult:
    body, created = store_memory_response(agent, params)
    text = "Remembered." if created else f"Already remembered; stored again ({body['memory']['times']} times)."
    return json_result(body, text=text)


STORE_MEMORY = Operation(StoreMemorySerializer, _store_memory)


async def store_memory(
    ctx: Ctx,
    user_id: EndUser,
    content: Annotated[
        str,
        Field(max_length=settings.LECTERN_MEMORY_MAX_CHARS, pattern=NOT_BLANK_PATTERN,
              description="What to remember, as it should be recalled."),
        SkipValidation,
    ],
) -> CallToolResult:
    """Remember something about an end user for their later conversations (enrich_conversation adds
    it as context when a message is about it). The same text stored again is one memory, remembered
    again. Store what is worth recalling: preferences, decisions, facts of their work."""
    return await answer(ctx, STORE_MEMORY)


# --- approvals ------------------------------------------------------------------------------


def request_line(request: dict[str, Any]) -> str:
    """One request as approval_requests' text lists it: its state and what it waits on."""
    state = request["state"]
    line = f"- request {request['id']}: @{request['catalog']}/{request['source_id']} {state}"
    if state == "pending":
        line += f", {request['approvals']} of {request['required_approvals']} approvals"
    if state == "approved" and request["expires_at"]:
        line += f" until {request['expires_at']}"
    if request["ended_at"] and state != "approved":
        line += f" since {request['ended_at']}"
    line += f"; raised via {request['raised_via']} at {request['created_at']}"
    if request["previous_id"] is not None:
        line += f", following request {request['previous_id']}"
    if not request["current"]:
        line += "; for content the reference no longer holds"
    if request["comment"]:
        line += f"; reviewer's comment: {json.dumps(request['comment'], ensure_ascii=False)}"
    return line


def requests_text(body: dict[str, Any], params: dict[str, Any]) -> str:
    count, results, offset = body["count"], body["results"], params["offset"]
    which = f" in state {params['state']}" if params["state"] else ""
    total = f"{count} approval request{'' if count == 1 else 's'}{which}"
    if not results:
        return f"No approval requests{which}." if not count else f"{total}; none from offset {offset}."
    shown = "" if len(results) == count else f" ({offset + 1}-{offset + len(results)} shown)"
    lines = [f"{total}, newest first{shown}:", *(request_line(request) for request in results)]
    if offset + len(results) < count:
        lines.append(f"More from offset {offset + len(results)}.")
    return "\n".join(lines)


def _approvals(agent: Agent, params: dict[str, Any]) -> CallToolResult:
    body = approval_requests_response(agent, params)
    return json_result(body, text=requests_text(body, params))


APPROVALS = Operation(ApprovalListQuerySerializer, _approvals)


async def approval_requests(
    ctx: Ctx,
    state: Annotated[
        Literal["", "pending", "approved", "rejected", "expired", "revoked", "lapsed"],
        Field(description="Only requests in this state; empty: every state."),
        SkipValidation,
    ] = "",
    limit: Annotated[int, Field(ge=1, le=200, description="How many requests, at most."), SkipValidation] = 50,
    offset: Annotated[
        int, Field(ge=0, le=1_000_000, description="How many of the newest to skip (the next page)."), SkipValidation
    ] = 0,
) -> CallToolResult:
    """This agent's approval requests, newest first: what waits on a reviewer, what was approved,
    rejected, revoked, expired or lapsed (the content changed), with the reviewer's comment. A
    reference withheld for want of an approval names its request: follow it here. Returns a line
    per request (structuredContent: `count` over all pages and `results`, as GET /api/v1/approvals);
    never the content or its diff."""
    return await answer(ctx, APPROVALS)


class Tool(NamedTuple):
    fn: Callable[..., Awaitable[CallToolResult]]  # what the SDK publishes (its name too) and calls
    operation: Operation
    hints: ToolAnnotations


TOOLS = {
    tool.fn.__name__: tool
    for tool in (
        Tool(rag_search, SEARCH, READ_ONLY),
        Tool(explain_search, EXPLAIN, READ_ONLY),
        Tool(search_conversation, CONVERSATION, READ_ONLY),
        Tool(list_references, LIST, READ_ONLY),
        Tool(select_references, SELECT, RECORDS),
        Tool(read_reference_file, READ, READ_ONLY),
        Tool(agent_instructions, INSTRUCTIONS, READ_ONLY),
        Tool(enrich, ENRICH, RECORDS),
        Tool(explain_enrichment, EXPLAIN_ENRICHMENT, READ_ONLY),
        Tool(approval_requests, APPROVALS, READ_ONLY),
        Tool(enrich_conversation, ENRICH_CONVERSATION, RECORDS),
        Tool(store_memory, STORE_MEMORY, RECORDS),
    )
}
