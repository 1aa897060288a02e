"""Agent-facing enrichment API: enrich, listReferences, selectReferences,
traces, reading a selected reference's files, and the startup instructions.

Responses are rendered through the output serializers, so the published schema is
the code's: a trace's steps (one shape per pass) are the one part stored as JSON and
returned as stored; tests/test_api_contract.py checks them against the schema."""

from __future__ import annotations

from typing import Any, cast
from uuid import UUID

from django.conf import settings
from django.http import Http404
from drf_spectacular.utils import (
    OpenApiExample,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.apis import gate_state_field, request_id_field
from catalog.auth import RequestUser, is_curator, request_user
from catalog.models import Agent, ReferenceSource
from catalog.rest.fields import (
    StrictBooleanField,
    StrictCharField,
    StrictFloatField,
    StrictIntegerField,
    StrictRegexField,
    StrictSlugField,
)
from catalog.rest.schema import errors
from retrieval.conversation.injection import TOKENIZERS, enrich_conversation
from retrieval.conversation.messages import messages_of
from retrieval.conversation.serializers import MessageSerializer, messages_field, user_id_field
from retrieval.enrichment.caller import Caller
from retrieval.enrichment.formatting import CONTENT_KINDS
from retrieval.enrichment.instructions import agent_instructions
from retrieval.enrichment.pipeline import SURFACES, enrich
from retrieval.enrichment.references import list_references, read_reference_file, select_references
from retrieval.models import Trace

VIAS = ["mention", "tag", "semantic", "path", "link"]
INVALID = "`invalid_input`: a field is missing or out of range; `details.fields` says which."
NO_CATALOG = "`not_found`: a catalog in `catalogs` does not exist for this caller."


# A reference id as callers write it: `id` or `catalog/id`, with or without `@`.
REFERENCE_ID = r"^@?([A-Za-z0-9_-]+/)?[A-Za-z0-9_-]+$"


def _id_field() -> StrictRegexField:
    return StrictRegexField(REFERENCE_ID, max_length=200)


def _catalogs_field() -> serializers.ListField:
    return serializers.ListField(child=StrictSlugField(max_length=64), max_length=50, required=False,
                                 help_text="Restrict to these catalogs (default: all the caller may see).")


# --- shapes shared by several responses --------------------------------------------------


class LinkParentSerializer(serializers.Serializer[dict[str, Any]]):
    source_id = serializers.CharField(help_text="The reference that points at this one.")
    via = serializers.ChoiceField(choices=["mention", "link"])
    evidence = serializers.CharField(help_text="The `@id` mention or the markdown link target.")


class ReasonSerializer(serializers.Serializer[dict[str, Any]]):
    via = serializers.ChoiceField(choices=VIAS)
    matched = serializers.ListField(child=serializers.CharField(), help_text="What this pass matched.")


class HintSerializer(serializers.Serializer[dict[str, Any]]):
    source_id = serializers.CharField()
    catalog = serializers.CharField()
    # Not required: traces stored before it existed lack it.
    ref = serializers.CharField(
        required=False,
        help_text="The id the injected text names it by, to write as `@ref` or pass to selectReferences: "
                  "`source_id`, or `catalog/source_id` when the caller may read several catalogs.")
    name = serializers.CharField()
    matched = serializers.ListField(child=serializers.CharField(),
                                    help_text="What matched: `@id`, tags, the path read, or the mentioning ids.")
    via = serializers.ChoiceField(choices=VIAS, help_text="The most specific pass that found it: "
                                                          "mention, path, link, tag, then semantic.")
    reasons = ReasonSerializer(many=True, required=False,  # traces stored before it existed lack it
                               help_text="Every pass that found it, most specific first (the first is `via`).")
    score = serializers.FloatField(allow_null=True, help_text="Cosine similarity to the text, when computed.")
    injected = serializers.ChoiceField(
        choices=["expand", "pin", "hint", "cut", "none", "context"],
        help_text="expand: full instructions; pin: the file read; hint: a line in the hint block; "
                  "cut: beyond max_hints; none: withheld; context: a passage added to a conversation's "
                  "[context: ...].")
    withheld = serializers.BooleanField()
    reason = serializers.CharField(help_text="Why withheld or cut; empty otherwise.")
    request_id = request_id_field(required=False)  # traces stored before it existed lack it
    parents = LinkParentSerializer(many=True, required=False, help_text="For `via: link`: who points at it.")


class PinnedReferenceSerializer(serializers.Serializer[dict[str, Any]]):
    source_id = serializers.CharField()
    catalog = serializers.CharField()
    name = serializers.CharField()
    path = serializers.CharField(help_text="The file read, inside the reference.")
    withheld = serializers.BooleanField()
    reason = serializers.CharField()
    request_id = request_id_field()
    # named like Field.context, which the stubs declare (DRF's metaclass takes declared
    # fields off the class, so there is no clash at run time)
    context = serializers.CharField(allow_null=True,  # type: ignore[assignment]
                                    help_text="The block appended to the text (root markdown files only).")


# --- the operations ------------------------------------------------------------------------


class EnrichApi(APIView):
    """Run the detection passes over a prompt or a tool result and return it enriched."""

    class InputSerializer(serializers.Serializer[None]):
        text = StrictCharField(max_length=settings.LECTERN_MAX_ENRICH_CHARS, trim_whitespace=False)
        surface = serializers.ChoiceField(choices=SURFACES)
        catalogs = _catalogs_field()
        selected = serializers.ListField(child=_id_field(), max_length=500, required=False,
                                         help_text="References already selected in this conversation: not "
                                                   "hinted. Those the server recorded for this agent "
                                                   "(selectReferences, @id expansions) count without being "
                                                   "named here.")
        paths = serializers.ListField(child=StrictCharField(max_length=1024), max_length=100, required=False,
                                      help_text="Files the tool read (for path containment).")

    class OutputSerializer(serializers.Serializer[dict[str, Any]]):
        text = serializers.CharField(help_text="The text with earlier injections stripped and the new blocks added.")
        hints = HintSerializer(many=True)
        pinned_reference = PinnedReferenceSerializer(allow_null=True)
        trace_id = serializers.UUIDField()
        took_ms = serializers.FloatField()
        degraded = serializers.CharField(allow_null=True)

    @extend_schema(
        request=InputSerializer, operation_id="enrich",
        responses={200: OutputSerializer, **errors({400: INVALID, 404: NO_CATALOG})},
        examples=[OpenApiExample("prompt", request_only=True,
                                 value={"text": "Our circuit breaker trips; see @caching", "surface": "prompt"})],
    )
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(enrich_response(request_user(request), data.validated_data))


def enrich_response(user: RequestUser, params: dict[str, Any]) -> dict[str, Any]:
    """The enrich endpoint's body for validated `params` (REST and the MCP tool)."""
    caller = Caller.of(user, params.get("catalogs"))
    result = enrich(caller=caller, text=params["text"], surface=params["surface"],
                               selected=params.get("selected"), paths=params.get("paths"))
    return EnrichApi.OutputSerializer({
        "text": result.text, "hints": result.hints, "pinned_reference": result.pinned_reference,
        "trace_id": result.trace.id, "took_ms": result.trace.took_ms, "degraded": result.degraded}).data


# --- conversations ----------------------------------------------------------------


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


class EnrichConversationApi(APIView):
    """A whole conversation, returned with facts and context postfixed onto its newest user
    message; what Lectern added to earlier turns is removed exactly."""

    class InputSerializer(serializers.Serializer[None]):
        messages = messages_field(help_text="The conversation, oldest first, as the client holds it (what it "
                                            "received from an earlier call included).")
        user_id = user_id_field()
        memory = StrictBooleanField(default=True, help_text="False: no facts and no memory for this request.")
        catalogs = _catalogs_field()
        options = ConversationOptionsSerializer(required=False)

    class OutputSerializer(serializers.Serializer[dict[str, Any]]):
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

    @extend_schema(
        request=InputSerializer, operation_id="enrich_conversation",
        responses={200: OutputSerializer, **errors({400: INVALID, 404: NO_CATALOG})},
        examples=[OpenApiExample("a conversation", request_only=True, value={
            "user_id": "steve", "messages": [{"role": "system", "content": "You are a helpful assistant."},
                                             {"role": "user", "content": "What did I tell you about my project?"}]})],
    )
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(enrich_conversation_response(request_user(request), data.validated_data))


def enrich_conversation_response(user: RequestUser, params: dict[str, Any]) -> dict[str, Any]:
    """The enrich/conversation body for validated `params` (REST and the MCP tool)."""
    options = params.get("options") or {}
    result = enrich_conversation(
        caller=Caller.of(user, params.get("catalogs")), messages=messages_of(params["messages"]),
        user_id=params["user_id"], memory=params.get("memory", True),
        threshold=options.get("rag_relevance_threshold"), max_results=options.get("rag_max_results"),
        tokenizer=options.get("tokenizer", "model"))
    return EnrichConversationApi.OutputSerializer({
        "messages": [{"role": m.role, "content": m.content} for m in result.messages],
        "injected_into": result.injected_into, "facts": result.facts,
        "context": [item.as_dict() for item in result.context], "withheld": result.withheld,
        "tokens": result.tokens, "tokenizer": result.tokenizer, "trace_id": result.trace.id,
        "took_ms": result.trace.took_ms, "degraded": result.degraded}).data


class ReferenceSerializer(serializers.Serializer[dict[str, Any]]):
    source_id = serializers.CharField()
    catalog = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    mode = serializers.ChoiceField(choices=ReferenceSource.Mode.values)
    tags = serializers.ListField(child=serializers.CharField())
    requires_approval = serializers.BooleanField()
    index_status = serializers.ChoiceField(choices=ReferenceSource.Status.values)
    withheld = serializers.BooleanField()
    reason = serializers.CharField(help_text="Why withheld; empty otherwise.")
    request_id = request_id_field(help_text="The approval request of this agent for the reference as it is now, "
                                            "when withheld and one exists (listing raises none).")


class ReferenceListApi(APIView):
    """listReferences: the references this caller may know about, by tag or text."""

    class QuerySerializer(serializers.Serializer[None]):
        # A query parameter given empty is read as absent (DRF's rule for form-style
        # input), so the schema admits "" for each.
        tag = serializers.CharField(max_length=100, required=False, default="", allow_blank=True,
                                    help_text="Only references with this tag.")
        q = serializers.CharField(max_length=200, required=False, default="", allow_blank=True,
                                  help_text="Only references whose id, name, description or tags contain it.")
        catalog = serializers.RegexField(r"^[-a-zA-Z0-9_]+$", max_length=64, required=False, allow_blank=True,
                                         help_text="Only this catalog (default: all the caller may see).")

    class OutputSerializer(serializers.Serializer[dict[str, Any]]):
        references = ReferenceSerializer(many=True)
        count = serializers.IntegerField(min_value=0)

    @extend_schema(parameters=[QuerySerializer], operation_id="list_references",
                   responses={200: OutputSerializer, **errors({
                       400: INVALID, 404: "`not_found`: no such catalog for this caller."})})
    def get(self, request: Request) -> Response:
        query = self.QuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return Response(references_response(request_user(request), query.validated_data))


def references_response(user: RequestUser, params: dict[str, Any]) -> dict[str, Any]:
    caller = Caller.of(user, [params["catalog"]] if params.get("catalog") else None)
    references = list_references(caller=caller, tag=params["tag"], text=params["q"])
    return ReferenceListApi.OutputSerializer({"references": references, "count": len(references)}).data


class SelectedReferenceSerializer(serializers.Serializer[dict[str, Any]]):
    source_id = serializers.CharField()
    catalog = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    files = serializers.ListField(child=serializers.CharField(), help_text="Paths readable with the file API.")
    contents = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text=f"Files per conventional sub-folder ({', '.join(sorted(CONTENT_KINDS))}).")
    instructions = serializers.CharField(help_text="The expansion block, as enrichment would inject it.")


