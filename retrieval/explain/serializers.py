"""Explain's shapes and its bodies: `explain_response` builds the structured answer for an
agent and the same answer as sentences for a person, from one Explanation
(retrieval.explain.selectors); `enrichment_explain_response` the same for enrichment,
from one EnrichmentExplanation."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.conf import settings
from rest_framework import serializers

from approvals.serializers import gate_state_field, request_id_field
from catalog.auth import RequestUser, get_catalog_for_caller
from catalog.errors import ConflictError
from catalog.models import Agent
from catalog.ranking import MODES
from catalog.reads import replica_read
from catalog.rest.fields import StrictCharField, StrictRegexField, StrictSlugField
from retrieval.enrichment.caller import Caller
from retrieval.enrichment.pipeline import SURFACES
from retrieval.enrichment.serializers import REFERENCE_ID, catalogs_field
from retrieval.explain.selectors import (
    ComponentStage,
    EnrichmentExplanation,
    Explanation,
    document_explain,
    reference_explain,
)
from retrieval.search.selectors import SearchOptions
from retrieval.search.serializers import SearchInputSerializer, default_top_k
from retrieval.search.vector import SearchUnavailable

OUTCOMES = ("shown", "below_top_k", "not_retrieved", "withheld", "no_source", "no_document", "not_indexed")


class ExplainInputSerializer(SearchInputSerializer):
    """A search's fields (the search explained is that one), and the document."""

    source = StrictSlugField(  # type: ignore[assignment]  # the stubs' Field.source: see catalog.apis
        max_length=100, help_text="The source's slug (a search hit's `source`).")
    document = StrictCharField(max_length=1024, help_text="The document's path within the source (a search "
                                                          "hit's `document_id`).")


class CatalogStageSerializer(serializers.Serializer[dict[str, Any]]):
    source_found = serializers.BooleanField()
    source_status = serializers.CharField(allow_null=True, help_text="new, indexing, ready, lexical_only or error.")
    last_error = serializers.CharField(allow_null=True, help_text="The first line of the source's last error.")
    document_found = serializers.BooleanField(
        allow_null=True, help_text="Null where it was not looked for: no such source, or the source is withheld.")
    chunks = serializers.IntegerField(min_value=0, allow_null=True, help_text="The document's indexed chunks.")


class GovernanceStageSerializer(serializers.Serializer[dict[str, Any]]):
    withheld = serializers.BooleanField()
    state = gate_state_field(help_text="`allowed` where nothing withholds it; else the approval gate's state.")
    reason = serializers.CharField(allow_blank=True)
    request_id = request_id_field()


class TermPartSerializer(serializers.Serializer[dict[str, Any]]):
    term = serializers.CharField(help_text="The query term as analysed (lower case, stemmed).")
    in_catalog = serializers.BooleanField(help_text="False: no chunk of the catalog holds it.")
    in_chunk = serializers.BooleanField(help_text="The document's best BM25 chunk holds it.")
    score = serializers.FloatField(help_text="Its part of that chunk's BM25 score (the parts sum to it).")
    feedback = serializers.BooleanField(help_text="Added by the catalog's BM25 feedback (from the query's best "
                                                  "first hits), not in the query itself.")


class ComponentStageSerializer(serializers.Serializer[dict[str, Any]]):
    ran = serializers.BooleanField(help_text="The mode ranked this list.")
    chunk_id = serializers.CharField(allow_null=True, help_text="The document's best chunk here.")
    score = serializers.FloatField(allow_null=True, help_text="BM25 score, or cosine similarity (null: no "
                                                              "embedding, or no query vector).")
    rank = serializers.IntegerField(min_value=1, allow_null=True,
                                    help_text="Its place in the list; null: not in it, below `depth`.")
    depth = serializers.IntegerField(min_value=1, help_text="How many chunks the list was read to.")


class Bm25StageSerializer(ComponentStageSerializer):
    terms = TermPartSerializer(many=True)


class FusionStageSerializer(serializers.Serializer[dict[str, Any]]):
    mode = serializers.ChoiceField(choices=MODES)
    fusion = serializers.CharField(allow_null=True)
    rank = serializers.IntegerField(min_value=1, allow_null=True, help_text="Null: in no list fused.")
    score = serializers.FloatField(allow_null=True)
    top_k = serializers.IntegerField(min_value=1)
    depth = serializers.IntegerField(min_value=1)
    dedup = serializers.BooleanField()
    candidates = serializers.IntegerField(min_value=0, help_text="What was ranked before the cut to top_k.")


