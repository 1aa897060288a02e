"""The input shapes both conversation operations and facts and memory take (REST and MCP
alike)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers

from catalog.rest.fields import StrictCharField
from retrieval.conversation.messages import ROLES
from retrieval.models import END_USER_MAX


class MessageSerializer(serializers.Serializer[dict[str, Any]]):
    role = serializers.ChoiceField(choices=ROLES)
    content = StrictCharField(max_length=settings.LECTERN_MAX_ENRICH_CHARS, allow_blank=True, trim_whitespace=False,
                              help_text="The message's text, as the model reads it.")


def messages_field(**kwargs: Any) -> serializers.ListField:
    """Oldest first; at least one, at most LECTERN_CONVERSATION_MAX_MESSAGES."""
    return serializers.ListField(child=MessageSerializer(), min_length=1,
                                 max_length=settings.LECTERN_CONVERSATION_MAX_MESSAGES, **kwargs)


def user_id_field(*, help_text: str = "The end user, as the agent names them.", **kwargs: Any) -> StrictCharField:
    return StrictCharField(max_length=END_USER_MAX, help_text=help_text, **kwargs)
