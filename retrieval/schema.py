"""OpenAPI extensions (drf-spectacular): agent bearer tokens, and the rules that
request validation enforces across fields, so a request the schema calls valid is one
the API accepts."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerExtension

from retrieval.enrich_apis import ReferenceSelectApi


class AgentTokenScheme(OpenApiAuthenticationExtension):
    target_class = "retrieval.auth.AgentTokenAuthentication"
    name = "agentToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "An agent token from manage.py create_agent."}


class SelectReferencesRequest(OpenApiSerializerExtension):
    """ReferenceSelectApi.InputSerializer.validate(): at least one id or tag."""

    target_class = ReferenceSelectApi.InputSerializer  # a nested class: no import path to name it by

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        schema["anyOf"] = [{"required": [name], "properties": {name: {"minItems": 1}}} for name in ("ids", "tags")]
        return schema
