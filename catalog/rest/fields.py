"""Serializer fields for request bodies, stricter than DRF's: each takes only the JSON
type the schema names.

DRF's CharField (and SlugField, RegexField) coerce a JSON number to a string (0 ->
"0"), so a caller's type error passes as data; and with trim_whitespace=False a text of
only whitespace is not blank. The string fields take only JSON strings, and, unless
blank is allowed, refuse a whitespace-only one (trim_whitespace still decides what is
kept). Likewise DRF's BooleanField reads 0, 1, "true" or "yes", and its IntegerField and
FloatField read numeric strings (FloatField true and false too): the strict ones take
only booleans, and numbers that are not booleans.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from django.core.validators import RegexValidator
from rest_framework import serializers
from rest_framework.fields import empty

# What the blank check refuses, as a validator drf-spectacular publishes as the
# field's pattern (it never fires: the check runs first), and as the pattern of the MCP
# tools' text arguments: some character that is not whitespace as Python's strip()
# counts it. Spelled out, not `\S`: regex dialects disagree on \x1c-\x1f and \x85
# (ECMA's and Rust's `\s` leave them out).
NOT_BLANK_PATTERN = r"[^\t\n\x0b\x0c\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
NOT_BLANK = RegexValidator(NOT_BLANK_PATTERN, "must not be blank")


class StrictStringField(serializers.CharField):
    """The checks every strict string field makes. Slug and Regex fields are CharFields:
    their strict versions put these checks before their own."""

    def run_validation(self, data: object = empty) -> object:
        if isinstance(data, str) and data and not data.strip() and not self.allow_blank:
            self.fail("blank")
        return super().run_validation(data)

    def to_internal_value(self, data: object) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictCharField(StrictStringField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not self.allow_blank:
            self.validators.append(NOT_BLANK)


class StrictSlugField(StrictStringField, serializers.SlugField):
    pass


class StrictRegexField(StrictStringField, serializers.RegexField):
    pass


class StrictBooleanField(serializers.BooleanField):
    def to_internal_value(self, data: object) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class QueryBooleanField(serializers.BooleanField):
    """A boolean query parameter: `true` or `false`, as the schema publishes it (DRF's
    field would also take yes, on, 1 and their opposites, which a client reading the
    schema cannot know: a typo must not silently mean false). Given empty it is read as
    absent, as every query parameter is (catalog.rest.schema.empty_query_values_hook)."""

    def to_internal_value(self, data: object) -> bool:
        if data not in ("true", "false", True, False):
            self.fail("invalid", input=data)
        return data in ("true", True)


def _is_number(data: object) -> TypeGuard[int | float]:
    return isinstance(data, int | float) and not isinstance(data, bool)


class StrictIntegerField(serializers.IntegerField):
    def to_internal_value(self, data: object) -> int:
        if not _is_number(data):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    def to_internal_value(self, data: object) -> float:
        if not _is_number(data):
            self.fail("invalid")
        return super().to_internal_value(data)
