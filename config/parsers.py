"""The API's one JSON parser: DRF's, refusing before any view sees them documents that
no request needs and that break what reads them further down: nesting deep enough to
exhaust Python's recursion limit (in the decoder or in a serializer), and NUL
characters, which Postgres cannot store in text (a DataError at the first query)."""

from __future__ import annotations

from rest_framework import parsers
from rest_framework.exceptions import ParseError

# The deepest request body is three levels (an object holding lists or objects of
# scalars); this leaves room without letting a body reach the recursion limit.
MAX_DEPTH = 32


def json_refusal(document: object, *, max_depth: int = MAX_DEPTH) -> str | None:
    """Why a decoded JSON document is refused, or None. Iterative: depth is what is
    being checked, so the check itself must not recurse."""
    stack = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                return "strings may not contain NUL (\\u0000) characters"
            continue
        if not isinstance(value, dict | list):
            continue
        if depth > max_depth:
            return f"nested deeper than {max_depth} levels"
        if isinstance(value, dict):
            if any("\x00" in key for key in value):
                return "keys may not contain NUL (\\u0000) characters"
            value = value.values()
        stack.extend((item, depth + 1) for item in value)
    return None


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            document = super().parse(stream, media_type, parser_context)
        except RecursionError:  # the decoder's own limit, far deeper than MAX_DEPTH
            raise ParseError(f"JSON refused - nested deeper than {MAX_DEPTH} levels") from None
        if problem := json_refusal(document):
            raise ParseError(f"JSON refused - {problem}")
        return document
