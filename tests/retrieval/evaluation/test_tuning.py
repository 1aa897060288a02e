"""Tuning runs: the grid's figures are search's own, the held-out figures score each
query with settings chosen without it, and applying is refused unless the held-out
nDCG@10 gain is positive (and audited when it is)."""

from __future__ import annotations

import random

import pytest
from django.utils import timezone

from catalog.audit.log import Action
from catalog.catalogs import catalog_ranking_update
from catalog.errors import ConflictError
from catalog.models import AuditEntry, Catalog
from catalog.ranking import RankingSettings
from retrieval import tasks
from retrieval.evaluation import tuning
from retrieval.evaluation.beir import score_query
from retrieval.evaluation.query_sets import query_set_create
from retrieval.evaluation.ranking import rank_query
from retrieval.evaluation.tuning_runs import apply_problem, tuning_apply, tuning_request
from retrieval.models import TuningRun
from tests.factories import import_documents
from tests.retrieval.evaluation.builders import qrels_tsv, queries_jsonl
from tests.retrieval.test_bm25_exact import corpus_documents


@pytest.fixture
def judged(make_catalog):
    """The BM25 corpus, and twelve queries made of two or three words of one document
    each (that document judged relevant, a second one of the same words half relevant)."""
    catalog = make_catalog("tuning", chunk_size=200, chunk_overlap=30)
    import_documents(catalog=catalog, slug="corpus", documents=corpus_documents())
    catalog.refresh_from_db()
    rng = random.Random(11)
    texts = {doc.path: doc.text or "" for doc in corpus_documents()}
    paths = sorted(path for path, text in texts.items() if len([w for w in text.split() if len(w) > 4]) > 3)
    queries, qrels = {}, []
    for n, path in enumerate(rng.sample(paths, 12)):
        words = [w.strip(".,").lower() for w in texts[path].split() if len(w) > 4]
        query = " ".join(rng.sample(words, min(3, len(words))))
        queries[f"t{n}"] = query
        qrels.append((f"t{n}", path, 2))
        other = next((p for p in paths if p != path and query.split()[0] in texts[p].lower()), None)
        if other:
            qrels.append((f"t{n}", other, 1))
    query_set = query_set_create(catalog=catalog, name="made", queries=queries_jsonl(queries),
                                 qrels=qrels_tsv(qrels), by="cora")
    return catalog, query_set


def test_each_settings_grid_figure_is_what_search_with_it_scores(judged):
    catalog, query_set = judged
    grid = tuning.candidates(catalog.ranking_settings)
    assert grid[0] == catalog.ranking_settings and len(grid) == len(set(grid)) > 1000
    table = tuning._grid_scores(catalog, query_set.queries, query_set.qrels, grid, lambda *args: None)
    rng = random.Random(3)
    with_bm25_feedback = [next(i for i, s in enumerate(grid) if s.bm25_feedback and s.mode == mode)
                          for mode in ("bm25", "hybrid")]
    for i in [0, len(grid) - 1, *with_bm25_feedback, *rng.sample(range(len(grid)), 30)]:
        settings = grid[i]
        for column, (query_id, text) in enumerate(query_set.queries.items()):
            ranked, _ = rank_query(catalog=catalog, mode=settings.mode, text=text, ranking=settings)
            assert table[i][column] == pytest.approx(score_query(query_id, ranked, query_set.qrels[query_id])
                                                     .ndcg_at_10), (settings, query_id)


def test_every_query_is_scored_by_settings_chosen_without_it(judged):
    catalog, query_set = judged
    calls: list[tuple[str, int, int]] = []
    report = tuning.ranking_tune(catalog=catalog, queries=query_set.queries, qrels=query_set.qrels,
                                 progress=lambda *call: calls.append(call), folds=3)
    grid = tuning.candidates(catalog.ranking_settings)
    table = tuning._grid_scores(catalog, query_set.queries, query_set.qrels, grid, lambda *args: None)
    ids = sorted(query_set.queries)
    for fold, folded in zip(tuning.folds_of(ids, 3), report.folds, strict=True):
        others = [i for i, query_id in enumerate(ids) if query_id not in fold]
        pick = tuning._best(grid, table, others)
        assert report.current.changes(pick) == folded["changes"]
        assert folded["queries"] == len(fold)
        # and its figure is search's own for the fold's queries, ranked with that pick
        chosen = report.current.with_values({name: values[1] for name, values in folded["changes"].items()})
        scored = [score_query(q, rank_query(catalog=catalog, mode=chosen.mode, text=query_set.queries[q],
                                            ranking=chosen)[0], query_set.qrels[q]).ndcg_at_10 for q in fold]
        assert folded["tuned"] == pytest.approx(sum(scored) / len(scored), abs=1e-4)
    assert sorted(query_id for fold in tuning.folds_of(ids, 3) for query_id in fold) == ids
    assert report.chosen == tuning._best(grid, table, list(range(len(ids))))
    for metric in ("ndcg_at_10", "recall_at_100", "mrr_at_10"):
        figures = report.metrics[metric]
        assert figures["gain"] == pytest.approx(figures["tuned"] - figures["current"], abs=2e-4)
    assert report.counts["won"] + report.counts["lost"] + report.counts["tied"] == len(ids)
    assert {stage for stage, _, _ in calls} == {"grid", "held out"}


