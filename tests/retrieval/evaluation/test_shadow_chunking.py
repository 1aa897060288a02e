"""Chunking runs: a proposed chunk size and overlap built on a hidden shadow of the
catalog from its stored documents, compared with the live catalog on every query, and
dropped unless it did better; applied, the live catalog is re-cut by its own runs and
the shadow dropped. No listing, agent or search request ever sees a shadow, and no
governed content is ever copied into one."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.auth import visible_catalogs
from catalog.errors import ConflictError
from catalog.models import AuditEntry, Catalog, Chunk, Document, IndexRun, ReferenceSource
from catalog.sources.documents import DocumentInput
from retrieval import tasks
from retrieval.evaluation.beir import score_query
from retrieval.evaluation.query_sets import query_set_create
from retrieval.evaluation.ranking import rank_query
from retrieval.evaluation.shadows import shadow_create, shadow_fill
from retrieval.evaluation.tuning_runs import apply_problem, tuning_apply, tuning_request
from retrieval.models import TuningRun
from tests.factories import agent_with_token, import_documents
from tests.retrieval.evaluation.builders import qrels_tsv, queries_jsonl

TOPICS = {
    "retries.md": ("Retries", "Retry transient failures with exponential backoff and jitter. " * 12),
    "caching.md": ("Caching", "Cache responses with a time to live and invalidate on writes. " * 12),
    "logging.md": ("Logging", "Log structured JSON with a request id and never log secrets. " * 12),
}
TOPICS_TEXTS = [text for _, text in TOPICS.values()]
SECRET = "Rotate the vault keys every ninety days and keep the root token offline."


@pytest.fixture
def live(make_catalog):
    catalog = make_catalog("live", chunk_size=1000, chunk_overlap=100)
    import_documents(catalog=catalog, slug="handbook", documents=[
        DocumentInput(path, title, text, len(text.encode())) for path, (title, text) in TOPICS.items()])
    vault = import_documents(catalog=catalog, slug="vault", documents=[
        DocumentInput("vault.md", "Vault", SECRET, len(SECRET))])
    ReferenceSource.objects.filter(pk=vault.pk).update(requires_approval=True)
    catalog.refresh_from_db()
    return catalog


@pytest.fixture
def perfect_set(live):
    """Each query a document's title: the live catalog ranks every one first already."""
    queries = {f"q{i}": title for i, (title, _) in enumerate(TOPICS.values())}
    qrels = [(f"q{i}", path, 1) for i, path in enumerate(TOPICS)]
    return query_set_create(catalog=live, name="titles", queries=queries_jsonl(queries), qrels=qrels_tsv(qrels),
                            by="cora")


def test_a_chunking_that_cannot_be_tried_is_refused(live, perfect_set):
    for chunking, field in [({"chunk_size": 50, "chunk_overlap": 0}, "chunk_size"),
                            ({"chunk_size": 500, "chunk_overlap": 500}, "chunk_overlap"),
                            ({"chunk_size": 1000, "chunk_overlap": 100}, "chunk_size")]:  # the live one
        with pytest.raises(ValidationError) as refused:
            tuning_request(catalog=live, query_set=perfect_set, by="cora", chunking=chunking)
        assert field in refused.value.message_dict
    assert not TuningRun.objects.exists()


def test_a_shadow_holds_what_a_person_may_read_cut_its_own_way_and_nobody_sees_it(live, perfect_set, cora):
    run = TuningRun.objects.create(catalog=live, query_set=perfect_set, created_by="cora", kind="chunking",
                                   proposal={"chunk_size": 200, "chunk_overlap": 20})
    shadow = shadow_create(catalog=live, run=run)
    assert shadow_fill(shadow=shadow, live=live, progress=lambda *args: None) == len(TOPICS)

    assert set(Document.objects.filter(catalog=shadow).values_list("path", flat=True)) == set(TOPICS)
    assert not Chunk.objects.filter(catalog=shadow, content__contains="ninety").exists()  # the vault: not copied
    assert Chunk.objects.filter(catalog=shadow).count() > Chunk.objects.filter(catalog=live).count() - 1
    cut = Chunk.objects.filter(catalog=shadow).values_list("content", flat=True)
    assert max(len(text) for text in cut) <= 400 < max(len(text) for text in TOPICS_TEXTS)
    agent, token = agent_with_token(name="bot", catalogs=[live])
    assert list(visible_catalogs(cora)) == [live] and list(visible_catalogs(agent)) == [live]
    client = APIClient()
    client.force_login(cora)
    assert client.post("/api/v1/search", {"catalog": shadow.slug, "query": "retry"}, format="json").status_code == 404
    assert shadow.slug not in client.get("/catalogs/").content.decode()
    assert client.get(f"/catalogs/{shadow.slug}/").status_code == 404
    assert [c["slug"] for c in client.get("/api/v1/catalogs").json()] == ["live"]


