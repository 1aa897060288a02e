"""The traces pages (curators): recent enrichments, filtered by caller, reference,
withheld, kind of text and date; and one trace told pass by pass in plain words.

**Decision: curators only.** A trace holds the text an agent sent (a user's prompt, a
tool's output: anything a conversation held), so it is shown to those who answer for
what enrichment does, the curators, as the trace API already allows. Reviewers judge
a reference's content, which their request pages show with the excerpt that raised it;
they do not need agents' whole conversations for that."""

from __future__ import annotations

from urllib.parse import urlencode
from uuid import UUID

from django.conf import settings
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from catalog.auth import CURATOR_GROUP, role_required
from catalog.web import from_htmx
from retrieval.models import Trace
from retrieval.search.forms import SHARE_MAX
from retrieval.traces.forms import TraceFilterForm
from retrieval.traces.selectors import story_of, trace_get, trace_rows, traces_filtered

curators = role_required(CURATOR_GROUP)

TRACES_PAGE = 50


@curators
@require_GET
def trace_list(request: HttpRequest) -> HttpResponse:
    """Newest first: a constant number of statements (the filters' choices, the count,
    the page of traces)."""
    form = TraceFilterForm(request.GET)
    traces = traces_filtered(**form.cleaned_data) if form.is_valid() else Trace.objects.none()
    page = Paginator(traces, TRACES_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {"form": form, "page": page, "rows": trace_rows(list(page.object_list)), "query": query.urlencode(),
               "filtered": any(request.GET.get(name) for name in form.fields),
               "retention_days": settings.LECTERN_TRACE_RETENTION_DAYS}
    template = "retrieval/traces/partials/traces_table.html" if from_htmx(request) else "retrieval/traces/list.html"
    return render(request, template, context, status=200 if form.is_valid() else 400)


@curators
@require_GET
def trace_page(request: HttpRequest, trace_id: UUID) -> HttpResponse:
    trace = trace_get(trace_id)
    return render(request, "retrieval/traces/trace.html", {
        "trace": trace, "story": story_of(trace), "rerun": _rerun_link(trace)})


def _rerun_link(trace: Trace) -> str | None:
    """The playground link running this text again as the same caller, today (None when
    the text was not kept, or is too long for a link)."""
    if trace.text is None or not trace.text.strip() or trace.surface in (Trace.Surface.CONVERSATION,
                                                                          Trace.Surface.SEARCH):
        return None  # a conversation is not one text the playground runs; a search names its catalog
    params = {"kind": trace.surface, "text": trace.text}
    if trace.agent is not None and trace.agent.is_active:
        params["agent"] = trace.agent.name
    link = f"{reverse('playground')}?{urlencode(params)}"
    return link if len(link) <= SHARE_MAX else None
