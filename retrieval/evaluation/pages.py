"""The evaluation pages (curators): the history of runs with each mode's headline
figures and the form that starts one, a run's page (its progress bar polled while the
worker runs it; then the metrics table, the bar chart, the change since the run before
on the same catalog and test set, and two modes compared query by query).

Every write goes through retrieval.evaluation (query_set_create, evaluation_request),
the services the API calls. Evaluations rank as a signed-in person's search does, so
no governed content is read and no approval is asked for; the run's page names the
sources that were left out. Reviewers do not see these pages: what they decide on is
content and agents, and a run's figures say nothing about either (docs/subsystems/evaluation.md,
"Pages").
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from catalog.auth import CURATOR_GROUP, role_required
from catalog.forms import apply_errors
from catalog.ranking import MODES, RankingSettings
from catalog.web import from_htmx, person
from retrieval.evaluation.beir import METRICS
from retrieval.evaluation.chart import Chart, bar_chart
from retrieval.evaluation.forms import MODE_HELP, STORED, CompareForm, EvaluationForm, HistoryFilterForm
from retrieval.evaluation.query_sets import query_set_create
from retrieval.evaluation.runs import ACTIVE, evaluation_request
from retrieval.evaluation.selectors import (
    METRIC_LABELS,
    metrics_with_change,
    previous_run,
    query_sets_listed,
    run_comparison,
    run_for,
    runs_listed,
)
from retrieval.models import EvaluationRun

curators = role_required(CURATOR_GROUP)

RUNS_PAGE = 25
SETS_SHOWN = 50
MODE_CHOICES = [(mode, MODE_HELP[mode]) for mode in MODES]  # the form's checkboxes, each with what it does






# --- the history and the form ------------------------------------------------------------


def _list_context(request: HttpRequest, form: EvaluationForm) -> dict[str, Any]:
    filters = HistoryFilterForm(request.GET, auto_id="id_filter_%s")  # beside the start form's fields
    runs = runs_listed()
    if filters.is_valid():
        data = filters.cleaned_data
        runs = runs.filter(**{name: value for name, value in (("catalog", data["catalog"]),
                                                               ("query_set", data["query_set"]),
                                                               ("status", data["status"])) if value})
    page = Paginator(runs, RUNS_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    sets = list(query_sets_listed()[:SETS_SHOWN + 1])
    return {"form": form, "filters": filters, "page": page, "query": query.urlencode(),
            "filtered": any(request.GET.get(name) for name in filters.fields), "mode_choices": MODE_CHOICES,
            "query_sets": sets[:SETS_SHOWN], "more_sets": len(sets) > SETS_SHOWN}


@curators
@require_GET
def evaluation_list(request: HttpRequest) -> HttpResponse:
    context = _list_context(request, EvaluationForm())
    history = from_htmx(request).target == "evaluation-history"
    template = "retrieval/evaluations/partials/history.html" if history else "retrieval/evaluations/list.html"
    return render(request, template, context, status=200 if context["filters"].is_valid() else 400)


@curators
@require_POST
def evaluation_start(request: HttpRequest) -> HttpResponse:
    """A run of the form's catalog and modes on a stored test set or on the two files
    uploaded as a new one (kept only if the run is asked for). Refused: the form with
    each error beside its field (400; htmx swaps it in place, the chosen files stay)."""
    form = EvaluationForm(request.POST, request.FILES)
    if form.is_valid():
        data = form.cleaned_data
        try:
            with transaction.atomic():
                query_set = data["query_set"] if data["test_set"] == STORED else query_set_create(
                    catalog=data["catalog"], name=data["name"], queries=data["queries"], qrels=data["qrels"],
                    by=person(request).username)
                run = evaluation_request(catalog=data["catalog"], query_set=query_set, modes=data["modes"],
                                         by=person(request).username)
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(request, f"Evaluation #{run.pk} of {data['catalog'].slug} on {query_set.name} queued: "
                                      f"{len(run.modes)} mode{'s' if len(run.modes) != 1 else ''} × "
                                      f"{query_set.query_count} queries.")
            url = reverse("evaluations-run", args=[run.pk])
            return HttpResponseClientRedirect(url) if from_htmx(request) else redirect(url)
    if from_htmx(request):
        return render(request, "retrieval/evaluations/partials/start_form.html",
                      {"form": form, "mode_choices": MODE_CHOICES}, status=400)
    return render(request, "retrieval/evaluations/list.html", _list_context(request, form), status=400)


# --- one run -------------------------------------------------------------------------------


def _chart_groups(metrics: list[dict[str, Any]]) -> Chart:
    return bar_chart([(METRIC_LABELS[metric], [(entry["mode"], entry[metric]) for entry in metrics])
                      for metric in METRICS], scale=1.0, colours=list(MODES))


def _latency_chart(metrics: list[dict[str, Any]]) -> Chart:
    return bar_chart([(label, [(entry["mode"], entry[key]) for entry in metrics])
                      for key, label in (("p50_ms", "p50 latency"), ("p95_ms", "p95 latency"))],
                     digits=1, unit=" ms", colours=list(MODES))


def _table(run: EvaluationRun, before: EvaluationRun | None) -> list[dict[str, Any]]:
    """The metrics table's rows: each metric's value, its change since `before`, and
    whether it is the best of the run's modes."""
    rows = metrics_with_change(run, before)
    best = {metric: max(row[metric] for row in rows) for metric in METRICS}
    differ = {metric: best[metric] > min(row[metric] for row in rows) for metric in METRICS}
    return [{**row, "cells": [{"value": row[metric], "best": differ[metric] and row[metric] == best[metric],
                               "change": row["change"][metric] if row["change"] else None} for metric in METRICS]}
            for row in rows]