class WithheldReferenceSerializer(serializers.Serializer[dict[str, Any]]):
    source_id = serializers.CharField()
    catalog = serializers.CharField()
    name = serializers.CharField()
    reason = serializers.CharField()
    state = gate_state_field()
    request_id = request_id_field()


class ReferenceSelectApi(APIView):
    """selectReferences: authorise references by id or tag and return what may be read."""

    class InputSerializer(serializers.Serializer[None]):
        ids = serializers.ListField(child=_id_field(), max_length=100, required=False, default=list,
                                    help_text="`id` or `catalog/id`, with or without `@`.")
        tags = serializers.ListField(child=StrictCharField(max_length=100), max_length=50, required=False,
                                     default=list)
        catalogs = _catalogs_field()

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            if not attrs["ids"] and not attrs["tags"]:
                raise serializers.ValidationError("give at least one id or tag")
            return attrs

    class OutputSerializer(serializers.Serializer[dict[str, Any]]):
        selected = SelectedReferenceSerializer(many=True)
        withheld = WithheldReferenceSerializer(many=True)

    @extend_schema(
        request=InputSerializer, operation_id="select_references",
        responses={200: OutputSerializer, **errors({
            400: f"{INVALID} `unknown_reference`: ids nobody has, ambiguous ids (write `catalog/id`) or tags nobody "
                 "carries (`details` lists them); nothing is selected.",
            404: NO_CATALOG})},
        examples=[OpenApiExample("by id", request_only=True, value={"ids": ["retry-backoff"]})],
    )
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        params = data.validated_data
        caller = Caller.of(request_user(request), params.get("catalogs"))
        selection = select_references(caller=caller, ids=params["ids"], tags=params["tags"])
        return Response(self.OutputSerializer(selection).data)


