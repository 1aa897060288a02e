"""The evaluation pages through Django's test client: the history and the start form,
a refused start shown in place with nothing stored, a run's page while it waits and
once it is done (table, chart, the sources left out, two modes compared), and the
comparison's own answers."""

from __future__ import annotations

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from retrieval.evaluation.runs import evaluation_execute
from retrieval.models import EvaluationRun, EvaluationSet
from tests.retrieval.evaluation.builders import OPS_QRELS, OPS_QUERIES, ops_set, qrels_tsv, queries_jsonl

pytestmark = pytest.mark.django_db


def upload(name: str, text: str) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode())


def test_the_history_lists_runs_with_each_modes_headline(curator_client, done_run):
    response = curator_client.get("/evaluations/")

    assert response.status_code == 200
    html = response.content.decode()
    assert f'href="/evaluations/{done_run.pk}/"' in html and "ops-questions" in html
    for entry in done_run.metrics:
        assert f"{entry['mode']} <strong>{entry['ndcg_at_10']:.3f}</strong>" in html
    assert 'aria-current="page">Evaluations' in html


def test_a_start_refused_shows_each_error_in_place_and_stores_nothing(curator_client, indexed_catalog):
    response = curator_client.post("/evaluations/start", {
        "catalog": "ops", "modes": ["bm25"], "test_set": "upload", "name": "broken",
        "queries": upload("queries.jsonl", '{"_id": "q1", "text": "fine"}\n{"_id": 2\n'),
        "qrels": upload("test.tsv", "q1\tcircuit-breaker.md\t1\nq7\tcaching.md\t1\n")}, headers={"HX-Request": "true"})

    assert response.status_code == 400
    html = response.content.decode()
    assert html.lstrip().startswith("<form")  # the form alone, for htmx to swap in
    assert "queries line 2: not valid JSON" in html
    assert 'value="broken"' in html  # what was typed stays, and the choice made
    assert 'value="upload" id="id_test_set_1" required checked' in html
    assert not EvaluationSet.objects.exists() and not EvaluationRun.objects.exists()

    response = curator_client.post("/evaluations/start", {"catalog": "ops", "test_set": "stored"})
    html = response.content.decode()
    assert response.status_code == 400 and "Choose at least one mode." in html
    assert "Choose a stored test set, or upload a new one." in html and "<h1>Evaluations</h1>" in html


def test_a_stored_set_of_another_catalog_is_refused_beside_it(curator_client, indexed_catalog, make_catalog):
    foreign = ops_set("payroll questions", catalog=make_catalog("payroll"))

    response = curator_client.post("/evaluations/start", {"catalog": "ops", "modes": ["bm25"], "test_set": "stored",
                                                          "query_set": foreign.pk}, headers={"HX-Request": "true"})

    assert response.status_code == 400
    assert "payroll questions was uploaded for another catalog: choose one of ops&#x27;s sets" in \
        response.content.decode()
    assert not EvaluationRun.objects.exists()


def test_a_start_uploads_the_set_queues_the_run_and_goes_to_its_page(curator_client, indexed_catalog):
    response = curator_client.post("/evaluations/start", {
        "catalog": "ops", "modes": ["bm25", "hybrid"], "test_set": "upload", "name": "ops questions",
        "queries": upload("queries.jsonl", queries_jsonl(OPS_QUERIES)),
        "qrels": upload("test.tsv", qrels_tsv(OPS_QRELS))}, headers={"HX-Request": "true"})

    run = EvaluationRun.objects.get()
    assert response.status_code == 200 and response["HX-Redirect"] == f"/evaluations/{run.pk}/"
    assert (run.status, run.modes, run.created_by, run.query_set.name) == ("queued", ["bm25", "hybrid"], "cora",
                                                                           "ops questions")
    page = curator_client.get(f"/evaluations/{run.pk}/").content.decode()
    assert 'hx-trigger="every 1s"' in page and "waiting for a worker" in page and "queued: 2 modes × 5 queries" in page

    evaluation_execute(run_id=run.pk)
    body = curator_client.get(f"/evaluations/{run.pk}/", headers={"HX-Request": "true"}).content.decode()
    assert 'hx-trigger="every 1s"' not in body and 'id="metrics-heading"' in body  # done: the results, no polling


def test_a_done_run_shows_its_table_chart_governance_and_comparison(curator_client, done_run):
    html = curator_client.get(f"/evaluations/{done_run.pk}/").content.decode()

    assert 'role="img" aria-labelledby="quality-chart-title quality-chart-desc"' in html
    assert "<title id=\"quality-chart-title\">Ranking quality by mode</title>" in html
    assert re.search(r"<desc id=\"quality-chart-desc\">nDCG@10: bm25 \d\.\d{3}, vector", html)
    assert "the 1 source that needs approval was left out of every ranking (<code>@vault</code>)" in html
    assert "<strong>2 of 6</strong> judged documents" in html
    assert "The first run of this catalog and test set" in html
    assert re.search(r"<code>hybrid</code> wins <strong>\d+</strong> \(\d+%\), ties", html)  # last mode against first


