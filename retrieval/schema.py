"""OpenAPI extensions (drf-spectacular): the rules that request validation enforces
across fields, so a request the schema calls valid is one the API accepts (the agent
bearer scheme is described in catalog.schema)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drf_spectacular.extensions import OpenApiSerializerExtension

from retrieval.enrich_apis import ReferenceSelectApi

if TYPE_CHECKING:
    from drf_spectacular.openapi import AutoSchema
    from drf_spectacular.utils import Direction


class SelectReferencesRequest(OpenApiSerializerExtension):
    """ReferenceSelectApi.InputSerializer.validate(): at least one id or tag."""

    target_class = ReferenceSelectApi.InputSerializer  # a nested class: no import path to name it by

    def map_serializer(self, auto_schema: AutoSchema, direction: Direction) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        schema["anyOf"] = [{"required": [name], "properties": {name: {"minItems": 1}}} for name in ("ids", "tags")]
        return schema