def test_a_run_done_by_the_worker_stores_its_report(judged, django_capture_on_commit_callbacks):
    catalog, query_set = judged
    with django_capture_on_commit_callbacks() as enqueued:
        run = tuning_request(catalog=catalog, query_set=query_set, by="cora", folds=3)
    assert len(enqueued) == 1 and run.status == "queued"
    assert tasks.tune(run.pk) == "succeeded"
    run.refresh_from_db()
    assert run.progress == 100 and run.report["candidates"] > 1000 and len(run.report["folds"]) == 3
    assert RankingSettings.from_stored(run.current) == catalog.ranking_settings
    assert set(run.report["metrics"]) == {"ndcg_at_10", "recall_at_100", "mrr_at_10"}
    assert tasks.tune(run.pk) == "succeeded"  # again: nothing to do


def test_a_request_that_cannot_run_is_refused(judged, make_catalog):
    from django.core.exceptions import ValidationError

    catalog, query_set = judged
    with pytest.raises(ValidationError):
        tuning_request(catalog=make_catalog("elsewhere"), query_set=query_set, by="cora")
    with pytest.raises(ValidationError):
        tuning_request(catalog=catalog, query_set=query_set, by="cora", folds=13)
    with pytest.raises(ValidationError):
        tuning_request(catalog=catalog, query_set=query_set, by="cora", folds=1)
    assert not TuningRun.objects.exists()


# --- applying ------------------------------------------------------------------------------------


def _finished(catalog: Catalog, query_set, gain: float, chosen: RankingSettings) -> TuningRun:
    current = catalog.ranking_settings
    figures = {"current": 0.3, "tuned": round(0.3 + gain, 4), "gain": gain}
    return TuningRun.objects.create(
        catalog=catalog, query_set=query_set, status="succeeded", created_by="cora", current=current.__dict__,
        chosen=chosen.__dict__, report={"metrics": {"ndcg_at_10": figures}}, finished_at=timezone.now())


def _ranking_audits(catalog):
    return list(AuditEntry.objects.filter(action=Action.RANKING_CHANGED, payload__catalog=catalog.slug))


@pytest.mark.parametrize("gain", [0.0, -0.012])
def test_applying_a_run_without_a_positive_held_out_gain_is_refused(judged, cora, gain):
    catalog, query_set = judged
    run = _finished(catalog, query_set, gain, RankingSettings(k1=0.9, rrf_k=20))
    with pytest.raises(ConflictError, match="not positive"):
        tuning_apply(run=run, by=cora)
    catalog.refresh_from_db()
    assert catalog.ranking == {} and _ranking_audits(catalog) == []
    run.refresh_from_db()
    assert run.applied_at is None


def test_applying_a_gain_sets_the_settings_audited_with_the_run_and_only_once(judged, cora):
    catalog, query_set = judged
    run = _finished(catalog, query_set, 0.021, RankingSettings(k1=0.9, rrf_k=20))
    assert apply_problem(run) is None
    assert tuning_apply(run=run, by=cora) == {"k1": [1.2, 0.9], "rrf_k": [60, 20]}
    catalog.refresh_from_db()
    assert catalog.ranking == {"k1": 0.9, "rrf_k": 20}
    [entry] = _ranking_audits(catalog)
    assert entry.payload["tuning_run"] == run.pk and entry.actor_name == "cora"
    assert run.applied_by == "cora"
    with pytest.raises(ConflictError, match="applied already"):
        tuning_apply(run=run, by=cora)