class ReferenceFileApi(APIView):
    """One file of a reference the caller has selected (or has by profile): any file
    `files` lists, indexed text or not."""

    class QuerySerializer(serializers.Serializer[None]):
        path = serializers.CharField(max_length=1024, help_text="The file's path, as `files` lists it.")

    class OutputSerializer(serializers.Serializer[dict[str, Any]]):
        source_id = serializers.CharField()
        catalog = serializers.CharField()
        path = serializers.CharField()
        title = serializers.CharField(help_text="An indexed document's title; the file name otherwise.")
        sha256 = serializers.CharField(help_text="Of the content (UTF-8 text, or the bytes).")
        encoding = serializers.ChoiceField(
            choices=["utf-8", "base64"],
            help_text="utf-8: `text` is the file's text; base64: the file is not UTF-8 text (an image, an archive) "
                      "and `text` holds its bytes in base64.")
        text = serializers.CharField(allow_blank=True)

    @extend_schema(parameters=[QuerySerializer], operation_id="read_reference_file",
                   responses={200: OutputSerializer, **errors({
                       400: INVALID,
                       403: "`not_selected`: select the reference first; `withheld`: it needs an approval "
                            "this agent does not have.",
                       404: "`not_found`: no such catalog, reference or file for this caller.",
                       409: "`reference_changed`: the reference's files changed on disk since it was indexed; "
                            "readable again once reindexed (the scheduled scan queues it)."})})
    def get(self, request: Request, catalog: str, source_id: str) -> Response:
        query = self.QuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return Response(reference_file_response(request_user(request), catalog=catalog, source_id=source_id,
                                                path=query.validated_data["path"]))


