"""Facts' and memory's shapes, and the body store_memory answers with: REST
(retrieval.memory.apis) and the MCP tool store_memory build it with
`store_memory_response`."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers

from catalog.models import Agent
from catalog.rest.fields import StrictCharField
from retrieval.conversations.serializers import user_id_field
from retrieval.memory.services import memory_store


class FactSerializer(serializers.Serializer[Any]):  # a Fact, or an export's dict
    key = serializers.CharField()
    value = serializers.CharField()
    updated_at = serializers.DateTimeField()


class MemorySerializer(serializers.Serializer[Any]):  # a MemoryEntry, or an export's dict
    id = serializers.IntegerField()
    content = serializers.CharField()
    created_at = serializers.DateTimeField()
    stored_at = serializers.DateTimeField(help_text="When it was last stored: recency counts from here.")
    times = serializers.IntegerField(min_value=1, help_text="How often the agent stored this text.")


class MemoryHitSerializer(serializers.Serializer[dict[str, Any]]):
    id = serializers.IntegerField()
    content = serializers.CharField()
    stored_at = serializers.DateTimeField()
    lexical = serializers.FloatField(help_text="Share of the query's keywords the memory holds.")
    similarity = serializers.FloatField(allow_null=True, help_text="Cosine similarity of the embeddings.")
    recency = serializers.FloatField(help_text="The recency boost's factor (1 for a memory stored just now).")
    score = serializers.FloatField(help_text="max(lexical, similarity) x recency.")


class UserQuerySerializer(serializers.Serializer[None]):
    user_id = user_id_field()


class StoreMemorySerializer(serializers.Serializer[None]):
    user_id = user_id_field()
    content = StrictCharField(max_length=settings.LECTERN_MEMORY_MAX_CHARS,
                              help_text="What to remember, as it should be recalled.")


class StoredSerializer(serializers.Serializer[dict[str, Any]]):
    memory = MemorySerializer()
    created = serializers.BooleanField(help_text="False: the same text was stored before; it is remembered again.")


def store_memory_response(agent: Agent, params: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The store_memory body (REST and the MCP tool), and whether the entry is new."""
    entry, created = memory_store(agent=agent, user_id=params["user_id"], content=params["content"])
    return StoredSerializer({"memory": entry, "created": created}).data, created
