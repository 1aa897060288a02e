"""Serializer fields for JSON request bodies that take only the JSON type the schema
names. DRF's BooleanField reads 0, 1, "true" or "yes" as booleans, and its IntegerField
and FloatField read numeric strings (FloatField true and false too): a caller's type
error would pass as data, and the schema (boolean, integer, number) would not say
what the API accepts."""

from __future__ import annotations

from rest_framework import serializers


class StrictBooleanField(serializers.BooleanField):
    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


def _is_number(data: object) -> bool:
    return isinstance(data, int | float) and not isinstance(data, bool)


class StrictIntegerField(serializers.IntegerField):
    def to_internal_value(self, data):
        if not _is_number(data):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    def to_internal_value(self, data):
        if not _is_number(data):
            self.fail("invalid")
        return super().to_internal_value(data)
