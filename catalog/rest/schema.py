"""The OpenAPI description's shared parts (drf-spectacular): the one error body, the
errors every operation can answer with, and component names that cannot collide.

Views declare their success bodies and the errors their own logic raises
(`errors({404: "..."})`); `LecternAutoSchema` adds the errors that the layers in front
of every view raise (body limit, content negotiation, parsing, authentication, CSRF),
so an operation's documented statuses are the ones it can return.
"""

from __future__ import annotations

import copy
from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import Direction, OpenApiResponse
from rest_framework import serializers


class ErrorContentSerializer(serializers.Serializer[dict[str, Any]]):
    code = serializers.CharField(help_text="Machine-readable: `invalid_input`, `not_found`, ... (see docs/api.md).")
    message = serializers.CharField(help_text="For people; do not parse.")
    details = serializers.DictField(
        help_text="Per code: `fields` (field -> messages) for `invalid_input`; `unknown_ids`, `ambiguous_ids`, "
                  "`unknown_tags` for `unknown_reference`; empty otherwise.")


class ErrorSerializer(serializers.Serializer[dict[str, Any]]):
    error = ErrorContentSerializer()


# The 400 where an operation's input serializer refuses a field (an operation may add its own reasons).
INVALID = "`invalid_input`: a field is missing or out of range; `details.fields` says which."


def errors(described: dict[int, str]) -> dict[int, OpenApiResponse]:
    """Error responses for `@extend_schema(responses=...)`: status -> when it happens."""
    return {status: OpenApiResponse(ErrorSerializer, description=text) for status, text in described.items()}


_WITH_BODY = ("POST", "PUT", "PATCH")


class LecternAutoSchema(AutoSchema):
    def get_operation(self, path: str, path_regex: str, path_prefix: str, method: str,
                      registry: Any) -> dict[str, Any] | None:
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        if "requestBody" in operation:
            # drf-spectacular calls a body optional when no one field is required; every
            # body here is required as a whole (an absent one is refused like {}).
            operation["requestBody"]["required"] = True
        ref = self.resolve_serializer(ErrorSerializer, "response").ref
        responses = operation["responses"]
        for status, description in self._framework_errors(has_body="requestBody" in operation).items():
            declared = responses.get(str(status))
            if declared is None:
                responses[str(status)] = {"description": description,
                                          "content": {"application/json": {"schema": ref}}}
            elif declared["content"]["application/json"]["schema"] == ref:  # the view's reasons, then these
                declared["description"] += f" {description}"
        if "503" in responses:
            responses["503"].setdefault("headers", {"Retry-After": {
                "schema": {"type": "integer"}, "description": "Seconds to wait before asking again."}})
        operation["responses"] = dict(sorted(responses.items()))
        return operation

    def _framework_errors(self, *, has_body: bool) -> dict[int, str]:
        """What the middleware, DRF's negotiation, parsing and authentication answer
        before the view's own code runs."""
        found = {
            400: "`malformed_request`: the request cannot be read (a body that is not JSON or nests deeper than 32 "
                 "levels, a NUL in the body, path or query string, a bad Content-Length); `disallowed_host`.",
            406: "`not_acceptable`: the Accept header rules out application/json.",
            # the production server's own (config/gunicorn_worker.py), before Django sees the request
            408: "`request_timeout`: the request did not arrive whole within LECTERN_WEB_READ_TIMEOUT seconds.",
            411: "`length_required`: a body sent chunked, without Content-Length.",
            413: "`payload_too_large`: the body is over LECTERN_MAX_BODY_BYTES (1 MiB by default).",
            414: "`uri_too_long`: the request line is over 4,094 bytes.",
            431: "`request_header_fields_too_large`: a header line over 8,190 bytes, or over 100 of them.",
            503: "`database_unavailable`: the database cannot be reached; retry after `Retry-After` seconds.",
        }
        if self.view.get_permissions():
            found[401] = "`unauthenticated`: no bearer token or session, or an unknown or revoked token."
        if self.method in (*_WITH_BODY, "DELETE"):
            found[403] = "`forbidden`: a session caller's request lacks the CSRF token."
        if has_body:
            found[415] = "`unsupported_media_type`: the body is not application/json."
        return found

    def get_serializer_name(self, serializer: serializers.Serializer[Any], direction: Direction) -> str:
        """Serializers nested in a view are named after the view, so two views' InputSerializer
        classes can never share one component: `SearchApi.InputSerializer` is `Search`
        (`SearchRequest` once drf-spectacular adds the request suffix),
        `SearchApi.OutputSerializer` is `SearchResponse`, `SearchApi.HitSerializer` is `SearchHit`.
        An operation's serializers kept beside the view (a feature's serializers module, where
        the MCP tools reach them too) are named alike: `SearchInputSerializer` is `Search`,
        `SearchOutputSerializer` `SearchResponse`."""
        owner, _, name = type(serializer).__qualname__.rpartition(".")
        if not owner:
            for role, suffix in (("InputSerializer", ""), ("OutputSerializer", "Response")):
                if name.endswith(role) and name != role:
                    return name.removesuffix(role) + suffix
            return super().get_serializer_name(serializer, direction)
        prefix = owner.removesuffix("Api")
        role = name.removesuffix("Serializer")
        return prefix + {"Input": "", "Output": "Response"}.get(role, role)


