"""Reads of evaluation runs for the pages and the API: the history, one run (found and
authorised together), the run it follows, and modes compared query by query.

A run's headline figures live on the run itself (`metrics`, one entry per mode), so the
history reads one row per run; a test set's queries and judgements (large JSON) are
never read for a list. Comparing reads the run's per-query scores once."""

from __future__ import annotations

from itertools import combinations
from typing import Any

from django.db.models import QuerySet
from django.http import Http404

from catalog.auth import RequestUser, visible_catalogs
from retrieval.evaluation.beir import METRICS
from retrieval.evaluation.comparison import Comparison, compare
from retrieval.models import EvaluationQuery, EvaluationRun, EvaluationSet

METRIC_LABELS = {"ndcg_at_10": "nDCG@10", "recall_at_100": "Recall@100", "mrr_at_10": "MRR@10"}
assert set(METRIC_LABELS) == set(METRICS)
DIFFERING_SHOWN = 10


def runs_listed() -> QuerySet[EvaluationRun]:
    """Runs newest first with their catalog's and set's names: one statement a page."""
    return EvaluationRun.objects.select_related("catalog", "query_set").only(
        "id", "modes", "top_k", "status", "stage", "progress", "queries_done", "queries_total", "metrics",
        "withheld", "ranking", "judged_documents", "missing_documents", "error", "created_by", "created_at",
        "started_at", "finished_at", "catalog__slug", "catalog__name", "query_set__name", "query_set__query_count",
    ).order_by("-created_at", "-pk")


def query_sets_listed() -> QuerySet[EvaluationSet]:
    """Test sets without their queries and judgements (only their counts), with the
    catalog each was uploaded for and runs on."""
    return EvaluationSet.objects.select_related("catalog").defer("queries", "qrels").order_by("name", "catalog__slug")


def run_for(caller: RequestUser, run_id: int) -> EvaluationRun:
    """The run if `caller` may read its catalog (a curator agent: its own catalogs;
    people with a role: all), else 404, the same as a run that does not exist."""
    run = runs_listed().filter(pk=run_id, catalog__in=visible_catalogs(caller)).first()
    if run is None:
        raise Http404(f"No evaluation run {run_id}.")
    return run


def previous_run(run: EvaluationRun) -> EvaluationRun | None:
    """The newest run before `run` that succeeded on the same catalog and test set: what
    a curator compares with to see whether a change helped."""
    return runs_listed().filter(catalog_id=run.catalog_id, query_set_id=run.query_set_id,
                                status=EvaluationRun.Status.SUCCEEDED, created_at__lt=run.created_at).first()


def metrics_with_change(run: EvaluationRun, before: EvaluationRun | None) -> list[dict[str, Any]]:
    """The run's per-mode metrics, each with its change since `before` for the modes
    both ran (None where `before` did not run the mode)."""
    earlier = {entry["mode"]: entry for entry in (before.metrics if before else [])}
    rows = []
    for entry in run.metrics:
        prior = earlier.get(entry["mode"])
        rows.append({**entry, "change": {metric: entry[metric] - prior[metric] for metric in METRICS}
                     if prior else None})
    return rows


def _scores(run: EvaluationRun, metric: str) -> dict[str, dict[str, float]]:
    """mode -> query id -> the metric, over every query of the run."""
    by_mode: dict[str, dict[str, float]] = {mode: {} for mode in run.modes}
    for query_id, scores in EvaluationQuery.objects.filter(run=run).values_list("query_id", "scores"):
        for mode, values in scores.items():
            if mode in by_mode:
                by_mode[mode][query_id] = values[metric]
    return by_mode


def _with_texts(run: EvaluationRun, comparisons: list[Comparison]) -> dict[str, str]:
    wanted = {d.query_id for c in comparisons for d in c.differing}
    return dict(EvaluationQuery.objects.filter(run=run, query_id__in=wanted).values_list("query_id", "text"))


def run_comparison(run: EvaluationRun, *, a: str, b: str, metric: str,
                   shown: int = DIFFERING_SHOWN) -> tuple[Comparison, dict[str, str]]:
    """Mode `a` against `b` on `metric`, and the texts of the queries that differ most."""
    scores = _scores(run, metric)
    comparison = compare(scores[a], scores[b], a=a, b=b, metric=metric, shown=shown)
    return comparison, _with_texts(run, [comparison])


def run_comparisons(run: EvaluationRun, *, metric: str,
                    shown: int = DIFFERING_SHOWN) -> tuple[list[Comparison], dict[str, str]]:
    """Every pair of the run's modes (in its order) on `metric`, and the texts of the
    queries that differ most in any pair."""
    scores = _scores(run, metric)
    comparisons = [compare(scores[a], scores[b], a=a, b=b, metric=metric, shown=shown)
                   for a, b in combinations(run.modes, 2)]
    return comparisons, _with_texts(run, comparisons)