def reference_file_response(user: RequestUser, *, catalog: str, source_id: str, path: str) -> dict[str, Any]:
    """The file endpoint's body (REST and the MCP tool)."""
    caller = Caller.of(user, [catalog])
    found = read_reference_file(caller=caller, catalog=catalog, source_id=source_id, path=path)
    return ReferenceFileApi.OutputSerializer({"source_id": source_id, "catalog": catalog, **found.__dict__}).data


# --- traces: one step per pass, each with its own shape ----------------------------------


def _step(name: str, doc: str, **fields: serializers.Field[Any, Any, Any, Any],
          ) -> type[serializers.Serializer[dict[str, Any]]]:
    """The serializer of one pass's trace step, built by a call because its
    discriminator, `pass`, is a Python keyword."""
    attrs = {"__doc__": doc, "pass": serializers.ChoiceField(choices=[name]),
             "ms": serializers.FloatField(help_text="Time the pass took."), **fields}
    step = serializers.SerializerMetaclass(f"{name.title()}StepSerializer", (serializers.Serializer,), attrs)
    return cast(type[serializers.Serializer[dict[str, Any]]], step)  # a class made by a call is typed `type`


class DiscoveredSerializer(serializers.Serializer[dict[str, Any]]):
    source_id = serializers.CharField()
    catalog = serializers.CharField()
    depth = serializers.IntegerField(min_value=1)
    parents = LinkParentSerializer(many=True)


class DecisionSerializer(serializers.Serializer[dict[str, Any]]):
    source_id = serializers.CharField()
    catalog = serializers.CharField()
    allowed = serializers.BooleanField()
    state = gate_state_field()
    reason = serializers.CharField()
    request_id = request_id_field(required=False)  # traces stored before it existed lack it