def test_a_later_run_shows_its_change_since_the_one_before(curator_client, done_run):
    again = EvaluationRun.objects.create(catalog=done_run.catalog, query_set=done_run.query_set, modes=["bm25"],
                                         queries_total=5, created_by="cora")
    evaluation_execute(run_id=again.pk)

    html = curator_client.get(f"/evaluations/{again.pk}/").content.decode()

    assert f'Change since <a href="/evaluations/{done_run.pk}/">run #{done_run.pk}</a>' in html
    assert '<span class="change">+0.0000</span>' in html  # the same content: the same figures
    assert 'id="comparison"' not in html  # one mode: nothing to compare


def test_a_run_records_the_ranking_it_ran_with_and_names_what_changed_since_the_run_before(
        curator_client, done_run):
    from catalog.catalogs import catalog_ranking_update

    assert done_run.ranking == {}
    html = curator_client.get(f"/evaluations/{done_run.pk}/").content.decode()
    assert "Ranked with the catalog's ranking settings: the defaults." in html

    catalog_ranking_update(catalog=done_run.catalog, values={"k1": 0.9, "bm25_feedback": 5}, by=None)
    again = EvaluationRun.objects.create(catalog=done_run.catalog, query_set=done_run.query_set, modes=["bm25"],
                                         queries_total=5, created_by="cora")
    done = evaluation_execute(run_id=again.pk)
    assert done is not None and done.ranking == {"k1": 0.9, "bm25_feedback": 5}
    html = curator_client.get(f"/evaluations/{again.pk}/").content.decode()
    assert "k1 <code>0.9</code>, bm25_feedback <code>5</code>." in html
    assert (f"Changed since run #{done_run.pk}: k1 <code>1.2</code> → <code>0.9</code>, "
            "bm25_feedback <code>0</code> → <code>5</code>.") in html
    body = curator_client.get(f"/api/v1/evaluations/{again.pk}").json()
    assert body["ranking"] == {"k1": 0.9, "bm25_feedback": 5}

    # a run from before runs recorded their settings says so, and nothing is compared with it
    EvaluationRun.objects.filter(pk=done_run.pk).update(ranking=None)
    html = curator_client.get(f"/evaluations/{done_run.pk}/").content.decode()
    assert "did not record the catalog's ranking settings" in html
    assert "Changed since" not in curator_client.get(f"/evaluations/{again.pk}/").content.decode()


def test_comparing_two_modes_and_a_refusal_in_place(curator_client, done_run):
    url = f"/evaluations/{done_run.pk}/compare"
    htmx = {"HX-Request": "true"}

    chosen = curator_client.get(url, {"a": "vector", "b": "bm25", "metric": "mrr_at_10"}, headers=htmx)
    same = curator_client.get(url, {"a": "bm25", "b": "bm25", "metric": "mrr_at_10"}, headers=htmx)
    plain = curator_client.get(url, {"a": "vector", "b": "bm25", "metric": "mrr_at_10"})

    assert chosen.status_code == 200 and "<code>vector</code> wins" in chosen.content.decode()
    assert "on MRR@10" in chosen.content.decode()
    assert same.status_code == 400 and "Choose two different modes." in same.content.decode()
    assert plain.status_code == 302 and plain["Location"].endswith("?a=vector&b=bm25&metric=mrr_at_10#comparison")
    page = curator_client.get(plain["Location"])
    assert page.status_code == 200 and "<code>vector</code> wins" in page.content.decode()


def test_a_failed_run_shows_its_error_and_no_figures(curator_client, done_run):
    EvaluationRun.objects.filter(pk=done_run.pk).update(status="failed", error="vector: no embedding model", metrics=[])

    html = curator_client.get(f"/evaluations/{done_run.pk}/").content.decode()

    assert "The run failed" in html and "vector: no embedding model" in html and "metrics-heading" not in html


def test_the_history_is_filtered_in_place(curator_client, done_run, make_catalog):
    make_catalog("other")
    htmx = {"HX-Request": "true", "HX-Target": "evaluation-history"}

    mine = curator_client.get("/evaluations/", {"catalog": "ops", "status": "succeeded"}, headers=htmx)
    other = curator_client.get("/evaluations/", {"catalog": "other"}, headers=htmx)
    bad = curator_client.get("/evaluations/", {"status": "sleeping"})

    assert mine.content.decode().lstrip().startswith('<section id="evaluation-history"')
    assert f"#{done_run.pk}</a>" in mine.content.decode()
    assert "No run matches these filters." in other.content.decode()
    assert bad.status_code == 400 and "Select a valid choice" in bad.content.decode()
