"""The cite API (DRF): a curator resolves a cite to the exact text that was served
(the shapes and the body are retrieval.citations.serializers')."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.auth import request_user
from catalog.rest.schema import errors
from retrieval.citations.serializers import CiteOutputSerializer, CiteQuerySerializer, cite_response


class CiteApi(APIView):
    """Resolve a cite: the exact text served, which traces served it, when and to whom,
    and whether the document still holds it. Curators of the cite's catalog only."""

    @extend_schema(
        operation_id="resolve_cite", parameters=[CiteQuerySerializer],
        responses={200: CiteOutputSerializer, **errors({
            400: "`invalid_cite`: `c` is missing or not a cite (its range empty, its escapes not UTF-8, ...); "
                 "the message says why, in one line.",
            403: "`forbidden`: the caller sees the catalog but does not curate it (a reader token, a reviewer).",
            404: "`not_found`: no such catalog or source for this caller (a curator agent reads a governed source "
                 "only while approved), or no text for the cite: no recorded call served it and the document no "
                 "longer holds it.",
        })},
    )
    def get(self, request: Request) -> Response:
        return Response(cite_response(request_user(request), request.query_params.get("c", "")))