class ExplainOutputSerializer(serializers.Serializer[dict[str, Any]]):
    outcome = serializers.ChoiceField(choices=OUTCOMES)
    verdict = serializers.CharField(help_text="One line: `shown at rank 3`, `ranked 14: below top_k 10`, ...")
    rank = serializers.IntegerField(min_value=1, allow_null=True, help_text="Its rank in the search, shown or not.")
    mode = serializers.CharField(allow_blank=True, help_text="The mode that ran (bm25 when degraded); blank "
                                                             "where the answer stopped before ranking.")
    degraded = serializers.CharField(allow_null=True)
    catalog = CatalogStageSerializer()
    governance = GovernanceStageSerializer(allow_null=True)
    bm25 = Bm25StageSerializer(allow_null=True)
    vector = ComponentStageSerializer(allow_null=True)
    fusion = FusionStageSerializer(allow_null=True)
    sentences = serializers.ListField(child=serializers.CharField(), help_text="The same, for a person.")


def explain_response(caller: RequestUser, params: dict[str, Any]) -> dict[str, Any]:
    """The explain endpoint's body for validated `params`: read where search reads
    (catalog.reads), raising nothing."""
    agent = caller if isinstance(caller, Agent) else None
    params = {"top_k": default_top_k(caller), **params}
    catalog = get_catalog_for_caller(caller, params.pop("catalog"))
    query, source, path = params.pop("query"), params.pop("source"), params.pop("document")
    try:
        explanation = replica_read(agent=agent, read=lambda: document_explain(
            catalog=catalog, query=query, source=source, path=path, options=SearchOptions(**params), agent=agent))
    except SearchUnavailable as exc:
        raise ConflictError(f"vector search is unavailable: {exc}", code="embeddings_unavailable") from None
    body = asdict(explanation)
    body["sentences"] = explanation_sentences(explanation, source, path)
    return ExplainOutputSerializer(body).data


def explanation_sentences(explanation: Explanation, source: str, path: str) -> list[str]:
    """The stages as sentences, ending with the verdict."""
    catalog = explanation.catalog
    if not catalog.source_found:
        return [f"Verdict: {explanation.verdict}."]
    sentences = [f"Source {source}'s status is {catalog.source_status}"
                 + (f"; its last error: {catalog.last_error}." if catalog.last_error else ".")]
    governance = explanation.governance
    if governance is not None and governance.withheld:
        return [*sentences, f"It is withheld from you ({governance.state}): {governance.reason}.",
                f"Verdict: {explanation.verdict}."]
    if catalog.document_found:
        sentences.append(f"Document {path} has {catalog.chunks} indexed chunk{'' if catalog.chunks == 1 else 's'}.")
    if explanation.degraded:
        sentences.append(f"Search fell back to BM25 alone: {explanation.degraded}.")
    if explanation.bm25 is not None:
        sentences += _bm25_sentences(explanation.bm25)
    if explanation.vector is not None and explanation.vector.ran:
        sentences.append(_vector_sentence(explanation.vector))
    fusion = explanation.fusion
    if fusion is not None and fusion.rank is not None:
        sentences.append(f"It ranks {fusion.rank} of {fusion.candidates} in the {fusion.mode} ranking "
                         f"(score {fusion.score:.4g}), against top_k {fusion.top_k}"
                         + (", one chunk per document." if fusion.dedup else "."))
    return [*sentences, f"Verdict: {explanation.verdict}."]


def _bm25_sentences(stage: ComponentStage) -> list[str]:
    own = [term for term in stage.terms if not term.feedback]
    matched = [f"{term.term} ({term.score:.3g})" for term in own if term.in_chunk]
    missing = [term.term + ("" if term.in_catalog else " (in no chunk of the catalog)")
               for term in own if not term.in_chunk]
    added = [f"{term.term} ({term.score:.3g})" if term.in_chunk else term.term
             for term in stage.terms if term.feedback]
    sentences = [f"Its best BM25 chunk {stage.chunk_id} scores {stage.score:.4g}"
                 + (f", rank {stage.rank} of the {stage.depth} read." if stage.rank else
                    f", not among the {stage.depth} read." if stage.ran else " (BM25 did not rank this mode).")]
    if matched:
        sentences.append("It holds the query terms " + ", ".join(matched) + ".")
    if missing:
        sentences.append("It lacks the query terms " + ", ".join(missing) + ".")
    if added:
        sentences.append("Feedback from the best first hits added the terms " + ", ".join(added)
                         + " (with the part of the score each adds, where it holds it).")
    return sentences


def _vector_sentence(stage: ComponentStage) -> str:
    if stage.score is None:
        return "None of its chunks has an embedding."
    return (f"Its most similar chunk {stage.chunk_id} has cosine similarity {stage.score:.4f}"
            + (f", rank {stage.rank} of the {stage.depth} read." if stage.rank else
               f", not among the {stage.depth} read."))


