"""The enrichment API (DRF): enrich, listReferences, selectReferences, reading a
selected reference's files, and the startup instructions. The shapes and the bodies are
retrieval.enrichment.serializers', which the MCP tools answer with too."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.auth import request_user
from catalog.rest.schema import INVALID, errors
from retrieval.enrichment.caller import Caller
from retrieval.enrichment.references import select_references
from retrieval.enrichment.serializers import (
    NO_CATALOG,
    EnrichInputSerializer,
    EnrichOutputSerializer,
    InstructionsOutputSerializer,
    ReferenceFileOutputSerializer,
    ReferenceFileQuerySerializer,
    ReferenceListOutputSerializer,
    ReferenceListQuerySerializer,
    ReferenceSelectInputSerializer,
    ReferenceSelectOutputSerializer,
    enrich_response,
    instructions_response,
    reference_file_response,
    references_response,
)


class EnrichApi(APIView):
    """Run the detection passes over a prompt or a tool result and return it enriched."""

    @extend_schema(
        request=EnrichInputSerializer, operation_id="enrich",
        responses={200: EnrichOutputSerializer, **errors({400: INVALID, 404: NO_CATALOG})},
        examples=[OpenApiExample("prompt", request_only=True,
                                 value={"text": "Our circuit breaker trips; see @caching", "surface": "prompt"})],
    )
    def post(self, request: Request) -> Response:
        data = EnrichInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(enrich_response(request_user(request), data.validated_data))


class ReferenceListApi(APIView):
    """listReferences: the references this caller may know about, by tag or text."""

    @extend_schema(parameters=[ReferenceListQuerySerializer], operation_id="list_references",
                   responses={200: ReferenceListOutputSerializer, **errors({
                       400: INVALID, 404: "`not_found`: no such catalog for this caller."})})
    def get(self, request: Request) -> Response:
        query = ReferenceListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return Response(references_response(request_user(request), query.validated_data))


class ReferenceSelectApi(APIView):
    """selectReferences: authorise references by id or tag and return what may be read."""

    @extend_schema(
        request=ReferenceSelectInputSerializer, operation_id="select_references",
        responses={200: ReferenceSelectOutputSerializer, **errors({
            400: f"{INVALID} `unknown_reference`: ids nobody has, ambiguous ids (write `catalog/id`) or tags nobody "
                 "carries (`details` lists them); nothing is selected.",
            404: NO_CATALOG})},
        examples=[OpenApiExample("by id", request_only=True, value={"ids": ["retry-backoff"]})],
    )
    def post(self, request: Request) -> Response:
        data = ReferenceSelectInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        params = data.validated_data
        caller = Caller.of(request_user(request), params.get("catalogs"))
        selection = select_references(caller=caller, ids=params["ids"], tags=params["tags"])
        return Response(ReferenceSelectOutputSerializer(selection).data)


class ReferenceFileApi(APIView):
    """One file of a reference the caller has selected (or has by profile): any file
    `files` lists, indexed text or not."""

    @extend_schema(parameters=[ReferenceFileQuerySerializer], operation_id="read_reference_file",
                   responses={200: ReferenceFileOutputSerializer, **errors({
                       400: INVALID,
                       403: "`not_selected`: select the reference first; `withheld`: it needs an approval "
                            "this agent does not have.",
                       404: "`not_found`: no such catalog, reference or file for this caller.",
                       409: "`reference_changed`: the reference's files changed on disk since it was indexed; "
                            "readable again once reindexed (the scheduled scan queues it)."})})
    def get(self, request: Request, catalog: str, source_id: str) -> Response:
        query = ReferenceFileQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return Response(reference_file_response(request_user(request), catalog=catalog, source_id=source_id,
                                                path=query.validated_data["path"]))


class InstructionsApi(APIView):
    """The agent's startup instructions: auto references, preselected ones resolved
    transitively, and the rag_search hint for rag agents."""

    @extend_schema(responses={200: InstructionsOutputSerializer}, operation_id="agent_instructions")
    def get(self, request: Request) -> Response:
        return Response(instructions_response(request_user(request)))
