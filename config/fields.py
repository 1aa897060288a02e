"""Serializer fields for request bodies, stricter than DRF's.

DRF's CharField (and SlugField, RegexField) coerce a JSON number to a string (0 ->
"0"), so a caller's type error passes as data; and with trim_whitespace=False a text of
only whitespace is not blank. These take only JSON strings, and, unless blank is
allowed, refuse a whitespace-only one (trim_whitespace still decides what is kept).
"""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.fields import empty


class StrictCharField(serializers.CharField):
    def run_validation(self, data: object = empty) -> object:
        if isinstance(data, str) and data and not data.strip() and not self.allow_blank:
            self.fail("blank")
        return super().run_validation(data)

    def to_internal_value(self, data: object) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


# SlugField and RegexField are CharFields: these put the strict checks before theirs.
class StrictSlugField(StrictCharField, serializers.SlugField):
    pass


class StrictRegexField(StrictCharField, serializers.RegexField):
    pass
