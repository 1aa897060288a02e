"""The agent's side of approvals: GET /api/v1/approvals lists the calling agent's
requests and their states (the shapes and the body are approvals.serializers', which
the MCP tool approval_requests answers with too)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.serializers import ApprovalListOutputSerializer, ApprovalListQuerySerializer, approval_requests_response
from catalog.auth import request_user
from catalog.models import Agent
from catalog.rest.schema import errors


class ApprovalListApi(APIView):
    """The calling agent's approval requests, newest first: what it waits on, what was
    approved, rejected, revoked, expired or lapsed. Never the content or its diff."""

    MAX_LIMIT = 200

    @extend_schema(parameters=[ApprovalListQuerySerializer], operation_id="list_approval_requests",
                   responses={200: ApprovalListOutputSerializer, **errors({
                       400: "`invalid_input`: a query parameter is not valid.",
                       403: "`forbidden`: only agents (bearer tokens) have approval requests."})})
    def get(self, request: Request) -> Response:
        query = ApprovalListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        agent = request_user(request)
        if not isinstance(agent, Agent):
            raise PermissionDenied("Approval requests are an agent's: call with its bearer token.")
        return Response(approval_requests_response(agent, query.validated_data))
