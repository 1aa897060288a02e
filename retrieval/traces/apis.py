"""The trace API (DRF): one enrichment trace, pass by pass (its shapes are
retrieval.traces.serializers')."""

from __future__ import annotations

from uuid import UUID

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.auth import request_user
from catalog.rest.schema import errors
from retrieval.traces.selectors import trace_for_caller
from retrieval.traces.serializers import TraceOutputSerializer


class TraceApi(APIView):
    """One enrichment trace: an agent sees only its own, a person theirs, a curator every one."""

    @extend_schema(operation_id="get_trace", responses={200: TraceOutputSerializer, **errors({
        404: "`not_found`: no such trace, or not this caller's."})})
    def get(self, request: Request, trace_id: UUID) -> Response:
        return Response(TraceOutputSerializer(trace_for_caller(request_user(request), trace_id)).data)
