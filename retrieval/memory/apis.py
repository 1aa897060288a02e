"""Facts and memory over the API, an agent's own, per end user: facts set,
listed and deleted; memories stored (`store_memory`), listed or searched, exported, and
erased at the end user's request (audited). Only an agent's token reaches them: they are
the agent's (curators see them on the agent's page)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.auth import RequestUser, request_user
from catalog.errors import ForbiddenError, InvalidError, NotFoundError
from catalog.models import Agent
from catalog.reads import replica_read
from catalog.rest.fields import StrictCharField, StrictRegexField
from catalog.rest.schema import INVALID, errors
from retrieval.conversations.serializers import user_id_field
from retrieval.memory.selectors import facts_of, memories_of, memory_export, memory_search
from retrieval.memory.serializers import (
    FactSerializer,
    MemoryHitSerializer,
    MemorySerializer,
    StoredSerializer,
    StoreMemorySerializer,
    UserQuerySerializer,
    store_memory_response,
)
from retrieval.memory.services import fact_delete, fact_set, memory_erase

AGENTS_ONLY = "`forbidden`: facts and memory are an agent's; call with the agent's token."
LIST_MAX = 200


def _agent(request: Request) -> Agent:
    user: RequestUser = request_user(request)
    if not isinstance(user, Agent):
        raise ForbiddenError("Facts and memory belong to an agent: call with the agent's token "
                          "(curators see them on the agent's page).", code="forbidden")
    return user


# --- facts ----------------------------------------------------------------------------------


class FactsApi(APIView):
    """An end user's facts (key=value), injected into their conversations."""

    class PutSerializer(serializers.Serializer[None]):
        user_id = user_id_field()
        key = StrictRegexField(r"^[A-Za-z0-9_.-]+$", max_length=100,
                               help_text="Letters, digits, '_', '.' and '-' (it is written `key=value`).")
        value = StrictCharField(max_length=1000, help_text="Any text but NUL, stored as given (trimmed); escaped "
                                                          "where `[facts: ...]` injects it (`\\,` `\\]` `\\n` ...: "
                                                          "docs/api.md).")

    class DeleteSerializer(serializers.Serializer[None]):
        user_id = user_id_field()
        key = StrictCharField(max_length=100)

    class ListSerializer(serializers.Serializer[dict[str, Any]]):
        user_id = serializers.CharField()
        facts = FactSerializer(many=True)

    @extend_schema(parameters=[UserQuerySerializer], operation_id="list_facts",
                   responses={200: ListSerializer, **errors({400: INVALID, 403: AGENTS_ONLY})})
    def get(self, request: Request) -> Response:
        agent = _agent(request)
        query = UserQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        user_id = query.validated_data["user_id"]
        return Response(self.ListSerializer({"user_id": user_id, "facts": facts_of(agent=agent, user_id=user_id)}).data)

    @extend_schema(request=PutSerializer, operation_id="set_fact",
                   responses={200: FactSerializer, 201: FactSerializer, **errors({400: INVALID, 403: AGENTS_ONLY})},
                   examples=[OpenApiExample("a fact", request_only=True,
                                            value={"user_id": "steve", "key": "location", "value": "Texas"})])
    def put(self, request: Request) -> Response:
        agent = _agent(request)
        data = self.PutSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fact, created = fact_set(agent=agent, **data.validated_data)
        return Response(FactSerializer(fact).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(parameters=[DeleteSerializer], operation_id="delete_fact",
                   responses={200: FactSerializer, **errors({400: INVALID, 403: AGENTS_ONLY,
                                                             404: "`not_found`: the end user has no such fact."})})
    def delete(self, request: Request) -> Response:
        """The fact deleted, as it was."""
        agent = _agent(request)
        query = self.DeleteSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        fact = fact_delete(agent=agent, **query.validated_data)
        if fact is None:
            raise NotFoundError("the end user has no such fact", code="not_found")
        return Response(FactSerializer(fact).data)


# --- memory ---------------------------------------------------------------------------------


class MemoryApi(APIView):
    """An end user's memories: stored by the agent, listed or searched, erased on request."""

    class QuerySerializer(serializers.Serializer[None]):
        user_id = user_id_field()
        q = StrictCharField(max_length=settings.LECTERN_MAX_ENRICH_CHARS, required=False, default="",
                            allow_blank=True, help_text="Search by keywords and meaning (default: list, newest first).")
        limit = serializers.IntegerField(min_value=1, max_value=LIST_MAX, default=50)

    class ListSerializer(serializers.Serializer[dict[str, Any]]):
        user_id = serializers.CharField()
        count = serializers.IntegerField(help_text="The end user's memories in all.")
        memories = MemorySerializer(many=True, required=False, help_text="Without `q`: the newest.")
        hits = MemoryHitSerializer(many=True, required=False, help_text="With `q`: the best, by score.")

    class ErasedSerializer(serializers.Serializer[dict[str, Any]]):
        memories = serializers.IntegerField(min_value=0)
        facts = serializers.IntegerField(min_value=0)
        traces = serializers.IntegerField(min_value=0, help_text="Traces of the end user's conversations.")

    @extend_schema(parameters=[QuerySerializer], operation_id="list_memory",
                   responses={200: ListSerializer, **errors({400: INVALID, 403: AGENTS_ONLY})})
    def get(self, request: Request) -> Response:
        agent = _agent(request)
        query = self.QuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        user_id, text, limit = (query.validated_data[name] for name in ("user_id", "q", "limit"))
        # From the replica once it holds what this agent stored (catalog.reads).
        return Response(replica_read(agent=agent, read=lambda: self._listing(agent, user_id, text, limit)))

    def _listing(self, agent: Agent, user_id: str, text: str, limit: int) -> dict[str, Any]:
        memories = memories_of(agent=agent, user_id=user_id)
        body: dict[str, Any] = {"user_id": user_id, "count": memories.count()}
        if text.strip():
            body["hits"] = [hit.as_dict() for hit in memory_search(agent=agent, user_id=user_id, text=text,
                                                                    limit=limit)]
        else:
            body["memories"] = list(memories[:limit])
        return self.ListSerializer(body).data

    @extend_schema(request=StoreMemorySerializer, operation_id="store_memory",
                   responses={200: StoredSerializer, 201: StoredSerializer,
                              **errors({400: INVALID, 403: AGENTS_ONLY})},
                   examples=[OpenApiExample("a memory", request_only=True, value={
                       "user_id": "steve", "content": "Prefers VS Code with vim keybindings."})])
    def post(self, request: Request) -> Response:
        agent = _agent(request)
        data = StoreMemorySerializer(data=request.data)
        data.is_valid(raise_exception=True)
        body, created = store_memory_response(agent, data.validated_data)
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(parameters=[UserQuerySerializer], operation_id="erase_memory",
                   description="Erase everything kept about the end user (memories, facts and the traces of their "
                               "conversations), at their request. "
                               "Audited; the audit log names the end user by a keyed hash.",
                   responses={200: ErasedSerializer, **errors({400: INVALID, 403: AGENTS_ONLY})})
    def delete(self, request: Request) -> Response:
        agent = _agent(request)
        unknown = sorted(set(request.query_params) - {"user_id"})
        if unknown:  # an erasure takes everything of the end user: nothing may look like narrowing it
            raise InvalidError(f"an erasure takes only user_id, not {', '.join(unknown)}: it erases every memory "
                              "and fact of the end user", code="invalid_input",
                              details={"fields": {name: ["Not a parameter of the erasure."] for name in unknown}})
        query = UserQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return Response(self.ErasedSerializer(memory_erase(agent=agent, user_id=query.validated_data["user_id"],
                                                           by=agent)).data)


class MemoryExportApi(APIView):
    """Everything kept about an end user (facts and memories), for their request."""

    class ExportSerializer(serializers.Serializer[dict[str, Any]]):
        agent = serializers.CharField()
        user_id = serializers.CharField()
        exported_at = serializers.DateTimeField()
        facts = FactSerializer(many=True)
        memories = MemorySerializer(many=True)

    @extend_schema(parameters=[UserQuerySerializer], operation_id="export_memory",
                   responses={200: ExportSerializer, **errors({400: INVALID, 403: AGENTS_ONLY})})
    def get(self, request: Request) -> Response:
        agent = _agent(request)
        query = UserQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return Response(self.ExportSerializer(memory_export(agent=agent, user_id=query.validated_data["user_id"])).data)
