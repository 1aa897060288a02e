"""The enrichment operations' shapes and bodies: enrich, listReferences,
selectReferences, reading a selected reference's files and the startup instructions.
Each `*_response` builds the body that REST (retrieval.enrichment.apis) and the MCP tool
(retrieval.mcp.tools) both return, rendered through the output serializers, so the
published schema is the code's. The hint shapes are a trace's too (retrieval.traces)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from rest_framework import serializers

from approvals.serializers import gate_state_field, request_id_field
from catalog.auth import RequestUser
from catalog.models import Agent, ReferenceSource
from catalog.rest.fields import (
    StrictCharField,
    StrictRegexField,
    StrictSlugField,
)
from retrieval.citations.selectors import citations_of
from retrieval.citations.services import served_trace_record
from retrieval.enrichment.caller import Caller
from retrieval.enrichment.formatting import CONTENT_KINDS
from retrieval.enrichment.instructions import agent_instructions
from retrieval.enrichment.pipeline import SURFACES, enrich
from retrieval.enrichment.references import list_references, read_reference_file
from retrieval.models import Trace

VIAS = ["mention", "tag", "semantic", "path", "link", "search"]  # search: a search trace's hints


NO_CATALOG = "`not_found`: a catalog in `catalogs` does not exist for this caller."



# A reference id as callers write it: `id` or `catalog/id`, with or without `@`.
REFERENCE_ID = r"^@?([A-Za-z0-9_-]+/)?[A-Za-z0-9_-]+$"


def _id_field() -> StrictRegexField:
    return StrictRegexField(REFERENCE_ID, max_length=200)


def catalogs_field() -> serializers.ListField:
    return serializers.ListField(child=StrictSlugField(max_length=64), max_length=50, required=False,
                                 help_text="Restrict to these catalogs (default: all the caller may see).")


# --- shapes shared by several responses --------------------------------------------------


class LinkParentSerializer(serializers.Serializer[dict[str, Any]]):
    source_id = serializers.CharField(help_text="The reference that points at this one.")
    via = serializers.ChoiceField(choices=["mention", "link"])
    evidence = serializers.CharField(help_text="The `@id` mention or the markdown link target.")


class ReasonSerializer(serializers.Serializer[dict[str, Any]]):
    via = serializers.ChoiceField(choices=VIAS)
    matched = serializers.ListField(child=serializers.CharField(), help_text="What this pass matched.")


class HintSerializer(serializers.Serializer[dict[str, Any]]):
    source_id = serializers.CharField()
    catalog = serializers.CharField()
    # Not required: traces stored before it existed lack it.
    ref = serializers.CharField(
        required=False,
        help_text="The id the injected text names it by, to write as `@ref` or pass to selectReferences: "
                  "`source_id`, or `catalog/source_id` when the caller may read several catalogs.")
    name = serializers.CharField()
    matched = serializers.ListField(child=serializers.CharField(),
                                    help_text="What matched: `@id`, tags, the path read, or the mentioning ids.")
    via = serializers.ChoiceField(choices=VIAS, help_text="The most specific pass that found it: "
                                                          "mention, path, link, tag, then semantic.")
    reasons = ReasonSerializer(many=True, required=False,  # traces stored before it existed lack it
                               help_text="Every pass that found it, most specific first (the first is `via`).")
    score = serializers.FloatField(allow_null=True, help_text="Cosine similarity to the text, when computed.")
    injected = serializers.ChoiceField(
        choices=["expand", "pin", "hint", "cut", "none", "context", "search"],
        help_text="expand: full instructions; pin: the file read; hint: a line in the hint block; "
                  "cut: beyond max_hints; none: withheld; context: a passage added to a conversation's "
                  "[context: ...]; search: passages returned by a search (in a search's trace).")
    withheld = serializers.BooleanField()
    reason = serializers.CharField(help_text="Why withheld or cut; empty otherwise.")
    request_id = request_id_field(required=False)  # traces stored before it existed lack it
    # traces stored before they existed lack these two
    approval_id = serializers.IntegerField(allow_null=True, required=False, help_text=(
        "The approval request that let this governed reference through (null: it needs none, or is withheld)."))
    source_fingerprint = serializers.CharField(required=False, allow_blank=True, allow_null=True, help_text=(
        "The reference's content fingerprint when it was surfaced: what its approval was given for (null "
        "where it is withheld)."))
    parents = LinkParentSerializer(many=True, required=False, help_text="For `via: link`: who points at it.")


class PinnedReferenceSerializer(serializers.Serializer[dict[str, Any]]):
    source_id = serializers.CharField()
    catalog = serializers.CharField()
    name = serializers.CharField()
    path = serializers.CharField(help_text="The file read, inside the reference.")
    withheld = serializers.BooleanField()
    reason = serializers.CharField()
    request_id = request_id_field()
    # named like Field.context, which the stubs declare (DRF's metaclass takes declared
    # fields off the class, so there is no clash at run time)
    context = serializers.CharField(allow_null=True,  # type: ignore[assignment]
                                    help_text="The block appended to the text (root markdown files only).")


# --- enrich -----------------------------------------------------------------------------------


class EnrichInputSerializer(serializers.Serializer[None]):
    text = StrictCharField(max_length=settings.LECTERN_MAX_ENRICH_CHARS, trim_whitespace=False)
    surface = serializers.ChoiceField(choices=SURFACES)
    catalogs = catalogs_field()
    selected = serializers.ListField(child=_id_field(), max_length=500, required=False,
                                     help_text="References already selected in this conversation: not "
                                               "hinted. Those the server recorded for this agent "
                                               "(selectReferences, @id expansions) count without being "
                                               "named here.")
    paths = serializers.ListField(child=StrictCharField(max_length=1024), max_length=100, required=False,
                                  help_text="Files the tool read (for path containment).")


class EnrichOutputSerializer(serializers.Serializer[dict[str, Any]]):
    text = serializers.CharField(help_text="The text with earlier injections stripped and the new blocks added.")
    hints = HintSerializer(many=True)
    pinned_reference = PinnedReferenceSerializer(allow_null=True)
    trace_id = serializers.UUIDField()
    took_ms = serializers.FloatField()
    degraded = serializers.CharField(allow_null=True)


def enrich_response(user: RequestUser, params: dict[str, Any]) -> dict[str, Any]:
    """The enrich endpoint's body for validated `params` (REST and the MCP tool)."""
    caller = Caller.of(user, params.get("catalogs"))
    result = enrich(caller=caller, text=params["text"], surface=params["surface"],
                               selected=params.get("selected"), paths=params.get("paths"))
    return EnrichOutputSerializer({
        "text": result.text, "hints": result.hints, "pinned_reference": result.pinned_reference,
        "trace_id": result.trace.id, "took_ms": result.trace.took_ms, "degraded": result.degraded}).data


