"""OpenAPI extensions (drf-spectacular): the rules that request validation enforces
across fields, so a request the schema calls valid is one the API accepts (the agent
bearer scheme is described in catalog.schema)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drf_spectacular.extensions import OpenApiSerializerExtension

from retrieval.enrichment.serializers import ReferenceSelectInputSerializer
from retrieval.evaluation.apis import EvaluationsApi

if TYPE_CHECKING:
    from drf_spectacular.openapi import AutoSchema
    from drf_spectacular.utils import Direction


class SelectReferencesRequest(OpenApiSerializerExtension):
    """ReferenceSelectInputSerializer.validate(): at least one id or tag."""

    target_class = ReferenceSelectInputSerializer

    def map_serializer(self, auto_schema: AutoSchema, direction: Direction) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        schema["anyOf"] = [{"required": [name], "properties": {name: {"minItems": 1}}} for name in ("ids", "tags")]
        return schema


class StartEvaluationRequest(OpenApiSerializerExtension):
    """EvaluationsApi.InputSerializer.validate(): a stored test set's id, or the three
    parts of one to upload, never both; each mode once."""

    target_class = EvaluationsApi.InputSerializer

    def map_serializer(self, auto_schema: AutoSchema, direction: Direction) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        schema["properties"]["modes"].update(minItems=1, uniqueItems=True)
        uploaded = ["name", "queries", "qrels"]
        schema["oneOf"] = [
            {"required": ["query_set"], "not": {"anyOf": [{"required": [name]} for name in uploaded]}},
            {"required": uploaded, "not": {"required": ["query_set"]}},
        ]
        return schema