def test_a_shadow_that_does_no_better_is_dropped_and_cannot_be_applied(live, perfect_set, cora,
                                                                      django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks():
        run = tuning_request(catalog=live, query_set=perfect_set, by="cora",
                             chunking={"chunk_size": 300, "chunk_overlap": 30})
    assert tasks.tune(run.pk) == "succeeded"
    run.refresh_from_db()

    assert run.report["metrics"]["ndcg_at_10"]["current"] == 1.0  # nothing to gain on a perfect set
    assert run.report["dropped"] and run.shadow_id is None
    assert not Catalog.objects.exclude(shadow_of=None).exists()
    assert (run.current, run.chosen) == ({"chunk_size": 1000, "chunk_overlap": 100},
                                         {"chunk_size": 300, "chunk_overlap": 30})
    with pytest.raises(ConflictError, match="did no better"):
        tuning_apply(run=run, by=cora)
    live.refresh_from_db()
    assert (live.chunk_size, live.chunk_overlap) == (1000, 100)


def test_the_comparison_is_search_on_each_catalog(live, perfect_set, monkeypatch,
                                                  django_capture_on_commit_callbacks):
    from retrieval.evaluation import shadows

    kept: dict[str, Catalog] = {}
    compare = shadows.shadow_compare

    def watched(**kwargs):
        kept["shadow"] = kwargs["shadow"]
        report = compare(**kwargs)
        for q, text in perfect_set.queries.items():  # each figure is rank_query's, on each catalog
            on_shadow = score_query(q, rank_query(catalog=kwargs["shadow"], mode="hybrid", text=text)[0],
                                    perfect_set.qrels[q])
            assert on_shadow.ndcg_at_10 <= 1.0
        return report

    monkeypatch.setattr(shadows, "shadow_compare", watched)
    with django_capture_on_commit_callbacks():
        run = tuning_request(catalog=live, query_set=perfect_set, by="cora",
                             chunking={"chunk_size": 400, "chunk_overlap": 0})
    assert tasks.tune(run.pk) == "succeeded"
    assert kept["shadow"].shadow_of_id == live.pk and not Catalog.objects.filter(pk=kept["shadow"].pk).exists()


def test_applying_a_better_shadow_recuts_the_live_catalog_audited_and_drops_the_shadow(live, perfect_set, cora):
    run = TuningRun.objects.create(catalog=live, query_set=perfect_set, created_by="cora", kind="chunking",
                                   status="succeeded", finished_at=timezone.now(),
                                   proposal={"chunk_size": 400, "chunk_overlap": 40},
                                   current={"chunk_size": 1000, "chunk_overlap": 100},
                                   chosen={"chunk_size": 400, "chunk_overlap": 40},
                                   report={"metrics": {"ndcg_at_10": {"current": 0.5, "tuned": 0.6, "gain": 0.1}}})
    shadow = shadow_create(catalog=live, run=run)
    TuningRun.objects.filter(pk=run.pk).update(shadow=shadow)
    run.refresh_from_db()
    assert apply_problem(run) is None

    assert tuning_apply(run=run, by=cora) == {"chunk_size": [1000, 400], "chunk_overlap": [100, 40]}

    live.refresh_from_db()
    assert (live.chunk_size, live.chunk_overlap) == (400, 40)
    entry = AuditEntry.objects.get(action="catalog.chunking_changed")
    assert entry.payload["tuning_run"] == run.pk and entry.actor_name == "cora"
    assert IndexRun.objects.filter(catalog=live, full=True).count() == live.sources.count()
    assert not Catalog.objects.filter(pk=shadow.pk).exists()
    run.refresh_from_db()
    assert run.applied_by == "cora" and run.shadow_id is None
    with pytest.raises(ConflictError):
        tuning_apply(run=run, by=cora)
