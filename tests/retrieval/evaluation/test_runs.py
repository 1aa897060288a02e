"""Evaluation runs through their services: a test set stored, a run asked for and done
as the worker does it (mode by mode, progress written, everything at once at the end),
a failure recorded whole, a dead worker's run failed on recovery; ranked as a person's
search ranks, so a source needing approval is left out and said to be."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from config.database_roles import app_role_grant
from retrieval.evaluation import ranking, runs
from retrieval.evaluation.query_sets import query_set_create
from retrieval.evaluation.runs import evaluation_execute, evaluation_request, evaluations_recover
from retrieval.models import EvaluationQuery, EvaluationRun, EvaluationSet
from tests.catalog.test_reindex_processes import second_connection
from tests.retrieval.evaluation.builders import OPS_QUERIES, ops_set, qrels_tsv, queries_jsonl

pytestmark = pytest.mark.django_db


def test_a_stored_set_keeps_the_judged_queries(make_catalog):
    query_set = ops_set(catalog=make_catalog("ops"))

    assert (query_set.query_count, query_set.judgement_count, query_set.unjudged_count) == (5, 6, 1)
    assert "q6" not in query_set.queries and query_set.created_by == "cora"


def test_a_set_is_refused_by_field_and_nothing_is_stored(make_catalog, settings):
    ops = make_catalog("ops")
    ops_set("taken", catalog=ops)
    settings.LECTERN_MAX_UPLOAD_BYTES = 1024

    with pytest.raises(ValidationError) as refused:
        query_set_create(catalog=ops, name="taken", queries=queries_jsonl({"q1": "fine"}),
                         qrels=qrels_tsv([("q1", "d", 1)]), by="cora")
    assert refused.value.message_dict == {"name": ["A test set with this name exists already."]}
    with pytest.raises(ValidationError) as refused:
        query_set_create(catalog=ops, name="big", queries="x" * 2000, qrels="", by="cora")
    assert refused.value.message_dict == {
        "queries": ["queries.jsonl is 2.0 KB; a test set's file may be at most 1.0 KB (LECTERN_MAX_UPLOAD_BYTES)."],
        "qrels": ["qrels is empty."]}
    with pytest.raises(ValidationError) as refused:
        query_set_create(catalog=ops, name="bad", queries='{"_id": "q1", "text": "a"}\n{oops\n',
                         qrels="q1\td\t1\n", by="cora")
    assert refused.value.message_dict == {"queries": [
        "queries line 2: not valid JSON (Expecting property name enclosed in double quotes at column 2)"]}
    assert list(EvaluationSet.objects.values_list("name", flat=True)) == ["taken"]


def test_a_set_runs_only_on_the_catalog_it_was_uploaded_for(indexed_catalog, make_catalog):
    """Issue 20, item 6: the service is the one place runs are made; it refuses another
    catalog's set whoever asks (its judgements name that catalog's documents)."""
    foreign = ops_set(catalog=make_catalog("other"))

    with pytest.raises(ValidationError) as refused:
        evaluation_request(catalog=indexed_catalog, query_set=foreign, modes=["bm25"], by="cora")

    assert refused.value.message_dict == {"query_set": [f"Test set {foreign.pk} was not uploaded for catalog ops."]}
    assert not EvaluationRun.objects.exists()


def test_the_migration_gives_each_set_the_catalog_of_its_runs(as_owner):
    """0009 over sets made before they had a catalog (names unique then): the first run's
    catalog takes the set, each other catalog a copy of the same name its runs point at; a
    set never run keeps none. Migrated for real, from 0008, as `manage.py migrate` does."""
    executor = MigrationExecutor(connection)
    counts = {"query_count": 1, "judgement_count": 1, "created_by": "cora"}
    try:
        executor.migrate([("retrieval", "0008_facts_and_memory")])
        old = executor.loader.project_state([("retrieval", "0008_facts_and_memory")]).apps
        Catalog, Set, Run = (old.get_model(*name) for name in (
            ("catalog", "Catalog"), ("retrieval", "EvaluationSet"), ("retrieval", "EvaluationRun")))
        ops, other = Catalog.objects.create(slug="ops", name="Ops"), Catalog.objects.create(slug="other", name="Other")
        shared = Set.objects.create(name="shared", queries={"q1": "retry"}, qrels={"q1": {"d1": 1}}, **counts)
        unrun = Set.objects.create(name="unrun", queries={"q1": "retry"}, qrels={"q1": {"d1": 1}}, **counts)
        first = Run.objects.create(catalog=ops, query_set=shared, modes=["bm25"])
        second = Run.objects.create(catalog=other, query_set=shared, modes=["bm25"])

        executor = MigrationExecutor(connection)
        executor.migrate([("retrieval", "0009_evaluation_set_catalog")])
        # read as 0009 has them: today's models hold columns later migrations add
        then = executor.loader.project_state([("retrieval", "0009_evaluation_set_catalog")]).apps
        Run, Set = then.get_model("retrieval", "EvaluationRun"), then.get_model("retrieval", "EvaluationSet")

        first_set, second_set = (Run.objects.get(pk=run.pk).query_set for run in (first, second))
        assert (first_set.pk, first_set.catalog_id) == (shared.pk, ops.pk)
        assert second_set.pk != shared.pk and second_set.catalog_id == other.pk
        assert (second_set.name, second_set.queries) == ("shared", shared.queries)
        assert Set.objects.get(pk=unrun.pk).catalog_id is None
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        app_role_grant(connection=connection)  # what `manage.py migrate` does after migrating


def test_a_run_is_done_mode_by_mode_and_recorded_at_once(governed_ops, django_capture_on_commit_callbacks,
                                                         monkeypatch):
    query_set = ops_set()
    seen = []
    rank = ranking.rank_query

    def watched(**kwargs):  # the run as a reader sees it while the worker searches
        seen.append(EvaluationRun.objects.values_list("status", "stage", "queries_done", "progress").get())
        assert not EvaluationQuery.objects.exists()
        return rank(**kwargs)

    monkeypatch.setattr(runs, "rank_query", watched)
    monkeypatch.setattr(runs.ThrottledProgress, "__call__", _unthrottled(runs.ThrottledProgress.__call__))

    with django_capture_on_commit_callbacks(execute=True):  # the test queue runs the task at once
        run = evaluation_request(catalog=governed_ops, query_set=query_set, modes=["hybrid", "bm25"], by="cora")

    run.refresh_from_db()
    assert run.status == "succeeded" and run.modes == ["bm25", "hybrid"]  # in search's order
    assert (run.queries_total, run.queries_done, run.progress, run.error) == (10, 10, 100, "")
    assert seen[0] == ("running", "bm25", 0, 0) and seen[5] == ("running", "hybrid", 5, 50)
    assert [entry["mode"] for entry in run.metrics] == ["bm25", "hybrid"]
    bm25 = run.metrics[0]
    assert bm25["queries"] == 5
    # q1-q4 find their one document first; q5's documents are out of reach (withheld, missing)
    assert bm25["mrr_at_10"] == pytest.approx(4 / 5)
    assert bm25["p95_ms"] >= bm25["p50_ms"] > 0
    assert run.withheld == ["vault"]
    assert (run.judged_documents, run.missing_documents) == (6, 2)
    rows = {row.query_id: row for row in EvaluationQuery.objects.filter(run=run)}
    assert set(rows) == set(OPS_QUERIES) - {"q6"}
    assert rows["q1"].text == OPS_QUERIES["q1"] and set(rows["q1"].scores) == {"bm25", "hybrid"}
    assert rows["q5"].scores["hybrid"]["ndcg_at_10"] == 0.0 and rows["q1"].scores["bm25"]["ms"] > 0


def _unthrottled(call):
    def every_time(self, stage, done, total):
        self._last = 0.0
        return call(self, stage, done, total)

    return every_time


def test_a_crash_fails_the_run_with_its_error_and_no_half_result(indexed_catalog, monkeypatch):
    query_set = ops_set()
    run = evaluation_request(catalog=indexed_catalog, query_set=query_set, modes=["bm25", "vector"], by="cora")
    calls = []

    def failing(**kwargs):
        calls.append(kwargs["mode"])
        if kwargs["mode"] == "vector":
            raise RuntimeError("the disk is on fire")
        return ranking.rank_query(**kwargs)

    monkeypatch.setattr(runs, "rank_query", failing)

    evaluation_execute(run_id=run.pk)

    run.refresh_from_db()
    assert (run.status, run.error, run.metrics) == ("failed", "RuntimeError: the disk is on fire", [])
    assert calls == ["bm25"] * 5 + ["vector"] and run.finished_at is not None
    assert not EvaluationQuery.objects.filter(run=run).exists()
    again = evaluation_execute(run_id=run.pk)  # done with: a second call leaves it
    assert again is not None and again.status == "failed"


def test_a_mode_without_its_model_fails_the_run_saying_why(indexed_catalog, monkeypatch):
    from retrieval.search import selectors
    from retrieval.search.vector import SearchUnavailable

    def no_model(query):
        raise SearchUnavailable("no embedding model (LECTERN_EMBEDDING_MODEL=none)")

    monkeypatch.setattr(selectors, "embed_query", no_model)
    for mode, error in (("vector", "vector: no embedding model"), ("hybrid", "hybrid: search answered lexical-only")):
        run = evaluation_request(catalog=indexed_catalog, query_set=ops_set(f"set-{mode}"), modes=[mode], by="cora")
        done = evaluation_execute(run_id=run.pk)
        assert done is not None and done.error.startswith(error)


def test_modes_are_checked_before_anything_is_queued(indexed_catalog):
    query_set = ops_set()
    for modes, message in (([], "Choose at least one mode."), (["bm25", "sparse"], "Unknown mode 'sparse'"),
                           (["bm25", "bm25"], "Name each mode once.")):
        with pytest.raises(ValidationError, match=message):
            evaluation_request(catalog=indexed_catalog, query_set=query_set, modes=modes, by="cora")
    assert not EvaluationRun.objects.exists()


def test_a_run_a_dead_worker_left_is_failed_and_one_a_live_worker_holds_is_not(indexed_catalog, monkeypatch):
    query_set = ops_set()
    dead = evaluation_request(catalog=indexed_catalog, query_set=query_set, modes=["bm25"], by="cora")
    live = evaluation_request(catalog=indexed_catalog, query_set=query_set, modes=["bm25"], by="cora")
    lost = evaluation_request(catalog=indexed_catalog, query_set=query_set, modes=["bm25"], by="cora")
    EvaluationRun.objects.filter(pk__in=[dead.pk, live.pk]).update(status="running")
    enqueued: list[int] = []
    monkeypatch.setattr(runs, "pending_task_names", lambda: set())  # lost's task is not in the queue
    monkeypatch.setattr(runs, "_enqueue", enqueued.append)

    with second_connection("lectern-test-live-worker") as worker:  # the live worker's session holds its lock
        worker.execute("SELECT pg_advisory_lock(%s, %s)", [runs.LOCK_NAMESPACE, live.pk])
        touched = evaluations_recover()

    assert touched == [dead.pk, lost.pk] and enqueued == [lost.pk]
    states = dict(EvaluationRun.objects.values_list("pk", "status"))
    assert states == {dead.pk: "failed", live.pk: "running", lost.pk: "queued"}
    assert EvaluationRun.objects.get(pk=dead.pk).error.startswith("interrupted: its worker stopped")
