"""The playground's "why not this document?" (curators): after a search, name a document
and see where it stood in that search, stage by stage, as explain answers an agent
(retrieval.explain.selectors), the caller and the search options the playground's own.
A read: nothing is raised or recorded, as for the run it explains."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from catalog.auth import CURATOR_GROUP, role_required
from catalog.embedder import embedder_status
from catalog.models import Catalog
from catalog.web import from_htmx
from retrieval.explain.forms import WhyNotForm
from retrieval.explain.selectors import Explanation, document_explain, documents_matching
from retrieval.explain.serializers import explanation_sentences
from retrieval.search.forms import SHARE_MAX
from retrieval.search.runs import search_run
from retrieval.search.selectors import SearchOptions
from retrieval.search.vector import SearchUnavailable

curators = role_required(CURATOR_GROUP)
OUTCOME_LABELS = {"shown": "shown", "below_top_k": "below the cut-off", "not_retrieved": "not retrieved",
                  "withheld": "withheld", "no_source": "no such source", "no_document": "no such document",
                  "not_indexed": "not indexed"}

@dataclass
class WhyNot:
    explanation: Explanation
    source: str
    path: str
    sentences: list[str]

    @property
    def label(self) -> str:
        return OUTCOME_LABELS[self.explanation.outcome]


@curators
@require_POST
def why_not(request: HttpRequest) -> HttpResponse:
    """The document's place in the search the form carries. One view, two renders: htmx
    gets the why-not section, else the playground page with the search run again and
    the answer under its hits."""
    form = WhyNotForm(request.POST)
    answer = _explain(form) if form.is_valid() else None
    status = 400 if form.errors else 200
    context: dict[str, Any] = {"form": form, "answer": answer}
    if from_htmx(request):
        return render(request, "retrieval/explain/partials/why_not.html", context, status=status)
    data = form.cleaned_data
    if "catalog" in data and "text" in data and data.get("kind") and not form.has_error(None) \
            and not form.has_error("mode"):
        options = SearchOptions(mode=data["mode"] or None, top_k=form.hits(), dedup=data["dedup"])
        try:
            context["run"] = search_run(catalog=data["catalog"], query=data["text"], options=options,
                                        agent=data["agent"])
        except SearchUnavailable as exc:  # the answer says so already; the hits cannot be shown either
            form.add_error("mode", f"Search by meaning is unavailable ({exc}): choose bm25.")
            status = 400
        query = form.share_query()
        context["share"] = f"{reverse('playground')}?{query}" if query is not None else None
    context.update(share_max=SHARE_MAX, embeddings=embedder_status())
    return render(request, "retrieval/playground/page.html", context, status=status)


def _explain(form: WhyNotForm) -> WhyNot | None:
    """explain as the form's caller, or None with the reason on the form."""
    data = form.cleaned_data
    options = SearchOptions(mode=data["mode"] or None, top_k=form.hits(), dedup=data["dedup"])
    try:
        explanation = document_explain(catalog=data["catalog"], query=data["text"], source=data["source"],
                                       path=data["path"], options=options, agent=data["agent"])
    except SearchUnavailable as exc:
        form.add_error("document", f"Search by meaning is unavailable ({exc}): run the search with bm25.")
        return None
    return WhyNot(explanation, data["source"], data["path"],
                  explanation_sentences(explanation, data["source"], data["path"]))


@curators
@require_GET
def why_not_documents(request: HttpRequest) -> HttpResponse:
    """The catalog's documents holding what was typed, as options for the document field."""
    catalog = Catalog.objects.live().filter(slug=request.GET.get("catalog", "")).first()
    documents = documents_matching(catalog=catalog, text=request.GET.get("document", "")) if catalog else []
    return render(request, "retrieval/explain/partials/documents.html", {"documents": documents})
