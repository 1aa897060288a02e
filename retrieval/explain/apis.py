"""The explain API (DRF): why a document was or was not among a search's hits, and why a
reference was or was not hinted by enrichment. The shapes and the bodies are
retrieval.explain.serializers'."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.auth import request_user
from catalog.rest.schema import INVALID, errors
from retrieval.explain.serializers import (
    EnrichmentExplainInputSerializer,
    EnrichmentExplainOutputSerializer,
    ExplainInputSerializer,
    ExplainOutputSerializer,
    enrichment_explain_response,
    explain_response,
)


class ExplainApi(APIView):
    """explain_search: where one document stood in a search, stage by stage."""

    @extend_schema(
        request=ExplainInputSerializer, operation_id="explain_search",
        responses={200: ExplainOutputSerializer, **errors({
            400: INVALID,
            404: "`not_found`: no such catalog for this caller (a missing source or document is an answer, "
                 "not an error).",
            409: "`embeddings_unavailable`: `mode: vector` while no embedding model is loaded.",
        })},
        examples=[OpenApiExample("why not", request_only=True,
                                 value={"catalog": "demo", "query": "how should we handle transient failures?",
                                        "source": "handbook", "document": "retries.md", "top_k": 3})],
    )
    def post(self, request: Request) -> Response:
        data = ExplainInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(explain_response(request_user(request), data.validated_data))


class EnrichmentExplainApi(APIView):
    """explain_enrichment: why enrichment of a text did or did not hint a reference, pass by pass."""

    @extend_schema(
        request=EnrichmentExplainInputSerializer, operation_id="explain_enrichment",
        responses={200: EnrichmentExplainOutputSerializer, **errors({
            400: INVALID,
            404: "`not_found`: a catalog in `catalogs` does not exist for this caller (an unknown reference is "
                 "an answer, not an error).",
        })},
        examples=[OpenApiExample("why not hinted", request_only=True,
                                 value={"prompt": "Our calls to the billing service keep timing out",
                                        "reference": "caching"})],
    )
    def post(self, request: Request) -> Response:
        data = EnrichmentExplainInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(enrichment_explain_response(request_user(request), data.validated_data))