EMPTY = {"type": "string", "maxLength": 0}


def empty_query_values_hook(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Every optional query parameter admits "": DRF reads a parameter given empty
    (`?limit=`) as absent, so the schema says so rather than calling such a request
    invalid (a string that already admits "" is left as it is)."""
    for item in result.get("paths", {}).values():
        for operation in item.values():
            for parameter in operation.get("parameters", []) if isinstance(operation, dict) else []:
                schema = parameter.get("schema", {})
                if parameter.get("in") != "query" or parameter.get("required") or _admits_empty(schema):
                    continue
                parameter["schema"] = {"anyOf": [schema, EMPTY]}
    return result


def _admits_empty(schema: dict[str, Any]) -> bool:
    alternatives = schema.get("oneOf") or schema.get("anyOf") or [schema]
    return any(arm.get("type") == "string" and not arm.get("minLength") and "enum" not in arm
               and (not arm.get("pattern") or arm["pattern"].endswith("*$")) or arm == EMPTY
               or "" in arm.get("enum", []) for arm in alternatives)


# --- no NUL anywhere in a request -----------------------------------------------------------

# config/parsers.py refuses a NUL in any string or key of a body, config/middleware.py one
# in the path or the query string (Postgres cannot store it). The schema says so, for
# every string and object a request carries: ECMA-262, as JSON Schema reads patterns.
NUL_FREE = r"^[^\u0000]*$"
NUL_FREE_JSON = "NulFreeJson"
_NUL_FREE_REF = {"$ref": f"#/components/schemas/{NUL_FREE_JSON}"}
_NUL_FREE_JSON_SCHEMA = {
    "description": "Any JSON value without a NUL (\\u0000) in a string or a key: a member a body may carry beyond "
                   "the documented ones (it is ignored, but read).",
    "pattern": NUL_FREE, "propertyNames": {"pattern": NUL_FREE},
    "items": _NUL_FREE_REF, "additionalProperties": _NUL_FREE_REF,
}


def nul_free_requests_hook(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Every string of a request body, query or path gets a pattern excluding NUL (beside
    its own pattern, when it has one), and every object of a body names its keys
    (`propertyNames`) and its undocumented members (`additionalProperties`) likewise:
    OpenAPI 3.1, since 3.0 has no way to constrain a key."""
    schemas = result.get("components", {}).get("schemas", {})
    for name in _request_components(result):
        _nul_free(schemas[name])
    for item in result.get("paths", {}).values():
        for operation in item.values():
            for parameter in operation.get("parameters", []) if isinstance(operation, dict) else []:
                _nul_free(parameter.get("schema", {}))
    schemas[NUL_FREE_JSON] = copy.deepcopy(_NUL_FREE_JSON_SCHEMA)
    return result


def _request_components(result: dict[str, Any]) -> set[str]:
    """The components a request body refers to, directly or through other components."""
    schemas = result.get("components", {}).get("schemas", {})
    bodies = [media["schema"] for item in result.get("paths", {}).values() for operation in item.values()
              if isinstance(operation, dict) for media in operation.get("requestBody", {}).get("content", {}).values()]
    found: set[str] = set()
    pending = [ref for body in bodies for ref in _refs(body)]
    while pending:
        name = pending.pop()
        if name not in found and name in schemas:
            found.add(name)
            pending += _refs(schemas[name])
    return found


def _refs(node: object) -> list[str]:
    if isinstance(node, list):
        return [ref for item in node for ref in _refs(item)]
    if not isinstance(node, dict):
        return []
    own = [node["$ref"].rsplit("/", 1)[1]] if isinstance(node.get("$ref"), str) else []
    return own + [ref for value in node.values() for ref in _refs(value)]


def _types(node: dict[str, Any]) -> set[str]:
    declared = node.get("type")
    return set(declared) if isinstance(declared, list) else {declared} if declared else set()


def _nul_free(node: object) -> None:
    """Adds the NUL rule to a schema and the schemas inside it (not through $ref: each
    request component is visited on its own)."""
    if isinstance(node, list):
        for item in node:
            _nul_free(item)
        return
    if not isinstance(node, dict) or "$ref" in node:
        return
    types = _types(node)
    if "string" in types and "enum" not in node and "const" not in node:
        if "pattern" not in node:
            node["pattern"] = NUL_FREE
        elif node["pattern"] != NUL_FREE and {"pattern": NUL_FREE} not in node.get("allOf", []):
            node.setdefault("allOf", []).append({"pattern": NUL_FREE})
    if "object" in types:
        node.setdefault("propertyNames", {"pattern": NUL_FREE})
        node.setdefault("additionalProperties", dict(_NUL_FREE_REF))
    for child in node.get("properties", {}).values():
        _nul_free(child)
    for key in ("items", "additionalProperties", "anyOf", "oneOf", "allOf", "prefixItems"):
        _nul_free(node.get(key))
