"""The tuning pages (curators): the runs of a catalog's ranking settings tuned on a
stored test set and the form that starts one; a run's page (its progress polled while
the worker has it; then the held-out figures, each fold's choice, the queries that won
and lost, and the button that applies the choice, refused with its reason unless the
held-out nDCG@10 gain is positive). Writes go through retrieval.evaluation.tuning_runs."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from catalog.auth import CURATOR_GROUP, role_required
from catalog.errors import ConflictError
from catalog.forms import apply_errors
from catalog.ranking import RankingSettings
from catalog.web import from_htmx, person
from catalog.widgets import FastSelect
from retrieval.evaluation.beir import METRICS
from retrieval.evaluation.forms import QuerySetChoice
from retrieval.evaluation.selectors import METRIC_LABELS, query_sets_listed
from retrieval.evaluation.tuning import FOLDS
from retrieval.evaluation.tuning_runs import ACTIVE, apply_problem, tuning_apply, tuning_request
from retrieval.models import TuningRun

curators = role_required(CURATOR_GROUP)
RUNS_PAGE = 25


class TuningForm(forms.Form):
    query_set = QuerySetChoice(queryset=query_sets_listed().exclude(catalog=None), widget=FastSelect,
                               empty_label="— choose a stored test set —", label="Test set",
                               help_text="Its catalog is the one tuned. Upload a set on the Evaluations page.")
    folds = forms.IntegerField(min_value=2, max_value=10, initial=FOLDS, label="Folds",
                               help_text="Each query is scored by settings chosen on the other folds' queries.")
    chunk_size = forms.IntegerField(required=False, min_value=100, max_value=20_000, label="Chunk size (optional)",
                                    help_text="Try a chunking instead: built on a hidden shadow of the catalog and "
                                              "compared with it before anything goes live.")
    chunk_overlap = forms.IntegerField(required=False, min_value=0, max_value=10_000, label="Chunk overlap")

    def chunking(self) -> dict[str, int] | None:
        size, overlap = self.cleaned_data.get("chunk_size"), self.cleaned_data.get("chunk_overlap")
        if size is None and overlap is None:
            return None
        query_set = self.cleaned_data["query_set"]
        return {"chunk_size": size if size is not None else query_set.catalog.chunk_size,
                "chunk_overlap": overlap if overlap is not None else query_set.catalog.chunk_overlap}


def _list(request: HttpRequest, form: TuningForm, status: int = 200) -> HttpResponse:
    runs = TuningRun.objects.select_related("catalog", "query_set")
    page = Paginator(runs, RUNS_PAGE).get_page(request.GET.get("page"))
    return render(request, "retrieval/tuning/list.html", {"form": form, "page": page}, status=status)


@curators
@require_GET
def tuning_list(request: HttpRequest) -> HttpResponse:
    return _list(request, TuningForm())


@curators
@require_POST
def tuning_start(request: HttpRequest) -> HttpResponse:
    form = TuningForm(request.POST)
    if form.is_valid():
        query_set = form.cleaned_data["query_set"]
        try:
            run = tuning_request(catalog=query_set.catalog, query_set=query_set, folds=form.cleaned_data["folds"],
                                 by=person(request).username, chunking=form.chunking())
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(request, f"Tuning #{run.pk} of {query_set.catalog.slug} on {query_set.name} queued.")
            url = reverse("tuning-run", args=[run.pk])
            return HttpResponseClientRedirect(url) if from_htmx(request) else redirect(url)
    return _list(request, form, status=400)


def _settings_rows(run: TuningRun) -> list[dict[str, Any]]:
    """Each setting: current, chosen, changed."""
    if run.kind == TuningRun.Kind.CHUNKING:
        return [{"name": name, "current": run.current.get(name), "chosen": run.chosen.get(name),
                 "changed": run.current.get(name) != run.chosen.get(name)} for name in ("chunk_size", "chunk_overlap")]
    current, chosen = RankingSettings.from_stored(run.current), RankingSettings.from_stored(run.chosen)
    return [{"name": name, "current": value, "chosen": getattr(chosen, name), "changed": value != getattr(chosen, name)}
            for name, value in current.__dict__.items()]


@curators
@require_GET
def tuning_page(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(TuningRun.objects.select_related("catalog", "query_set"), pk=run_id)
    context = {"run": run, "active": run.status in ACTIVE, "problem": apply_problem(run),
               "metric_rows": [{"label": METRIC_LABELS[m], **run.report["metrics"][m]} for m in METRICS
                               if m in run.report.get("metrics", {})],
               "settings_rows": _settings_rows(run) if run.chosen else []}
    template = "retrieval/tuning/partials/run_body.html" if from_htmx(request) else "retrieval/tuning/run.html"
    return render(request, template, context)


@curators
@require_POST
def tuning_apply_view(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(TuningRun.objects.select_related("catalog"), pk=run_id)
    try:
        changed = tuning_apply(run=run, by=request.user)
    except ConflictError as exc:
        messages.error(request, str(exc))
        return redirect(reverse("tuning-run", args=[run.pk]))
    messages.success(request, f"Applied to {run.catalog.slug}: {', '.join(changed) or 'nothing changed'}. "
                              "The next search ranks with them; the change is in the audit log.")
    return redirect(reverse("catalogs-detail", args=[run.catalog.slug]) + "#ranking")
