"""GET /api/v1/health: whether this process can serve, for load balancers and monitors."""

from __future__ import annotations

import time
from typing import Any

from django.db import DatabaseError, connection
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.embedder import embedder_status
from config.api_errors import RETRY_AFTER_S, database_unreachable
from retrieval.status.serializers import EmbeddingsStatusSerializer


def database_health() -> dict[str, Any]:
    """{"up": True, "ms": round trip} when the database answers, {"up": False} when it
    cannot be reached (any other database error is a bug, and raised)."""
    started = time.perf_counter()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        if not database_unreachable(exc):
            raise
        return {"up": False}
    return {"up": True, "ms": round((time.perf_counter() - started) * 1000, 2)}


class DatabaseHealthSerializer(serializers.Serializer[dict[str, Any]]):  # database_health()
    up = serializers.BooleanField()
    ms = serializers.FloatField(required=False, help_text="Round trip of one query; absent while down.")


class HealthApi(APIView):
    """200 when the database answers, 503 (with Retry-After) when it cannot be reached;
    the embedder's status either way (lexical-only search is degraded, not down). No
    authentication: it reveals neither data nor configuration."""

    authentication_classes = []
    permission_classes = []

    class OutputSerializer(serializers.Serializer[dict[str, Any]]):
        status = serializers.ChoiceField(choices=["ok", "unavailable"])
        database = DatabaseHealthSerializer()
        embeddings = EmbeddingsStatusSerializer()

    @extend_schema(
        operation_id="health", auth=[],
        responses={200: OutputSerializer,
                   503: OpenApiResponse(OutputSerializer, description="The database cannot be reached.")},
        parameters=[OpenApiParameter("Retry-After", int, OpenApiParameter.HEADER, response=[503],
                                     description="Seconds to wait before asking again.")],
    )
    def get(self, request: Request) -> Response:
        database = database_health()
        body = self.OutputSerializer({"status": "ok" if database["up"] else "unavailable", "database": database,
                                      "embeddings": embedder_status()}).data
        if database["up"]:
            return Response(body)
        return Response(body, status=503, headers={"Retry-After": str(RETRY_AFTER_S)})