def _scores() -> serializers.DictField:
    return serializers.DictField(child=serializers.FloatField(), required=False,
                                 help_text="`catalog/source` -> cosine similarity.")


class MemoryStepHitSerializer(serializers.Serializer[dict[str, Any]]):
    id = serializers.IntegerField()
    content = serializers.CharField()
    stored_at = serializers.CharField(help_text="ISO 8601, UTC.")
    lexical = serializers.FloatField()
    similarity = serializers.FloatField(allow_null=True)
    recency = serializers.FloatField()
    score = serializers.FloatField()
    kept = serializers.BooleanField(help_text="At least the relevance threshold.")


class PassageStepHitSerializer(ContextItemSerializer):
    kept = serializers.BooleanField(help_text="At least the relevance threshold.")


# typed as PolymorphicProxySerializer takes them
TRACE_STEPS: dict[str, serializers.Serializer[Any] | type[serializers.Serializer[Any]]] = {
    "mention": _step("mention", "Each `@id` found.", candidates=HintSerializer(many=True)),
    "tag": _step("tag", "Tags found in the text.",
                 candidates=serializers.IntegerField(help_text="How many sources the tags proposed."),
                 tags=serializers.DictField(child=serializers.ListField(child=serializers.CharField()),
                                            help_text="Tag -> the `catalog/source` ids carrying it."),
                 at=serializers.DictField(
                     child=serializers.ListField(child=serializers.IntegerField(min_value=0), min_length=2,
                                                 max_length=2),
                     required=False,  # traces stored before it existed lack it
                     help_text="Tag -> [start, end): where it first occurs in the text detection read (the "
                               "text as received, Lectern's earlier injections removed), in characters.")),
    "path": _step("path", "Path containment (tool results, or `paths` given).",
                  paths=serializers.ListField(child=serializers.CharField(), help_text="The first 20 looked at."),
                  candidates=HintSerializer(many=True)),
    "semantic": _step(
        "semantic", "Matching by meaning; only `skipped` when it could not run.",
        skipped=serializers.CharField(required=False, help_text="Why the pass did not run."),
        model=serializers.CharField(required=False), threshold=serializers.FloatField(required=False),
        floor=serializers.FloatField(required=False), margin=serializers.FloatField(required=False),
        embedded_tokens=serializers.IntegerField(required=False),
        embedded_text=serializers.ChoiceField(choices=["as written", "content words"], required=False),
        embed_ms=serializers.FloatField(required=False), candidates=_scores(), nearest_below_threshold=_scores()),
    "link": _step("link", "References linked from the expanded or pinned ones.",
                  discovered=DiscoveredSerializer(many=True), candidates=HintSerializer(many=True)),
    "rank": _step("rank", "The cut to max_hints.", max_hints=serializers.IntegerField(),
                  kept=serializers.ListField(child=serializers.CharField()),
                  cut=serializers.IntegerField(help_text="Tag and semantic candidates not kept.")),
    "governance": _step("governance", "The gate's answer for each reference surfaced.",
                        decisions=DecisionSerializer(many=True)),
    "format": _step("format", "The blocks appended.", blocks=serializers.IntegerField()),
    # a conversation's passes (enrich/conversation)
    "strip": _step("strip", "Earlier injections removed from the messages.", messages=serializers.IntegerField(),
                   restored=serializers.ListField(child=serializers.IntegerField(),
                                                  help_text="The messages that carried one."),
                   freed_tokens=serializers.IntegerField()),
    "memory": _step("memory", "The end user's facts (their keys) and the memories searched.",
                    facts=serializers.ListField(child=serializers.CharField()),
                    hits=MemoryStepHitSerializer(many=True,
                                                 help_text="Each memory found: its scores, and kept or not.")),
    "passages": _step("passages", "The catalogs' passages by meaning, through the approval gate.",
                      catalogs=serializers.ListField(child=serializers.CharField()),
                      hits=PassageStepHitSerializer(many=True, help_text="Each passage found, and kept or not."),
                      withheld=HintSerializer(many=True)),
    "conversation": _step("conversation", "What was added, where, and the tokens.",
                          injected_into=serializers.IntegerField(allow_null=True),
                          end_user=serializers.CharField(required=False, help_text="The end user's keyed hash."),
                          facts=serializers.IntegerField(),
                          context=ContextItemSerializer(many=True),
                          tokens=TokensSerializer()),
}


