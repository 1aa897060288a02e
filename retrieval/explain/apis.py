"""The explain API (DRF): why a document was or was not among a search's hits. The
shapes and the body are retrieval.explain.serializers'."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.auth import request_user
from catalog.rest.schema import errors
from retrieval.explain.serializers import ExplainInputSerializer, ExplainOutputSerializer, explain_response


class ExplainApi(APIView):
    """explain_search: where one document stood in a search, stage by stage."""

    @extend_schema(
        request=ExplainInputSerializer, operation_id="explain_search",
        responses={200: ExplainOutputSerializer, **errors({
            400: "`invalid_input`: a field is missing or out of range; `details.fields` says which.",
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
