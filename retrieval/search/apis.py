"""The search API (DRF): rag_search and the catalogs a caller may search. The shapes and
the bodies are retrieval.search.serializers', which the MCP tools answer with too."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.auth import request_user, visible_catalogs
from catalog.models import Catalog
from catalog.rest.schema import INVALID, errors
from retrieval.search.serializers import SearchInputSerializer, SearchOutputSerializer, search_response


class SearchApi(APIView):
    """rag_search: ranked chunks of one catalog for a query."""

    @extend_schema(
        request=SearchInputSerializer, operation_id="rag_search",
        responses={200: SearchOutputSerializer, **errors({
            400: INVALID,
            404: "`not_found`: no such catalog for this caller.",
            409: "`embeddings_unavailable`: `mode: vector` while no embedding model is loaded.",
        })},
        examples=[OpenApiExample("hybrid", request_only=True,
                                 value={"catalog": "demo", "query": "how should we handle transient failures?",
                                        "top_k": 3})],
    )
    def post(self, request: Request) -> Response:
        data = SearchInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(search_response(request_user(request), data.validated_data))



class CatalogListApi(APIView):
    """The catalogs this caller may search, with their index statistics."""

    @extend_schema_serializer(component_name="Catalog")
    class OutputSerializer(serializers.Serializer[Catalog]):  # annotated with source_count
        slug = serializers.SlugField()
        name = serializers.CharField()
        description = serializers.CharField()
        chunk_count = serializers.IntegerField(min_value=0)
        source_count = serializers.IntegerField(min_value=0)

    @extend_schema(responses={200: OutputSerializer(many=True)}, operation_id="list_catalogs")
    def get(self, request: Request) -> Response:
        from django.db.models import Count

        catalogs = visible_catalogs(request_user(request)).annotate(source_count=Count("sources")).order_by("slug")
        # many=True takes the queryset, which the stubs do not model for a plain Serializer
        return Response(self.OutputSerializer(catalogs, many=True).data)  # type: ignore[arg-type]
