"""Citations' shapes: the fields every served passage carries (a search hit, a
conversation's passage), and a resolved cite, which REST and the curators' page show."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from catalog.auth import RequestUser
from catalog.errors import InvalidError
from retrieval.citations.grammar import MAX_CHARS, PATTERN, Cite, CiteError, parse_cite
from retrieval.citations.selectors import Resolution, cite_resolve

CITE_HELP = ("The passage as one token to quote, `[lectern:catalog/source/path#bSTART-END@FINGERPRINT]`: its "
             "bytes in the document's UTF-8 text (end excluded) and the first 12 hex digits of `fingerprint`. A "
             "curator resolves it to the exact text served (GET /api/v1/cite), after the source changed too.")


# The fields every served passage carries; a comment, not a docstring (drf-spectacular
# would give every subclass's schema that description).
class CitedSerializer(serializers.Serializer[dict[str, Any]]):
    cite = serializers.CharField(help_text=CITE_HELP)
    fingerprint = serializers.CharField(help_text="sha256 of the text served (`content`), 64 hex digits.")
    byte_start = serializers.IntegerField(min_value=0, help_text="Its first byte in the document's UTF-8 text.")
    byte_end = serializers.IntegerField(min_value=0, help_text="The byte after its last.")
    approval_id = serializers.IntegerField(
        allow_null=True, help_text="The approval request that let its source through to the caller "
                                   "(GET /api/v1/approvals); null where the source needs no approval.")


class CiteQuerySerializer(serializers.Serializer[None]):
    c = serializers.RegexField(
        PATTERN, max_length=MAX_CHARS,
        help_text="The cite, as a hit carried it: `[lectern:catalog/source/path#bSTART-END@FP]`.")


class ServingSerializer(serializers.Serializer[Any]):
    trace_id = serializers.UUIDField(help_text="GET /api/v1/traces/{trace_id}.")
    served_at = serializers.DateTimeField()
    caller = serializers.CharField(help_text="Agent or user name at the time of the call.")
    agent = serializers.CharField(allow_null=True, help_text="The agent's name; null for a person.")
    surface = serializers.CharField(help_text="What served it: search, conversation, ...")
    approval_id = serializers.IntegerField(allow_null=True,
                                           help_text="The approval request that let it through then.")


class CiteOutputSerializer(serializers.Serializer[Any]):
    cite = serializers.CharField(help_text="The cite, written out again.")
    catalog = serializers.CharField()
    source = serializers.CharField(  # type: ignore[assignment]  # the stubs' Field.source: see catalog.apis
        help_text="The source's slug (the reference id).")
    path = serializers.CharField(help_text="The document's path within its source.")
    byte_start = serializers.IntegerField(min_value=0)
    byte_end = serializers.IntegerField(min_value=0)
    fingerprint = serializers.CharField(help_text="sha256 of `text`, 64 hex digits.")
    text = serializers.CharField(help_text="Exactly the text that was served.")
    changed = serializers.BooleanField(
        help_text="True when the document no longer holds this text at these bytes (changed since it was served).")
    current_fingerprint = serializers.CharField(
        allow_null=True, help_text="sha256 of what the document holds at these bytes now; null when it has no "
                                   "such document or range any more.")
    served = ServingSerializer(many=True, help_text="The traces that served it, newest first (at most 50); empty "
                                                    "when no recorded call did and the text is the document's now.")


def cite_of(raw: str) -> Cite:
    """The cite in `raw`, or an InvalidError whose message is one line."""
    try:
        return parse_cite(raw)
    except CiteError as exc:
        raise InvalidError(f"c: {exc}", code="invalid_cite", details={"fields": {"c": [str(exc)]}}) from None


def resolution_body(resolution: Resolution) -> dict[str, Any]:
    cite = resolution.cite
    return {"cite": str(cite), "catalog": cite.catalog, "source": cite.source, "path": cite.path,
            "byte_start": cite.start, "byte_end": cite.end, "fingerprint": resolution.fingerprint,
            "text": resolution.text, "changed": resolution.changed,
            "current_fingerprint": resolution.current_fingerprint,
            "served": [serving.__dict__ for serving in resolution.served]}


def cite_response(caller: RequestUser, raw: str) -> dict[str, Any]:
    """GET /api/v1/cite's body for the cite `raw`."""
    return dict(CiteOutputSerializer(resolution_body(cite_resolve(caller=caller, cite=cite_of(raw)))).data)
