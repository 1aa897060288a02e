"""The MCP tools' input schemas, as the SDK generates them from the typed signatures
(retrieval/mcp/tools.py), offer every field of the REST input serializer that validates
each tool's arguments, with its type, limits, choices, default and whether it is
required, so the tools cannot fall behind the REST API again."""

from __future__ import annotations

import re

import anyio
import pytest
from django.core.validators import RegexValidator
from rest_framework import serializers
from rest_framework.fields import empty

from retrieval.mcp.server import build_server
from retrieval.mcp.tools import TOOLS

# Arguments the serializer requires that a tool fills from the agent's profile.
FILLED = {"rag_search": {"catalog"}, "explain_search": {"catalog"}, "search_conversation": {"catalog"}}
LIMITS = ("type", "enum", "minimum", "maximum", "minLength", "maxLength", "pattern", "minItems", "maxItems")


@pytest.fixture(scope="module")
def schemas() -> dict[str, dict]:
    tools = anyio.run(build_server(token_hash="").list_tools)
    return {tool.name: tool.input_schema for tool in tools}


def expected(field: serializers.Field) -> dict:
    """The JSON Schema limits a serializer field validates."""
    if isinstance(field, serializers.ListField):
        return {"type": "array", "items": expected(field.child),
                **_present(minItems=field.min_length, maxItems=field.max_length)}
    if isinstance(field, serializers.DictField):
        return {"type": "object", "values": expected(field.child)}
    if isinstance(field, serializers.Serializer):  # a record: each field its own schema
        return {"type": "object", "properties": {name: expected(f) for name, f in field.fields.items()},
                "required": sorted(name for name, f in field.fields.items() if f.required)}
    if isinstance(field, serializers.BooleanField):
        return {"type": "boolean"}
    if isinstance(field, serializers.ChoiceField):  # "" too when blank is allowed (read as absent)
        return {"type": "string", "enum": sorted([*field.choices, *([""] if field.allow_blank else [])])}
    if isinstance(field, serializers.IntegerField | serializers.FloatField):
        kind = "integer" if isinstance(field, serializers.IntegerField) else "number"
        return {"type": kind, **_present(minimum=field.min_value, maximum=field.max_value)}
    assert isinstance(field, serializers.CharField), f"no mapping for {type(field).__name__}"
    patterns = [re.compile(v.regex).pattern.replace(r"\Z", "$")
                for v in field.validators if isinstance(v, RegexValidator)]
    assert len(patterns) <= 1
    return {"type": "string", **_present(minLength=field.min_length, maxLength=field.max_length),
            **({"pattern": patterns[0]} if patterns else {})}


def _present(**limits: object) -> dict:
    return {key: value for key, value in limits.items() if value is not None}


def offered(schema: dict, defs: dict) -> dict:
    """The limits a generated property schema states; an optional argument's null
    alternative left out (null counts as omitted), an object's properties as the values
    of a dict when each has the same schema and none is required, else as a record's."""
    alternatives = [arm for arm in schema.get("anyOf", [schema]) if arm.get("type") != "null"]
    assert len(alternatives) == 1, schema
    (schema,) = alternatives
    if "$ref" in schema:
        schema = defs[schema["$ref"].removeprefix("#/$defs/")]
    limits = {key: schema[key] for key in LIMITS if key in schema}
    if "enum" in limits:
        limits["enum"] = sorted(limits["enum"])
    if "items" in schema:
        limits["items"] = offered(schema["items"], defs)
    if schema.get("type") == "object":
        properties = {name: offered(value, defs) for name, value in schema["properties"].items()}
        values = list(properties.values())
        if values and all(value == values[0] for value in values) and not schema.get("required"):
            limits["values"] = values[0]
        else:
            assert schema.get("additionalProperties") is False, schema  # a record takes no other field
            limits.update(properties=properties, required=sorted(schema.get("required", [])))
    return limits


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_a_tool_offers_every_field_of_its_rest_serializer_with_its_limits(schemas, name):
    fields = TOOLS[name].operation.serializer().fields
    schema = schemas[name]
    properties = schema["properties"]

    assert set(properties) == set(fields)
    for field_name, field in fields.items():
        assert offered(properties[field_name], schema.get("$defs", {})) == expected(field), field_name
        assert properties[field_name].get("description"), f"{field_name}: clients read what it is for"
        if field.default is not empty and not callable(field.default):
            assert properties[field_name]["default"] == field.default, field_name
        elif not field.required or field_name in FILLED.get(name, ()):
            assert properties[field_name].get("default") is None, field_name  # omitted, or null: the same
    required = {field_name for field_name, field in fields.items() if field.required}
    assert set(schema.get("required", [])) == required - FILLED.get(name, set())


def test_weights_name_their_components_and_nothing_else(schemas):
    (ref,) = [arm["$ref"] for arm in schemas["rag_search"]["properties"]["weights"]["anyOf"] if "$ref" in arm]
    weights = schemas["rag_search"]["$defs"][ref.removeprefix("#/$defs/")]

    assert set(weights["properties"]) == {"bm25", "vector"}
    assert weights["additionalProperties"] is False
    assert not weights.get("required")
