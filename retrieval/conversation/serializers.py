"""The input shapes both conversation operations take (REST and MCP alike)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers

from catalog.rest.fields import StrictCharField
from retrieval.conversation.messages import ROLES


class MessageSerializer(serializers.Serializer[dict[str, Any]]):
    role = serializers.ChoiceField(choices=ROLES)
    content = StrictCharField(max_length=settings.LECTERN_MAX_ENRICH_CHARS, allow_blank=True, trim_whitespace=False,
                              help_text="The message's text, as the model reads it.")


def messages_field(**kwargs: Any) -> serializers.ListField:
    """Oldest first; at least one, at most LECTERN_CONVERSATION_MAX_MESSAGES."""
    return serializers.ListField(child=MessageSerializer(), min_length=1,
                                 max_length=settings.LECTERN_CONVERSATION_MAX_MESSAGES, **kwargs)