# --- references -------------------------------------------------------------------------------


class ReferenceSerializer(serializers.Serializer[dict[str, Any]]):
    source_id = serializers.CharField()
    catalog = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    mode = serializers.ChoiceField(choices=ReferenceSource.Mode.values)
    tags = serializers.ListField(child=serializers.CharField())
    requires_approval = serializers.BooleanField()
    index_status = serializers.ChoiceField(choices=ReferenceSource.Status.values)
    withheld = serializers.BooleanField()
    reason = serializers.CharField(help_text="Why withheld; empty otherwise.")
    request_id = request_id_field(help_text="The approval request of this agent for the reference as it is now, "
                                            "when withheld and one exists (listing raises none).")


class ReferenceListQuerySerializer(serializers.Serializer[None]):
    # A query parameter given empty is read as absent (DRF's rule for form-style
    # input), so the schema admits "" for each.
    tag = serializers.CharField(max_length=100, required=False, default="", allow_blank=True,
                                help_text="Only references with this tag.")
    q = serializers.CharField(max_length=200, required=False, default="", allow_blank=True,
                              help_text="Only references whose id, name, description or tags contain it.")
    catalog = serializers.RegexField(r"^[-a-zA-Z0-9_]+$", max_length=64, required=False, allow_blank=True,
                                     help_text="Only this catalog (default: all the caller may see).")


class ReferenceListOutputSerializer(serializers.Serializer[dict[str, Any]]):
    references = ReferenceSerializer(many=True)
    count = serializers.IntegerField(min_value=0)


def references_response(user: RequestUser, params: dict[str, Any]) -> dict[str, Any]:
    caller = Caller.of(user, [params["catalog"]] if params.get("catalog") else None)
    references = list_references(caller=caller, tag=params["tag"], text=params["q"])
    return ReferenceListOutputSerializer({"references": references, "count": len(references)}).data


class SelectedReferenceSerializer(serializers.Serializer[dict[str, Any]]):
    source_id = serializers.CharField()
    catalog = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    files = serializers.ListField(child=serializers.CharField(), help_text="Paths readable with the file API.")
    contents = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text=f"Files per conventional sub-folder ({', '.join(sorted(CONTENT_KINDS))}).")
    instructions = serializers.CharField(help_text="The expansion block, as enrichment would inject it.")


class WithheldReferenceSerializer(serializers.Serializer[dict[str, Any]]):
    source_id = serializers.CharField()
    catalog = serializers.CharField()
    name = serializers.CharField()
    reason = serializers.CharField()
    state = gate_state_field()
    request_id = request_id_field()


class ReferenceSelectInputSerializer(serializers.Serializer[None]):
    ids = serializers.ListField(child=_id_field(), max_length=100, required=False, default=list,
                                help_text="`id` or `catalog/id`, with or without `@`.")
    tags = serializers.ListField(child=StrictCharField(max_length=100), max_length=50, required=False,
                                 default=list)
    catalogs = catalogs_field()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs["ids"] and not attrs["tags"]:
            raise serializers.ValidationError("give at least one id or tag")
        return attrs


