"""The playground (curators): run a search query, a prompt or a tool result as an agent
or as a person, and see what it would get: ranked hits with their component scores
and ranks and the query's terms marked, or the enriched text with its trace; withheld
references named with their reason and request, never their content.

Runs are dry runs (runs.py says why): nothing is written in the agent's name. The form
posts (any text up to the limit); a run's link is a GET with the same fields, answered
by running it again, and htmx puts that link in the address bar after a run."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods
from django_htmx.http import push_url

from catalog.auth import CURATOR_GROUP, role_required
from catalog.embedder import embedder_status
from catalog.errors import ApplicationError
from catalog.web import from_htmx
from retrieval.search.forms import SHARE_MAX, PlaygroundForm
from retrieval.search.runs import EnrichRun, SearchRun, enrich_run, search_run
from retrieval.search.selectors import SearchOptions
from retrieval.search.vector import SearchUnavailable

curators = role_required(CURATOR_GROUP)


@curators
@require_http_methods(["GET", "POST"])
def playground(request: HttpRequest) -> HttpResponse:
    """The empty form (a GET without fields), or a run: the form as posted, or a link's
    fields. One view, two renders: htmx gets the form and run partial, else the page."""
    data = request.POST if request.method == "POST" else request.GET if request.GET else None
    form = PlaygroundForm(data)
    run: SearchRun | EnrichRun | None = None
    share: str | None = None
    if form.is_bound and form.is_valid():
        run = _run(request, form)
        if run is not None:
            query = form.share_query()
            share = f"{reverse('playground')}?{query}" if query is not None else None
    context = {"form": form, "run": run, "share": share, "share_max": SHARE_MAX, "embeddings": embedder_status()}
    htmx = bool(from_htmx(request))
    template = "retrieval/playground/partials/workbench.html" if htmx else "retrieval/playground/page.html"
    response = render(request, template, context, status=400 if form.is_bound and form.errors else 200)
    if htmx and share is not None:
        push_url(response, share)  # the address bar holds the run's link, as a reload reruns it
    return response


def _run(request: HttpRequest, form: PlaygroundForm) -> SearchRun | EnrichRun | None:
    """The run the form asks for, or None with the reason on the form."""
    data: dict[str, Any] = form.cleaned_data
    try:
        if form.searching:
            options = SearchOptions(mode=data["mode"] or None, top_k=form.hits(), dedup=data["dedup"])
            return search_run(catalog=data["catalog"], query=data["text"], options=options, agent=data["agent"])
        assert isinstance(request.user, User)  # role_required lets only people through
        return enrich_run(person=request.user, agent=data["agent"], catalog=data["catalog"], text=data["text"],
                          surface=data["kind"])
    except SearchUnavailable as exc:
        form.add_error("mode", f"Search by meaning is unavailable ({exc}): choose bm25.")
    except ApplicationError as exc:  # a catalog the caller may not read (the form checks first)
        form.add_error("catalog", str(exc))
    return None
