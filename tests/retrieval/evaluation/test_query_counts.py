"""Query counts of the evaluation pages and API, pinned (NetBox's query_counts): the
history with 2 runs or 8 (each of its own test set), a run's page, its comparison and
its API answer with 2 queries or 8, take the same number of statements."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.models import Catalog
from retrieval.models import EvaluationQuery, EvaluationRun, EvaluationSet
from tests.factories import person

pytestmark = pytest.mark.django_db

MODES = ["bm25", "vector", "hybrid"]


def _metrics(shift: float) -> list[dict[str, Any]]:
    return [{"mode": mode, "queries": 4, "ndcg_at_10": 0.3 + shift + i / 10, "recall_at_100": 0.5,
             "mrr_at_10": 0.4, "p50_ms": 3.0, "p95_ms": 9.0} for i, mode in enumerate(MODES)]


def _run(catalog: Catalog, name: str, queries: int, *, shift: float = 0.0) -> EvaluationRun:
    """A succeeded run as the worker leaves one, built without searching."""
    query_set = EvaluationSet.objects.create(
        name=name, queries={f"q{i}": f"question {i}" for i in range(queries)},
        qrels={f"q{i}": {f"d{i}": 1} for i in range(queries)}, query_count=queries, judgement_count=queries,
        created_by="cora")
    run = EvaluationRun.objects.create(
        catalog=catalog, query_set=query_set, modes=MODES, status="succeeded", progress=100, stage="done",
        queries_total=queries * 3, queries_done=queries * 3, metrics=_metrics(shift), created_by="cora",
        started_at=timezone.now(), finished_at=timezone.now())
    EvaluationQuery.objects.bulk_create([EvaluationQuery(run=run, query_id=f"q{i}", text=f"question {i}", scores={
        mode: {"ndcg_at_10": (i * (j + 1)) % 3 / 2, "recall_at_100": 1.0, "mrr_at_10": 0.5, "ms": 2.0}
        for j, mode in enumerate(MODES)}) for i in range(queries)])
    return run


def _count(client: Any, url: str, **kwargs: Any) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, **kwargs)
    assert response.status_code == 200, response.content[:300]
    return len(queries)


@pytest.fixture
def curator() -> Client:
    client = Client()
    client.force_login(person("cora", "curator"))
    return client


def test_the_history_costs_the_same_for_2_runs_or_8(curator):
    counts = {}
    for n in (2, 8):
        catalog = Catalog.objects.create(slug=f"c{n}", name=f"C{n}")
        for i in range(n):
            _run(catalog, f"set-{n}-{i}", 3)
        counts[n] = _count(curator, "/evaluations/", data={"catalog": catalog.slug})

    assert counts[2] == counts[8], counts


@pytest.mark.parametrize("page", ["run", "compare", "api"])
def test_a_run_costs_the_same_for_2_queries_or_8(curator, page):
    counts = {}
    api = APIClient()
    api.force_login(person("bea", "curator"))
    for n in (2, 8):
        catalog = Catalog.objects.create(slug=f"c{n}", name=f"C{n}")
        _run(catalog, f"before-{n}", n)  # the run before: its figures are the change shown
        run = _run(catalog, f"set-{n}", n, shift=0.05)
        EvaluationRun.objects.filter(pk=run.pk).update(query_set=EvaluationRun.objects.exclude(pk=run.pk)
                                                       .filter(catalog=catalog).get().query_set)
        url = {"run": f"/evaluations/{run.pk}/", "compare": f"/evaluations/{run.pk}/compare?a=vector&b=bm25",
               "api": f"/api/v1/evaluations/{run.pk}"}[page]
        headers = {"HX-Request": "true"} if page == "compare" else {}
        counts[n] = _count(api if page == "api" else curator, url, headers=headers)

    assert counts[2] == counts[8], counts