# --- enrichment ---------------------------------------------------------------------------------

HINT_OUTCOMES = ("expanded", "pinned", "hinted", "cut", "not_hinted", "already_selected", "not_selectable",
                 "withheld", "ambiguous", "no_reference")
PASSES = ("mention", "path", "tag", "semantic", "link")


class EnrichmentExplainInputSerializer(serializers.Serializer[None]):
    """The text enrich would read, and the reference asked about."""

    prompt = StrictCharField(max_length=settings.LECTERN_MAX_ENRICH_CHARS, trim_whitespace=False,
                             help_text="The text an agent would enrich (enrich's `text`).")
    reference = StrictRegexField(REFERENCE_ID, max_length=200,
                                 help_text="The reference: `id` or `catalog/id` (a leading @ is allowed).")
    surface = serializers.ChoiceField(choices=SURFACES, default="prompt",
                                      help_text="prompt (a user message) or tool_result, as for enrich.")
    catalogs = catalogs_field()


class PassStageSerializer(serializers.Serializer[dict[str, Any]]):
    name = serializers.ChoiceField(choices=PASSES)
    ran = serializers.BooleanField(help_text="False: the pass did not run (the path pass on a prompt; the "
                                             "semantic pass without an embedding model).")
    matched = serializers.BooleanField(help_text="This pass found the reference.")
    found = serializers.ListField(child=serializers.CharField(), help_text="What it matched: `@id`, tags, the "
                                                                          "path read, the references linking to it.")
    note = serializers.CharField(allow_blank=True, help_text="Why it did not find it, or what decided it.")
    score = serializers.FloatField(allow_null=True, help_text="semantic: the text's cosine similarity to the "
                                                              "reference's profile.")
    threshold = serializers.FloatField(allow_null=True, help_text="semantic: what it had to reach, "
                                                                  "max(floor, best - margin).")
    floor = serializers.FloatField(allow_null=True, help_text="semantic: the profile's semantic_threshold.")
    margin = serializers.FloatField(allow_null=True, help_text="semantic: the profile's semantic_margin.")
    best = serializers.FloatField(allow_null=True, help_text="semantic: the best match the threshold was "
                                                             "measured from.")


class EnrichmentExplainOutputSerializer(serializers.Serializer[dict[str, Any]]):
    outcome = serializers.ChoiceField(choices=HINT_OUTCOMES)
    verdict = serializers.CharField(help_text="One line: `hinted (the tag pass)`, `not hinted: no pass found it`, ...")
    reference = serializers.CharField(help_text="As asked.")
    catalog = serializers.CharField(allow_null=True)
    source_id = serializers.CharField(allow_null=True)
    governance = GovernanceStageSerializer(allow_null=True)
    passes = PassStageSerializer(many=True, help_text="Every pass, most specific first; for a withheld "
                                                      "reference only those its hint names.")
    max_hints = serializers.IntegerField(min_value=1, allow_null=True)
    degraded = serializers.CharField(allow_null=True)
    sentences = serializers.ListField(child=serializers.CharField(), help_text="The same, for a person.")


def enrichment_explain_response(caller: RequestUser, params: dict[str, Any]) -> dict[str, Any]:
    """The enrichment explain endpoint's body for validated `params` (REST and the MCP tool)."""
    explanation = reference_explain(caller=Caller.of(caller, params.get("catalogs")), text=params["prompt"],
                                    surface=params["surface"], reference=params["reference"].lstrip("@"))
    body = asdict(explanation)
    body["sentences"] = enrichment_sentences(explanation)
    return EnrichmentExplainOutputSerializer(body).data


def enrichment_sentences(explanation: EnrichmentExplanation) -> list[str]:
    """The passes as sentences, ending with the verdict."""
    sentences = []
    governance = explanation.governance
    if governance is not None and governance.withheld:
        sentences.append(f"It is withheld from you ({governance.state}): {governance.reason}.")
    if explanation.degraded:
        sentences.append(f"Enrichment ran without meaning: {explanation.degraded}.")
    for stage in explanation.passes:
        if stage.matched:
            found = f": {', '.join(stage.found)}" if stage.found else ""
            score = f" (similarity {stage.score:.4f})" if stage.score is not None else ""
            sentences.append(f"The {stage.name} pass found it{found}{score}"
                             + (f"; {stage.note}." if stage.note else "."))
        elif stage.ran:
            sentences.append(f"The {stage.name} pass did not find it: {stage.note}.")
        else:
            sentences.append(f"The {stage.name} pass did not run: {stage.note}.")
    return [*sentences, f"Verdict: {explanation.verdict}."]