def test_a_run_tuned_from_settings_since_changed_is_refused(judged, cora):
    catalog, query_set = judged
    run = _finished(catalog, query_set, 0.05, RankingSettings(k1=0.9))
    catalog_ranking_update(catalog=catalog, values={"b": 0.5}, by=cora)
    with pytest.raises(ConflictError, match="changed since"):
        tuning_apply(run=run, by=cora)
    catalog.refresh_from_db()
    assert catalog.ranking == {"b": 0.5}


# --- the pages ------------------------------------------------------------------------------------


def test_the_run_page_shows_the_figures_and_applies_with_one_click(judged, cora, client_for):
    catalog, query_set = judged
    client = client_for(cora)
    refused = _finished(catalog, query_set, -0.01, RankingSettings(k1=0.9))
    page = client.get(f"/tuning/{refused.pk}/").content.decode()
    assert "Cannot be applied" in page and "not positive" in page and "Apply to" not in page

    run = _finished(catalog, query_set, 0.02, RankingSettings(k1=0.9))
    page = client.get(f"/tuning/{run.pk}/").content.decode()
    assert "Apply to tuning" in page and "+0.0200" in page
    response = client.post(f"/tuning/{run.pk}/apply")
    assert response.status_code == 302 and response["Location"].endswith("/catalogs/tuning/#ranking")
    catalog.refresh_from_db()
    assert catalog.ranking == {"k1": 0.9}
    assert client.post(f"/tuning/{refused.pk}/apply").status_code == 302  # back to its page, with the reason
    catalog.refresh_from_db()
    assert catalog.ranking == {"k1": 0.9}


def test_a_curator_starts_a_run_from_the_list(judged, cora, client_for, django_capture_on_commit_callbacks):
    catalog, query_set = judged
    client = client_for(cora)
    assert "Start a tuning run" in client.get("/tuning/").content.decode()
    with django_capture_on_commit_callbacks():
        response = client.post("/tuning/start", {"query_set": query_set.pk, "folds": 4})
    run = TuningRun.objects.get()
    assert response.status_code == 302 and (run.folds, run.catalog_id) == (4, catalog.pk)
    assert client.post("/tuning/start", {"query_set": query_set.pk, "folds": 40}).status_code == 400


def test_a_catalog_ranking_by_bm25_tiebreak_is_tuned_too(judged, cora):
    catalog, query_set = judged
    catalog_ranking_update(catalog=catalog, values={"mode": "bm25_tiebreak"}, by=cora)
    catalog.refresh_from_db()
    report = tuning.ranking_tune(catalog=catalog, queries=query_set.queries, qrels=query_set.qrels, folds=2)
    assert report.current.mode == "bm25_tiebreak" and report.metrics["ndcg_at_10"]["current"] >= 0


def test_a_set_beyond_the_most_queries_a_run_takes_is_refused(judged, monkeypatch):
    from django.core.exceptions import ValidationError

    from retrieval.evaluation import tuning_runs

    catalog, query_set = judged
    monkeypatch.setattr(tuning_runs, "MAX_QUERIES", query_set.query_count - 1)
    with pytest.raises(ValidationError, match="takes at most"):
        tuning_request(catalog=catalog, query_set=query_set, by="cora")
    assert not TuningRun.objects.exists()


def test_a_run_that_chose_the_current_settings_has_nothing_to_apply(judged, cora):
    catalog, query_set = judged
    run = _finished(catalog, query_set, 0.01, catalog.ranking_settings)
    with pytest.raises(ConflictError, match="nothing to apply"):
        tuning_apply(run=run, by=cora)


def test_a_catalog_is_tuned_by_one_run_at_a_time(judged, django_capture_on_commit_callbacks):
    from django.core.exceptions import ValidationError

    catalog, query_set = judged
    with django_capture_on_commit_callbacks():
        first = tuning_request(catalog=catalog, query_set=query_set, by="cora", folds=2)
    with pytest.raises(ValidationError, match=f"Tuning run {first.pk} of tuning is not done yet"):
        tuning_request(catalog=catalog, query_set=query_set, by="cora", folds=2)
    assert tasks.tune(first.pk) == "succeeded"
    with django_capture_on_commit_callbacks():
        tuning_request(catalog=catalog, query_set=query_set, by="cora", folds=2)
    assert TuningRun.objects.count() == 2
