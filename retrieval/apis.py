"""Agent-facing search API (DRF): one view per operation."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.embedder import embedder_status
from catalog.models import Catalog
from config.api_errors import DomainError
from config.fields import StrictCharField, StrictSlugField
from retrieval.auth import RequestUser, get_catalog_for_caller, request_user, visible_catalogs
from retrieval.selectors import FUSIONS, MODES, NORMALISATIONS, SearchOptions, SearchUnavailable, chunk_search


class SearchApi(APIView):
    """rag_search: ranked chunks of one catalog for a query."""

    @extend_schema_serializer(component_name="Search")
    class InputSerializer(serializers.Serializer[None]):
        catalog = StrictSlugField(max_length=64)
        query = StrictCharField(max_length=settings.LECTERN_MAX_QUERY_CHARS, trim_whitespace=True)
        top_k = serializers.IntegerField(min_value=1, max_value=1000, default=10)
        mode = serializers.ChoiceField(choices=MODES, default="hybrid")
        fusion = serializers.ChoiceField(choices=FUSIONS, default="rrf")
        normalization = serializers.ChoiceField(choices=NORMALISATIONS, default="minmax")
        weights = serializers.DictField(child=serializers.FloatField(min_value=0, max_value=100), required=False)
        dedup = serializers.BooleanField(default=False)

        def validate_weights(self, value: dict[str, float]) -> dict[str, float]:
            unknown = set(value) - {"bm25", "vector"}
            if unknown:
                raise serializers.ValidationError(f"unknown components: {sorted(unknown)}; use bm25 and vector")
            if not any(value.values()):
                raise serializers.ValidationError("at least one weight must be positive")
            return value

    class HitSerializer(serializers.Serializer[dict[str, Any]]):  # a Hit's fields and its rank
        rank = serializers.IntegerField()
        chunk_id = serializers.CharField(source="key")
        document_id = serializers.CharField()
        title = serializers.CharField()
        source = serializers.CharField()  # type: ignore[assignment]  # the stubs' Field.source: see catalog.apis
        byte_offset = serializers.IntegerField()
        content = serializers.CharField()
        score = serializers.FloatField()
        scores = serializers.DictField(child=serializers.FloatField(allow_null=True))
        ranks = serializers.DictField(child=serializers.IntegerField(allow_null=True))

    # Distinct component names: both views' serializers would otherwise be "Output",
    # and the schema would describe search results as catalogs.
    @extend_schema_serializer(component_name="SearchResponse")
    class OutputSerializer(serializers.Serializer[dict[str, Any]]):  # search_response()
        results = serializers.ListField(child=serializers.DictField())
        mode = serializers.CharField()
        took_ms = serializers.FloatField()
        degraded = serializers.CharField(allow_null=True)

    @extend_schema(request=InputSerializer, responses=OutputSerializer, operation_id="rag_search")
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(search_response(request_user(request), data.validated_data))


def search_response(caller: RequestUser, params: dict[str, Any]) -> dict[str, Any]:
    """The search endpoint's body for validated `params` (REST and the MCP tool)."""
    params = dict(params)
    catalog = get_catalog_for_caller(caller, params.pop("catalog"))
    query = params.pop("query")
    try:
        result = chunk_search(catalog=catalog, query=query, options=SearchOptions(**params))
    except SearchUnavailable as exc:
        raise DomainError(f"vector search is unavailable: {exc}", code="embeddings_unavailable",
                          status_code=409) from None
    hits = [SearchApi.HitSerializer({**hit.__dict__, "rank": i}).data for i, hit in enumerate(result.hits, start=1)]
    return {"results": hits, "mode": result.mode, "took_ms": round(result.took_ms, 2), "degraded": result.degraded}


class CatalogListApi(APIView):
    """The catalogs this caller may search, with their index statistics."""

    @extend_schema_serializer(component_name="Catalog")
    class OutputSerializer(serializers.Serializer[Catalog]):  # annotated with source_count
        slug = serializers.SlugField()
        name = serializers.CharField()
        description = serializers.CharField()
        chunk_count = serializers.IntegerField()
        source_count = serializers.IntegerField()

    @extend_schema(responses=OutputSerializer(many=True), operation_id="list_catalogs")
    def get(self, request: Request) -> Response:
        from django.db.models import Count

        catalogs = visible_catalogs(request_user(request)).annotate(source_count=Count("sources")).order_by("slug")
        # many=True takes the queryset, which the stubs do not model for a plain Serializer
        return Response(self.OutputSerializer(catalogs, many=True).data)  # type: ignore[arg-type]


class StatusApi(APIView):
    """Whether vector search is available, and with which model (seed 004's status)."""

    @extend_schema(responses={200: dict}, operation_id="status")
    def get(self, request: Request) -> Response:
        return Response({"embeddings": embedder_status()})
