"""OpenAPI extensions (drf-spectacular): agent bearer tokens, and the rules that
request validation enforces across fields, so a request the schema calls valid is one
the API accepts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerExtension

from retrieval.enrich_apis import ReferenceSelectApi

if TYPE_CHECKING:
    from drf_spectacular.openapi import AutoSchema
    from drf_spectacular.utils import Direction


class AgentTokenScheme(OpenApiAuthenticationExtension):
    target_class = "retrieval.auth.AgentTokenAuthentication"
    name = "agentToken"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return {"type": "http", "scheme": "bearer", "description": "An agent token from manage.py create_agent."}


class SelectReferencesRequest(OpenApiSerializerExtension):
    """ReferenceSelectApi.InputSerializer.validate(): at least one id or tag."""

    target_class = ReferenceSelectApi.InputSerializer  # a nested class: no import path to name it by

    def map_serializer(self, auto_schema: AutoSchema, direction: Direction) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        schema["anyOf"] = [{"required": [name], "properties": {name: {"minItems": 1}}} for name in ("ids", "tags")]
        return schema