def _chart_text(metrics: list[dict[str, Any]]) -> str:
    """What the chart shows, as a sentence for whoever cannot see it."""
    return "; ".join(f"{METRIC_LABELS[metric]}: " + ", ".join(f"{entry['mode']} {entry[metric]:.3f}"
                                                              for entry in metrics) for metric in METRICS) + "."


def _run_context(request: HttpRequest, run: EvaluationRun, compare: CompareForm | None = None) -> dict[str, Any]:
    context: dict[str, Any] = {"run": run, "active": run.status in ACTIVE, "metric_labels": METRIC_LABELS}
    if run.status != EvaluationRun.Status.SUCCEEDED:
        return context
    before = previous_run(run)
    context.update(_ranking_context(run, before))
    context.update(before=before, rows=_table(run, before), chart=_chart_groups(run.metrics),
                   chart_text=_chart_text(run.metrics), latency=_latency_chart(run.metrics),
                   latency_text="; ".join(f"{entry['mode']}: p50 {entry['p50_ms']:.1f} ms, p95 {entry['p95_ms']:.1f} ms"
                                          for entry in run.metrics) + ".")
    if len(run.modes) > 1:
        context.update(_comparison(run, compare or CompareForm.chosen(request.GET, run)))
    return context


def _ranking_context(run: EvaluationRun, before: EvaluationRun | None) -> dict[str, Any]:
    """What the run ranked with (`ranked_with`: setting -> value, {} for the defaults,
    None where the run did not record it) and, where the run before recorded its own,
    each setting changed since (`ranking_changes`: setting -> [before, now])."""
    if run.ranking is None:
        return {"ranked_with": None}
    changes = None
    if before is not None and before.ranking is not None:
        changes = RankingSettings.from_stored(before.ranking).changes(RankingSettings.from_stored(run.ranking))
    return {"ranked_with": run.ranking, "ranking_changes": changes}


def _comparison(run: EvaluationRun, form: CompareForm) -> dict[str, Any]:
    if not form.is_valid():
        return {"compare": form}
    data = form.cleaned_data
    comparison, texts = run_comparison(run, a=data["a"], b=data["b"], metric=data["metric"])
    return {"compare": form, "comparison": comparison, "texts": texts,
            "metric_label": METRIC_LABELS[data["metric"]]}


@curators
@require_GET
def evaluation_page(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run; htmx polls its body while it is queued or running, and the answer that
    finds it done is the body with the results, which polls no more."""
    run = run_for(request.user, run_id)
    context = _run_context(request, run)
    if from_htmx(request):
        return render(request, "retrieval/evaluations/partials/run_body.html", context)
    status = 400 if "compare" in context and not context["compare"].is_valid() else 200
    return render(request, "retrieval/evaluations/run.html", context, status=status)


@curators
@require_GET
def evaluation_compare(request: HttpRequest, run_id: int) -> HttpResponse:
    """Two modes of a succeeded run compared (htmx swaps the section; without scripts
    the form goes to the run's page, which reads the same fields)."""
    run = run_for(request.user, run_id)
    if run.status != EvaluationRun.Status.SUCCEEDED or len(run.modes) < 2:
        return redirect("evaluations-run", run_id=run.pk)
    if not from_htmx(request):
        return redirect(f"{reverse('evaluations-run', args=[run.pk])}?{request.GET.urlencode()}#comparison")
    form = CompareForm.chosen(request.GET, run)
    context = {"run": run, **_comparison(run, form)}
    return render(request, "retrieval/evaluations/partials/comparison.html", context,
                  status=200 if form.is_valid() else 400)
