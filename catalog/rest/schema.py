"""The OpenAPI description's shared parts (drf-spectacular): the one error body, the
errors every operation can answer with, and component names that cannot collide.

Views declare their success bodies and the errors their own logic raises
(`errors({404: "..."})`); `LecternAutoSchema` adds the errors that the layers in front
of every view raise (body limit, content negotiation, parsing, authentication, CSRF),
so an operation's documented statuses are the ones it can return.
"""

from __future__ import annotations

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
        `SearchApi.OutputSerializer` is `SearchResponse`, `SearchApi.HitSerializer` is `SearchHit`."""
        owner, _, name = type(serializer).__qualname__.rpartition(".")
        if not owner:
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
