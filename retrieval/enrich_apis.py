"""Agent-facing enrichment API (seed 000): enrich, listReferences, selectReferences,
traces, reading a selected reference's files, and the startup instructions (seed 003)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.conf import settings
from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.fields import StrictCharField, StrictRegexField, StrictSlugField
from retrieval import enrichment
from retrieval.auth import RequestUser, request_user
from retrieval.models import Agent, Trace


def _id_field() -> StrictRegexField:
    return StrictRegexField(r"^@?([A-Za-z0-9_-]+/)?[A-Za-z0-9_-]+$", max_length=200)


def _catalogs_field() -> serializers.ListField:
    return serializers.ListField(child=StrictSlugField(max_length=64), max_length=50, required=False,
                                 help_text="Restrict to these catalogs (default: all the caller may see).")


class EnrichApi(APIView):
    """Run the detection passes over a prompt or a tool result and return it enriched."""

    @extend_schema_serializer(component_name="Enrich")
    class InputSerializer(serializers.Serializer[None]):
        text = StrictCharField(max_length=settings.LECTERN_MAX_ENRICH_CHARS, trim_whitespace=False)
        surface = serializers.ChoiceField(choices=enrichment.SURFACES)
        catalogs = _catalogs_field()
        selected = serializers.ListField(child=_id_field(), max_length=500, required=False,
                                         help_text="References already selected in this conversation: not hinted.")
        paths = serializers.ListField(child=StrictCharField(max_length=1024), max_length=100, required=False,
                                      help_text="Files the tool read (for path containment).")

    @extend_schema_serializer(component_name="EnrichResponse")
    class OutputSerializer(serializers.Serializer[dict[str, Any]]):  # enrich_response()
        text = serializers.CharField()
        hints = serializers.ListField(child=serializers.DictField())
        pinned_reference = serializers.DictField(allow_null=True)
        trace_id = serializers.UUIDField()
        took_ms = serializers.FloatField()
        degraded = serializers.CharField(allow_null=True)

    @extend_schema(request=InputSerializer, responses=OutputSerializer, operation_id="enrich")
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(enrich_response(request_user(request), data.validated_data))


def enrich_response(user: RequestUser, params: dict[str, Any]) -> dict[str, Any]:
    """The enrich endpoint's body for validated `params` (REST and the MCP tool)."""
    caller = enrichment.Caller.of(user, params.get("catalogs"))
    result = enrichment.enrich(caller=caller, text=params["text"], surface=params["surface"],
                               selected=params.get("selected"), paths=params.get("paths"))
    return {"text": result.text, "hints": result.hints, "pinned_reference": result.pinned_reference,
            "trace_id": str(result.trace.id), "took_ms": result.trace.took_ms, "degraded": result.degraded}


def references_response(user: RequestUser, params: dict[str, Any]) -> dict[str, Any]:
    caller = enrichment.Caller.of(user, [params["catalog"]] if params.get("catalog") else None)
    references = enrichment.list_references(caller=caller, tag=params["tag"], text=params["q"])
    return {"references": references, "count": len(references)}


class ReferenceListApi(APIView):
    """listReferences: the references this caller may know about, by tag or text."""

    class QuerySerializer(serializers.Serializer[None]):
        tag = serializers.CharField(max_length=100, required=False, default="")
        q = serializers.CharField(max_length=200, required=False, default="")
        catalog = serializers.SlugField(max_length=64, required=False)

    @extend_schema(responses={200: dict}, operation_id="list_references",
                   parameters=[OpenApiParameter("tag", str), OpenApiParameter("q", str),
                               OpenApiParameter("catalog", str)])
    def get(self, request: Request) -> Response:
        query = self.QuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return Response(references_response(request_user(request), query.validated_data))


class ReferenceSelectApi(APIView):
    """selectReferences: authorise references by id or tag and return what may be read."""

    @extend_schema_serializer(component_name="ReferenceSelection")
    class InputSerializer(serializers.Serializer[None]):
        ids = serializers.ListField(child=_id_field(), max_length=100, required=False, default=list)
        tags = serializers.ListField(child=StrictCharField(max_length=100), max_length=50, required=False,
                                     default=list)
        catalogs = _catalogs_field()

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            if not attrs["ids"] and not attrs["tags"]:
                raise serializers.ValidationError("give at least one id or tag")
            return attrs

    @extend_schema(request=InputSerializer, responses={200: dict}, operation_id="select_references")
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        params = data.validated_data
        caller = enrichment.Caller.of(request_user(request), params.get("catalogs"))
        return Response(enrichment.select_references(caller=caller, ids=params["ids"], tags=params["tags"]))


class ReferenceFileApi(APIView):
    """The text of one file of a reference the caller has selected (or has by profile)."""

    @extend_schema(responses={200: dict}, operation_id="read_reference_file",
                   parameters=[OpenApiParameter("path", str, required=True)])
    def get(self, request: Request, catalog: str, source_id: str) -> Response:
        path = request.query_params.get("path", "")
        if not path or len(path) > 1024:
            from config.api_errors import DomainError

            raise DomainError("give the file's path (?path=...)", code="invalid_input")
        caller = enrichment.Caller.of(request_user(request), [catalog])
        document = enrichment.read_reference_file(caller=caller, catalog=catalog, source_id=source_id, path=path)
        return Response({"source_id": source_id, "catalog": catalog, "path": document.path, "title": document.title,
                         "sha256": document.content_sha256, "text": document.text})


class TraceApi(APIView):
    """One enrichment trace; an agent sees only its own."""

    @extend_schema(responses={200: dict}, operation_id="get_trace")
    def get(self, request: Request, trace_id: UUID) -> Response:
        traces = Trace.objects.all()
        user = request_user(request)
        if isinstance(user, Agent):
            traces = traces.filter(agent=user)
        elif not user.is_staff:
            traces = traces.filter(caller=user.get_username(), agent=None)
        trace = traces.filter(pk=trace_id).first()
        if trace is None:
            raise Http404(f"No trace {trace_id}.")
        return Response({"id": str(trace.id), "caller": trace.caller, "surface": trace.surface, "text": trace.text,
                         "steps": trace.steps, "hints": trace.hints, "degraded": trace.degraded or None,
                         "took_ms": trace.took_ms, "created_at": trace.created_at})


class InstructionsApi(APIView):
    """The agent's startup instructions: auto references, preselected ones resolved
    transitively, and the rag_search hint for rag agents."""

    @extend_schema(responses={200: dict}, operation_id="agent_instructions")
    def get(self, request: Request) -> Response:
        return Response(enrichment.agent_instructions(caller=enrichment.Caller.of(request_user(request))))
