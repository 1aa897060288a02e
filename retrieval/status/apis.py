"""GET /api/v1/status and POST /api/v1/status/reset.

Status: the embeddings to anyone signed in or holding a token (which search modes work);
everything retrieval.status.selectors reports to people with a role; its own catalogs' indexes and
index runs to a curator agent.
Reset: curators only (a person in the curator group, or a curator agent's token),
audited (retrieval.runtime)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.rest.schema import errors
from retrieval.runtime import runtime_reset
from retrieval.status.selectors import status_for
from retrieval.status.serializers import EmbeddingsStatusSerializer, ResetRecordSerializer, StatusSerializer


class StatusApi(APIView):
    """Whether vector search is available, and with which model; for
    people with a role also the database and its extensions, the task queue and failed
    tasks, the schedules and the last scan, every catalog's index, index sizes and disk
    use; for a curator agent the process and its own catalogs' indexes and index runs."""

    @extend_schema(responses={200: StatusSerializer}, operation_id="status")
    def get(self, request: Request) -> Response:
        return Response(StatusSerializer(status_for(request.user)).data)


class StatusResetApi(APIView):
    """The reset: reload the embedding model and drop the cached detection
    indexes (tag matchers, source profiles) here at once and in every other process
    within LECTERN_RUNTIME_POLL_SECONDS; curators only, audited as runtime.reset."""

    class OutputSerializer(serializers.Serializer[dict[str, Any]]):
        reset = ResetRecordSerializer()
        indexes_dropped = serializers.IntegerField(help_text="Detection indexes this process dropped.")
        embeddings = EmbeddingsStatusSerializer(help_text="The model as it loaded again in this process.")
        others_within_s = serializers.IntegerField(
            help_text="Other processes apply the reset within this many seconds; 0: only when they restart.")

    @extend_schema(request=None, operation_id="reset_status", responses={200: OutputSerializer, **errors({
        403: "`forbidden`: only curators (people in the curator group, curator agents) reset."})})
    def post(self, request: Request) -> Response:
        from django.conf import settings

        outcome = runtime_reset(by=request.user)
        return Response(self.OutputSerializer({
            "reset": outcome.reset.__dict__, "indexes_dropped": outcome.indexes_dropped,
            "embeddings": outcome.embeddings, "others_within_s": settings.LECTERN_RUNTIME_POLL_SECONDS}).data)