@extend_schema_field(PolymorphicProxySerializer(component_name="TraceStep", serializers=TRACE_STEPS,
                                                resource_type_field_name="pass", many=True))
class TraceStepsField(serializers.JSONField):
    """The steps as stored (see the module docstring)."""


class BlankAsNullField(serializers.CharField):
    """A trace stores "" when nothing degraded; the API says null, as enrich does (the
    view used to set None on the model instance, a value its field cannot hold)."""

    # DRF renders whatever this returns; the stubs narrow CharField's to str
    def to_representation(self, value: object) -> str | None:  # type: ignore[override]
        return str(value) or None


class TraceApi(APIView):
    """One enrichment trace: an agent sees only its own, a person theirs, a curator every one."""

    class OutputSerializer(serializers.Serializer[Trace]):
        id = serializers.UUIDField()
        caller = serializers.CharField(help_text="The agent's or user's name at the time of the call.")
        surface = serializers.ChoiceField(choices=Trace.Surface.values)
        text = serializers.CharField(
            allow_null=True, help_text="The text as received; null when not kept (LECTERN_TRACE_STORE_TEXT off).")
        steps = TraceStepsField()
        hints = HintSerializer(many=True)
        degraded = BlankAsNullField(allow_null=True)
        took_ms = serializers.FloatField()
        created_at = serializers.DateTimeField()

    @extend_schema(operation_id="get_trace", responses={200: OutputSerializer, **errors({
        404: "`not_found`: no such trace, or not this caller's."})})
    def get(self, request: Request, trace_id: UUID) -> Response:
        traces = Trace.objects.all()
        user = request_user(request)
        if isinstance(user, Agent):
            traces = traces.filter(agent=user)
        elif not is_curator(user):  # a role, not staff status
            traces = traces.filter(caller=user.get_username(), agent=None)
        trace = traces.filter(pk=trace_id).first()
        if trace is None:
            raise Http404(f"No trace {trace_id}.")
        return Response(self.OutputSerializer(trace).data)


class InstructionSourceSerializer(serializers.Serializer[dict[str, Any]]):
    source_id = serializers.CharField()
    catalog = serializers.CharField()
    name = serializers.CharField()
    via = serializers.ChoiceField(choices=["auto", "preselected", "link"])
    tokens = serializers.IntegerField(min_value=0, help_text="Tokens of its section; 0 unless included whole.")
    included = serializers.ChoiceField(
        choices=["content", "listed", "omitted", "withheld"],
        help_text="content: loaded whole; listed: named with its files, or only by name when the budget ran "
                  "short; omitted: no room even for that (the text names it, or counts it, on one line).")
    reason = serializers.CharField(required=False, help_text="Why listed, omitted or withheld.")
    request_id = request_id_field(required=False, help_text="For `included: withheld`: the approval request "
                                                            "to follow (GET /api/v1/approvals).")
    parents = LinkParentSerializer(many=True, required=False, help_text="For `via: link`.")


class InstructionsApi(APIView):
    """The agent's startup instructions: auto references, preselected ones resolved
    transitively, and the rag_search hint for rag agents."""

    class OutputSerializer(serializers.Serializer[dict[str, Any]]):
        text = serializers.CharField(help_text="The startup block.")
        strategy = serializers.ChoiceField(choices=Agent.Strategy.values)
        token_budget = serializers.IntegerField()
        tokens = serializers.IntegerField(help_text="Tokens of `text`; never more than `token_budget`.")
        over_budget = serializers.BooleanField(help_text="Always false: kept for clients that read it.")
        sources = InstructionSourceSerializer(many=True)
        rag_hint = serializers.CharField(allow_null=True, help_text="For rag agents: how to call rag_search.")

    @extend_schema(responses={200: OutputSerializer}, operation_id="agent_instructions")
    def get(self, request: Request) -> Response:
        return Response(instructions_response(request_user(request)))


def instructions_response(user: RequestUser) -> dict[str, Any]:
    """The instructions endpoint's body (REST and the MCP tool)."""
    instructions = agent_instructions(caller=Caller.of(user))
    return InstructionsApi.OutputSerializer(instructions).data
