"""A trace's shapes: one step per pass, each with its own shape, stored as JSON and
returned as stored (tests/test_api_contract.py checks them against the schema)."""

from __future__ import annotations

from typing import Any, cast

from drf_spectacular.utils import (
    PolymorphicProxySerializer,
    extend_schema_field,
)
from rest_framework import serializers

from approvals.serializers import gate_state_field, request_id_field
from retrieval.conversations.serializers import ContextItemSerializer, TokensSerializer
from retrieval.enrichment.serializers import HintSerializer, LinkParentSerializer
from retrieval.models import Trace


def _step(name: str, doc: str, **fields: serializers.Field[Any, Any, Any, Any],
          ) -> type[serializers.Serializer[dict[str, Any]]]:
    """The serializer of one pass's trace step, built by a call because its
    discriminator, `pass`, is a Python keyword."""
    attrs = {"__doc__": doc, "pass": serializers.ChoiceField(choices=[name]),
             "ms": serializers.FloatField(help_text="Time the pass took."), **fields}
    step = serializers.SerializerMetaclass(f"{name.title()}StepSerializer", (serializers.Serializer,), attrs)
    return cast(type[serializers.Serializer[dict[str, Any]]], step)  # a class made by a call is typed `type`


class DiscoveredSerializer(serializers.Serializer[dict[str, Any]]):
    source_id = serializers.CharField()
    catalog = serializers.CharField()
    depth = serializers.IntegerField(min_value=1)
    parents = LinkParentSerializer(many=True)


class DecisionSerializer(serializers.Serializer[dict[str, Any]]):
    source_id = serializers.CharField()
    catalog = serializers.CharField()
    allowed = serializers.BooleanField()
    state = gate_state_field()
    reason = serializers.CharField()
    request_id = request_id_field(required=False)  # traces stored before it existed lack it


def _scores() -> serializers.DictField:
    return serializers.DictField(child=serializers.FloatField(), required=False,
                                 help_text="`catalog/source` -> cosine similarity.")


class MemoryStepHitSerializer(serializers.Serializer[dict[str, Any]]):
    id = serializers.IntegerField()
    content = serializers.CharField()
    stored_at = serializers.CharField(help_text="ISO 8601, UTC.")
    lexical = serializers.FloatField()
    similarity = serializers.FloatField(allow_null=True)
    recency = serializers.FloatField()
    score = serializers.FloatField()
    kept = serializers.BooleanField(help_text="At least the relevance threshold.")


class PassageStepHitSerializer(ContextItemSerializer):
    kept = serializers.BooleanField(help_text="At least the relevance threshold.")


class SearchStepHitSerializer(serializers.Serializer[dict[str, Any]]):
    ref = serializers.CharField(help_text="`catalog/source`.")
    approval_id = serializers.IntegerField(allow_null=True, help_text="The approval request that let it through.")


