"""The conversation API (DRF): search_conversation (a catalog's passages for every topic
of a conversation) and enrich_conversation (facts, memory and context on its newest user
message). The shapes and the bodies are retrieval.conversations.serializers', which the
MCP tools answer with too."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.auth import request_user
from catalog.rest.schema import INVALID, errors
from retrieval.conversations.serializers import (
    ConversationSearchInputSerializer,
    ConversationSearchOutputSerializer,
    EnrichConversationInputSerializer,
    EnrichConversationOutputSerializer,
    conversation_response,
    enrich_conversation_response,
)
from retrieval.enrichment.serializers import NO_CATALOG


class ConversationSearchApi(APIView):
    """Conversation retrieval: a catalog's passages for every topic of a
    conversation, one query per chunk of it."""

    @extend_schema(
        request=ConversationSearchInputSerializer, operation_id="search_conversation",
        responses={200: ConversationSearchOutputSerializer, **errors({
            400: "`invalid_input`: a field is missing or out of range, or the conversation makes more query chunks "
                 "than LECTERN_CONVERSATION_MAX_CHUNKS; `details.fields` says which.",
            404: "`not_found`: no such catalog for this caller.",
            409: "`embeddings_unavailable`: no embedding model is loaded.",
        })},
        examples=[OpenApiExample("two topics", request_only=True, value={
            "catalog": "demo", "top_k": 3, "messages": [
                {"role": "user", "content": "Our calls to the billing service keep timing out."},
                {"role": "assistant", "content": "Retries with backoff would help there."},
                {"role": "user", "content": "Also, where should the API keys live?"}]})],
    )
    def post(self, request: Request) -> Response:
        data = ConversationSearchInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(conversation_response(request_user(request), data.validated_data))


class EnrichConversationApi(APIView):
    """A whole conversation, returned with facts and context postfixed onto its newest user
    message; what Lectern added to earlier turns is removed exactly."""

    @extend_schema(
        request=EnrichConversationInputSerializer, operation_id="enrich_conversation",
        responses={200: EnrichConversationOutputSerializer, **errors({400: INVALID, 404: NO_CATALOG})},
        examples=[OpenApiExample("a conversation", request_only=True, value={
            "user_id": "steve", "messages": [{"role": "system", "content": "You are a helpful assistant."},
                                             {"role": "user", "content": "What did I tell you about my project?"}]})],
    )
    def post(self, request: Request) -> Response:
        data = EnrichConversationInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(enrich_conversation_response(request_user(request), data.validated_data))
