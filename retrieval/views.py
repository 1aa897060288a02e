"""Curator pages: the home page lists catalogs and tries searches (htmx)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from catalog.auth import visible_catalogs
from catalog.embedder import embedder_status
from retrieval.forms import SearchForm
from retrieval.search.selectors import SearchOptions, chunk_search
from retrieval.search.vector import SearchUnavailable


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    catalogs = visible_catalogs(request.user).annotate(source_count=Count("sources")).order_by("slug")
    form = SearchForm(catalogs=catalogs)
    return render(request, "retrieval/home.html", {
        "catalogs": catalogs, "form": form, "embeddings": embedder_status(),
    })


@login_required
@require_GET
def search_results(request: HttpRequest) -> HttpResponse:
    """One view, two renders: htmx gets the results partial, a plain GET the page."""
    catalogs = visible_catalogs(request.user)
    form = SearchForm(request.GET, catalogs=catalogs)
    context: dict[str, object] = {"form": form, "result": None, "error": None}
    if form.is_valid():
        data = form.cleaned_data
        options = SearchOptions(mode=data["mode"], top_k=data["top_k"], dedup=data["dedup"])
        try:
            # agent=None: a person, under the approval gate's rule for people
            context["result"] = chunk_search(catalog=data["catalog"], query=data["query"], options=options,
                                             agent=None)
        except SearchUnavailable as exc:
            context["error"] = f"Vector search is unavailable: {exc}"
    else:
        context["error"] = "; ".join(f"{field}: {' '.join(map(str, errs))}" for field, errs in form.errors.items())
    template = "retrieval/partials/results.html" if request.headers.get("HX-Request") else "retrieval/search.html"
    status = 400 if context["error"] and not form.is_valid() else 200
    return render(request, template, context, status=status)