# typed as PolymorphicProxySerializer takes them
TRACE_STEPS: dict[str, serializers.Serializer[Any] | type[serializers.Serializer[Any]]] = {
    "mention": _step("mention", "Each `@id` found.", candidates=HintSerializer(many=True)),
    "tag": _step("tag", "Tags found in the text.",
                 candidates=serializers.IntegerField(help_text="How many sources the tags proposed."),
                 tags=serializers.DictField(child=serializers.ListField(child=serializers.CharField()),
                                            help_text="Tag -> the `catalog/source` ids carrying it."),
                 at=serializers.DictField(
                     child=serializers.ListField(child=serializers.IntegerField(min_value=0), min_length=2,
                                                 max_length=2),
                     required=False,  # traces stored before it existed lack it
                     help_text="Tag -> [start, end): where it first occurs in the text detection read (the "
                               "text as received, Lectern's earlier injections removed), in characters.")),
    "path": _step("path", "Path containment (tool results, or `paths` given).",
                  paths=serializers.ListField(child=serializers.CharField(), help_text="The first 20 looked at."),
                  candidates=HintSerializer(many=True)),
    "semantic": _step(
        "semantic", "Matching by meaning; only `skipped` when it could not run.",
        skipped=serializers.CharField(required=False, help_text="Why the pass did not run."),
        model=serializers.CharField(required=False), threshold=serializers.FloatField(required=False),
        floor=serializers.FloatField(required=False), margin=serializers.FloatField(required=False),
        embedded_tokens=serializers.IntegerField(required=False),
        embedded_text=serializers.ChoiceField(choices=["as written", "content words"], required=False),
        embed_ms=serializers.FloatField(required=False), candidates=_scores(), nearest_below_threshold=_scores()),
    "link": _step("link", "References linked from the expanded or pinned ones.",
                  discovered=DiscoveredSerializer(many=True), candidates=HintSerializer(many=True)),
    "rank": _step("rank", "The cut to max_hints.", max_hints=serializers.IntegerField(),
                  kept=serializers.ListField(child=serializers.CharField()),
                  cut=serializers.IntegerField(help_text="Tag and semantic candidates not kept.")),
    "governance": _step("governance", "The gate's answer for each reference surfaced.",
                        decisions=DecisionSerializer(many=True)),
    "format": _step("format", "The blocks appended.", blocks=serializers.IntegerField()),
    # a conversation's passes (enrich/conversation)
    "strip": _step("strip", "Earlier injections removed from the messages.", messages=serializers.IntegerField(),
                   restored=serializers.ListField(child=serializers.IntegerField(),
                                                  help_text="The messages that carried one."),
                   freed_tokens=serializers.IntegerField()),
    "memory": _step("memory", "The end user's facts (their keys) and the memories searched.",
                    facts=serializers.ListField(child=serializers.CharField()),
                    hits=MemoryStepHitSerializer(many=True,
                                                 help_text="Each memory found: its scores, and kept or not.")),
    "passages": _step("passages", "The catalogs' passages by meaning, through the approval gate.",
                      catalogs=serializers.ListField(child=serializers.CharField()),
                      hits=PassageStepHitSerializer(many=True, help_text="Each passage found, and kept or not."),
                      withheld=HintSerializer(many=True)),
    # a search's (search, search/conversation)
    "search": _step("search", "The passages a search returned, by reference (their texts are kept apart, for "
                              "curators resolving their cites: GET /api/v1/cite), and what it withheld.",
                    catalog=serializers.CharField(), mode=serializers.CharField(),
                    hits=SearchStepHitSerializer(many=True, help_text="Each passage returned, best first."),
                    withheld=HintSerializer(many=True)),
    "conversation": _step("conversation", "What was added, where, and the tokens.",
                          injected_into=serializers.IntegerField(allow_null=True),
                          end_user=serializers.CharField(required=False, help_text="The end user's keyed hash."),
                          facts=serializers.IntegerField(),
                          context=ContextItemSerializer(many=True),
                          tokens=TokensSerializer()),
}


@extend_schema_field(PolymorphicProxySerializer(component_name="TraceStep", serializers=TRACE_STEPS,
                                                resource_type_field_name="pass", many=True))
class TraceStepsField(serializers.JSONField):
    """The steps as stored (see the module docstring)."""


class BlankAsNullField(serializers.CharField):
    """A trace stores "" when nothing degraded; the API says null, as enrich does (the
    view used to set None on the model instance, a value its field cannot hold)."""

    # DRF renders whatever this returns; the stubs narrow CharField's to str
    def to_representation(self, value: object) -> str | None:  # type: ignore[override]
        return str(value) or None


class TraceOutputSerializer(serializers.Serializer[Trace]):
    id = serializers.UUIDField()
    caller = serializers.CharField(help_text="The agent's or user's name at the time of the call.")
    surface = serializers.ChoiceField(choices=Trace.Surface.values)
    text = serializers.CharField(
        allow_null=True, help_text="The text as received; null when not kept (LECTERN_TRACE_STORE_TEXT off).")
    steps = TraceStepsField()
    hints = HintSerializer(many=True)
    degraded = BlankAsNullField(allow_null=True)
    took_ms = serializers.FloatField()
    created_at = serializers.DateTimeField()