class ReferenceSelectOutputSerializer(serializers.Serializer[dict[str, Any]]):
    selected = SelectedReferenceSerializer(many=True)
    withheld = WithheldReferenceSerializer(many=True)


class ReferenceFileQuerySerializer(serializers.Serializer[None]):
    path = serializers.CharField(max_length=1024, help_text="The file's path, as `files` lists it.")


class ReferenceFileOutputSerializer(serializers.Serializer[dict[str, Any]]):
    source_id = serializers.CharField()
    catalog = serializers.CharField()
    path = serializers.CharField()
    title = serializers.CharField(help_text="An indexed document's title; the file name otherwise.")
    sha256 = serializers.CharField(help_text="Of the content (UTF-8 text, or the bytes).")
    encoding = serializers.ChoiceField(
        choices=["utf-8", "base64"],
        help_text="utf-8: `text` is the file's text; base64: the file is not UTF-8 text (an image, an archive) "
                  "and `text` holds its bytes in base64.")
    text = serializers.CharField(allow_blank=True)
    cite = serializers.CharField(allow_null=True, help_text="An indexed document's cite (its whole text, "
                                                            "as for a search hit); null for any other file.")
    fingerprint = serializers.CharField(allow_null=True, help_text="sha256 of `text`, for a cited file.")
    byte_start = serializers.IntegerField(allow_null=True)
    byte_end = serializers.IntegerField(allow_null=True)
    approval_id = serializers.IntegerField(allow_null=True, help_text="The approval request that let it through.")


@dataclass
class _WholeDocument:
    """An indexed document read whole, as citations_of cites a hit."""

    source_pk: int
    source: str
    document_id: str
    content: str
    byte_offset: int = 0


UNCITED_FILE = {"cite": None, "fingerprint": None, "byte_start": None, "byte_end": None, "approval_id": None}


def reference_file_response(user: RequestUser, *, catalog: str, source_id: str, path: str) -> dict[str, Any]:
    """The file endpoint's body (REST and the MCP tool). An indexed document's text is
    cited and, for an agent, kept with a trace of the read (surface `file`), so a curator
    resolves its cite to what was served after the source changed."""
    caller = Caller.of(user, [catalog])
    found = read_reference_file(caller=caller, catalog=catalog, source_id=source_id, path=path)
    cited = dict(UNCITED_FILE)
    if found.source_pk:
        target = next(c for c in caller.catalogs if c.slug == catalog)
        [citation] = citations_of(catalog=target, agent=caller.agent, hits=[
            _WholeDocument(found.source_pk, source_id, found.path, found.text)])
        cited = citation.fields()
        if caller.agent is not None:
            served_trace_record(trace=Trace(
                agent=caller.agent, caller=caller.name, surface=Trace.Surface.FILE, text=None, steps=[{
                    "pass": "file", "ms": 0.0, "catalog": catalog, "ref": f"{catalog}/{source_id}", "path": found.path,
                    "approval_id": citation.approval_id}], hints=[], took_ms=0.0), citations=[citation])
    body = {key: value for key, value in found.__dict__.items() if key != "source_pk"}
    return ReferenceFileOutputSerializer({"source_id": source_id, "catalog": catalog, **body, **cited}).data


# --- startup instructions ---------------------------------------------------------------------


class InstructionSourceSerializer(serializers.Serializer[dict[str, Any]]):
    source_id = serializers.CharField()
    catalog = serializers.CharField()
    name = serializers.CharField()
    via = serializers.ChoiceField(choices=["auto", "preselected", "link"])
    tokens = serializers.IntegerField(min_value=0, help_text="Tokens of its section; 0 unless included whole.")
    included = serializers.ChoiceField(
        choices=["content", "listed", "omitted", "withheld"],
        help_text="content: loaded whole; listed: named with its files, or only by name when the budget ran "
                  "short; omitted: no room even for that (the text names it, or counts it, on one line).")
    reason = serializers.CharField(required=False, help_text="Why listed, omitted or withheld.")
    request_id = request_id_field(required=False, help_text="For `included: withheld`: the approval request "
                                                            "to follow (GET /api/v1/approvals).")
    parents = LinkParentSerializer(many=True, required=False, help_text="For `via: link`.")


class InstructionsOutputSerializer(serializers.Serializer[dict[str, Any]]):
    text = serializers.CharField(help_text="The startup block.")
    strategy = serializers.ChoiceField(choices=Agent.Strategy.values)
    token_budget = serializers.IntegerField()
    tokens = serializers.IntegerField(help_text="Tokens of `text`; never more than `token_budget`.")
    over_budget = serializers.BooleanField(help_text="Always false: kept for clients that read it.")
    sources = InstructionSourceSerializer(many=True)
    rag_hint = serializers.CharField(allow_null=True, help_text="For rag agents: how to call rag_search.")


def instructions_response(user: RequestUser) -> dict[str, Any]:
    """The instructions endpoint's body (REST and the MCP tool)."""
    instructions = agent_instructions(caller=Caller.of(user))
    return InstructionsOutputSerializer(instructions).data
