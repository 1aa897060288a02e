"""POST /api/v1/evaluations and GET /api/v1/evaluations/{id}: curators (people and
curator agents) start runs on a stored or uploaded test set and read progress, metrics
and wins/ties/losses; bad input is a JSON 400 naming the field and line, and leaves
nothing behind; others are refused."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from retrieval.models import EvaluationQuery, EvaluationRun, EvaluationSet
from tests.factories import agent_with_token, person
from tests.retrieval.evaluation.builders import OPS_QRELS, OPS_QUERIES, ops_set, qrels_tsv, queries_jsonl

pytestmark = pytest.mark.django_db


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def curator_agent(governed_ops) -> APIClient:
    return bearer(agent_with_token(name="tuner", catalogs=[governed_ops], is_curator=True)[1])


def upload_body(**fields):
    return {"catalog": "ops", "modes": ["bm25", "hybrid"], "name": "ops questions",
            "queries": queries_jsonl(OPS_QUERIES), "qrels": qrels_tsv(OPS_QRELS), **fields}


def test_a_curator_agent_uploads_a_set_and_the_run_is_done(curator_agent, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):  # the test queue runs the task on commit
        response = curator_agent.post("/api/v1/evaluations", upload_body(), format="json")

    assert response.status_code == 202, response.json()
    body = response.json()
    run = EvaluationRun.objects.get()
    assert body["id"] == run.pk and body["page"] == f"/evaluations/{run.pk}/"
    assert body["query_set"] == {"id": run.query_set_id, "name": "ops questions"}
    assert (body["status"], body["created_by"], body["metrics"]) == ("queued", "tuner (agent)", [])

    followed = curator_agent.get(f"/api/v1/evaluations/{run.pk}").json()
    assert (followed["status"], followed["progress"], followed["stage"]) == ("succeeded", 100, "done")
    assert [m["mode"] for m in followed["metrics"]] == ["bm25", "hybrid"] and followed["withheld"] == ["vault"]
    (pair,) = followed["pairwise"]
    assert (pair["a"], pair["b"], pair["metric"]) == ("bm25", "hybrid", "ndcg_at_10")
    assert pair["wins"] + pair["ties"] + pair["losses"] == 5
    assert pair["win_rate"] + pair["tie_rate"] + pair["loss_rate"] == pytest.approx(1.0)
    for differing in pair["differing"]:
        assert differing["text"] == OPS_QUERIES[differing["query_id"]] and differing["a"] != differing["b"]
    by_mrr = curator_agent.get(f"/api/v1/evaluations/{run.pk}", {"metric": "mrr_at_10"}).json()
    assert by_mrr["pairwise"][0]["metric"] == "mrr_at_10"


def test_a_person_runs_a_stored_set_again_and_follows_it_while_queued(governed_ops):
    query_set = ops_set()
    client = APIClient()
    client.force_login(person("cora", "curator"))

    response = client.post("/api/v1/evaluations", {"catalog": "ops", "query_set": query_set.pk}, format="json")

    assert response.status_code == 202
    body = response.json()
    assert (body["status"], body["modes"], body["queries_total"]) == ("queued", ["bm25", "vector", "hybrid"], 15)
    followed = client.get(f"/api/v1/evaluations/{body['id']}").json()
    assert (followed["status"], followed["metrics"], followed["pairwise"]) == ("queued", [], [])


@pytest.mark.parametrize(("fields", "code", "where", "message"), [
    ({"queries": '{"_id": "q1", "text": "x"}\n{oops\n'}, "invalid_test_set", "queries",
     "queries line 2: not valid JSON"),
    ({"qrels": "q1\tcircuit-breaker.md\t1\nq99\tcaching.md\t1\n"}, "invalid_test_set", "qrels",
     "qrels line 2: query id 'q99' is not in the queries file"),
    ({"queries": "x" * 2000}, "invalid_test_set", "queries", "a test set's file may be at most 1.0 KB"),
    ({"modes": ["bm25", "sparse"]}, "invalid_input", "modes", '"sparse" is not a valid choice.'),
    ({"modes": []}, "invalid_input", "modes", "Choose at least one mode."),
    ({"name": ""}, "invalid_input", "name", "This field may not be blank."),
    ({"query_set": 1}, "invalid_input", "non_field_errors",
     "Give either `query_set` or a test set to upload, not both."),
])
def test_bad_input_is_a_json_400_naming_the_field_and_nothing_is_stored(curator_agent, settings, fields, code,
                                                                        where, message):
    settings.LECTERN_MAX_UPLOAD_BYTES = 1024
    response = curator_agent.post("/api/v1/evaluations", upload_body(**fields), format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == code
    assert any(message in text for text in _flat(error["details"]["fields"][where])), error
    assert not EvaluationSet.objects.exists() and not EvaluationRun.objects.exists()


def _flat(value):
    if isinstance(value, dict):
        return [text for inner in value.values() for text in _flat(inner)]
    if isinstance(value, list):
        return [text for inner in value for text in _flat(inner)]
    return [str(value)]


def test_a_taken_name_is_refused_beside_the_name(curator_agent):
    ops_set("ops questions")

    response = curator_agent.post("/api/v1/evaluations", upload_body(), format="json")

    assert response.status_code == 400 and response.json()["error"] == {
        "code": "invalid_test_set", "message": "The test set is refused; see details.",
        "details": {"fields": {"name": ["A test set with this name exists already."]}}}
    assert not EvaluationRun.objects.exists()


def test_a_missing_upload_part_is_named(curator_agent):
    response = curator_agent.post("/api/v1/evaluations", {"catalog": "ops", "name": "half"}, format="json")

    fields = response.json()["error"]["details"]["fields"]
    assert response.status_code == 400 and set(fields) == {"queries", "qrels"}


def test_unknown_catalogs_sets_and_runs_are_404(curator_agent, done_run):
    assert curator_agent.post("/api/v1/evaluations", upload_body(catalog="nope"), format="json").status_code == 404
    assert curator_agent.post("/api/v1/evaluations", {"catalog": "ops", "query_set": 999},
                              format="json").status_code == 404
    assert curator_agent.get("/api/v1/evaluations/999999").status_code == 404
    assert curator_agent.get(f"/api/v1/evaluations/{done_run.pk}", {"metric": "f1"}).status_code == 400
    assert EvaluationRun.objects.count() == 1


def test_a_curator_agent_sees_only_runs_of_its_own_catalogs(done_run, make_catalog):
    elsewhere = bearer(agent_with_token(name="other", catalogs=[make_catalog("other")], is_curator=True)[1])

    assert elsewhere.get(f"/api/v1/evaluations/{done_run.pk}").status_code == 404
    assert elsewhere.post("/api/v1/evaluations", {"catalog": "ops", "query_set": done_run.query_set_id},
                          format="json").status_code == 404


def test_a_test_set_runs_only_on_the_catalog_it_was_uploaded_for(governed_ops, make_catalog):
    """Issue 20, item 6: a curator agent of `ops` ran a set uploaded for `other` by its id
    (202, the set's name shown)."""
    other = make_catalog("other")
    keeper = bearer(agent_with_token(name="keeper", catalogs=[other], is_curator=True)[1])
    uploaded = keeper.post("/api/v1/evaluations", upload_body(catalog="other", name="payroll questions"),
                           format="json")
    assert uploaded.status_code == 202, uploaded.json()
    foreign = uploaded.json()["query_set"]["id"]
    cora = APIClient()
    cora.force_login(person("cora", "curator"))
    tuner = bearer(agent_with_token(name="tuner", catalogs=[governed_ops], is_curator=True)[1])

    for who, client in (("curator agent of ops", tuner), ("a curator", cora)):
        response = client.post("/api/v1/evaluations", {"catalog": "ops", "query_set": foreign}, format="json")
        assert response.status_code == 404, (who, response.json())
        assert response.json()["error"]["code"] == "not_found" and "payroll" not in response.content.decode()
    assert EvaluationRun.objects.filter(catalog__slug="ops").count() == 0, "nothing queued"


def test_a_name_is_taken_within_its_catalog_only(governed_ops, curator_agent, make_catalog):
    other = make_catalog("other")
    keeper = bearer(agent_with_token(name="keeper", catalogs=[other], is_curator=True)[1])
    assert keeper.post("/api/v1/evaluations", upload_body(catalog="other"), format="json").status_code == 202

    response = curator_agent.post("/api/v1/evaluations", upload_body(), format="json")

    assert response.status_code == 202, "another catalog's set names are neither refused nor told"
    assert EvaluationSet.objects.filter(name="ops questions").count() == 2


def test_readers_and_reviewers_are_refused_and_nothing_changes(done_run):
    reader = bearer(agent_with_token(name="reader", catalogs=[done_run.catalog])[1])
    reviewer = APIClient()
    reviewer.force_login(person("rita", "reviewer"))
    before = (EvaluationRun.objects.count(), EvaluationSet.objects.count(), EvaluationQuery.objects.count())

    for client in (reader, reviewer):
        started = client.post("/api/v1/evaluations", {"catalog": "ops", "query_set": done_run.query_set_id},
                              format="json")
        read = client.get(f"/api/v1/evaluations/{done_run.pk}")
        assert started.status_code == read.status_code == 403
        assert started.json()["error"]["code"] == "forbidden"
    assert APIClient().get(f"/api/v1/evaluations/{done_run.pk}").status_code == 401
    assert (EvaluationRun.objects.count(), EvaluationSet.objects.count(), EvaluationQuery.objects.count()) == before
