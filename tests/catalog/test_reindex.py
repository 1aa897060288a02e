"""Incremental reindexing: exact equivalence with a from-scratch build, stable chunk ids,
the embedding cache, index runs, the scheduled scan and the reindex API."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.db import connections
from django_q.models import Schedule
from rest_framework.test import APIClient

from catalog.catalogs import CatalogSettings, catalog_update
from catalog.embedder import default_model_files, get_embedder, reset_embedder
from catalog.indexing.runs import (
    LOCK_NAMESPACE,
    _RunProgress,
    index_run_execute,
    index_run_request,
    runs_recover,
    source_index_now,
    sources_scan,
)
from catalog.indexing.source_index import source_index
from catalog.models import Catalog, Chunk, Document, IndexRun, ReferenceSource, Term
from catalog.tasks import SCAN_SCHEDULE
from retrieval.search.lexical import bm25_search
from tests.catalog.checks import term_postings_mismatches
from tests.factories import agent_with_token

WORDS = ("retry backoff jitter circuit breaker cache ttl invalidate token secret rotate log json metric "
         "trace span queue worker lock lease shard replica index vector search rank fusion chunk "
         "budget deadline timeout failure transient outage alert page review test deploy rollback").split()
QUERIES = ["retry with backoff", "cache invalidate ttl", "worker lock lease", "transient failure alert"]


class Files:
    """A source root whose files get strictly increasing mtimes (no same-second ambiguity)."""

    def __init__(self, root: Path) -> None:
        self.root, self.clock = root, 1_700_000_000.0

    def write(self, name: str, text: str) -> None:
        path = self.root / name
        path.write_text(text, encoding="utf-8")
        self.clock += 1.5
        os.utime(path, (self.clock, self.clock))

    def names(self) -> list[str]:
        return sorted(p.name for p in self.root.glob("*.md"))


def random_text(rng: random.Random) -> str:
    title = " ".join(rng.sample(WORDS, 3)).title()
    sentences = [" ".join(rng.choices(WORDS, k=rng.randint(4, 14))).capitalize() + "."
                 for _ in range(rng.randint(1, 8))]
    return f"# {title}\n\n" + " ".join(sentences) + "\n"


@pytest.fixture
def files(db, tmp_path, settings):
    root = tmp_path / "root"
    root.mkdir()
    settings.LECTERN_SOURCE_ROOTS = [root]
    return Files(root)


def glob_source(slug: str, **catalog_fields) -> ReferenceSource:
    catalog = Catalog.objects.create(slug=slug, name=slug, **{"chunk_size": 200, "chunk_overlap": 40, **catalog_fields})
    return ReferenceSource.objects.create(catalog=catalog, slug="notes", name="Notes", kind="glob", location="*.md")


def snapshot(catalog: Catalog) -> dict:
    catalog.refresh_from_db()
    chunks = sorted(Chunk.objects.filter(catalog=catalog).values_list("document__path", "byte_offset", "content",
                                                                      "heading"))
    scores = {q: sorted((round(s, 9),) for _, _, s in bm25_search(catalog=catalog, query=q, limit=1000)[0])
              for q in QUERIES}
    return {"chunks": chunks, "df": dict(Term.objects.filter(catalog=catalog).values_list("text", "df")),
            "stats": (catalog.chunk_count, catalog.token_total, catalog.term_count, round(catalog.idf_sum, 9)),
            "scores": scores}


def test_random_edits_end_with_exactly_the_from_scratch_index(files):
    rng = random.Random(20261121)
    source = glob_source("incremental")
    for i in range(4):
        files.write(f"doc{i}.md", random_text(rng))
    source_index(source=source)

    for step in range(24):
        names = files.names()
        action = rng.choice(["add", "edit", "edit", "delete", "rename"] if names else ["add"])
        if action == "add":
            files.write(f"new{step}.md", random_text(rng))
        elif action == "edit":
            files.write(rng.choice(names), random_text(rng))
        elif action == "delete":
            (files.root / rng.choice(names)).unlink()
        else:
            old = rng.choice(names)
            (files.root / old).rename(files.root / f"moved{step}.md")
        report = source_index(source=source)
        assert report.documents == len(files.names())
        assert term_postings_mismatches(source.catalog) == [], f"step {step}: {action}"

    scratch = glob_source("scratch")
    source_index(source=scratch)
    assert snapshot(source.catalog) == snapshot(scratch.catalog)


def test_unchanged_documents_keep_their_chunk_ids_and_moved_text_is_not_embedded_again(files):
    rng = random.Random(7)
    for name in ("a.md", "b.md", "c.md"):
        files.write(name, random_text(rng))
    source = glob_source("stable")
    source_index(source=source)
    before = dict(Chunk.objects.filter(document__path="a.md").values_list("key", "pk"))

    files.write("b.md", random_text(rng))
    (files.root / "c.md").rename(files.root / "d.md")
    report = source_index(source=source)

    after = dict(Chunk.objects.filter(document__path="a.md").values_list("key", "pk"))
    assert after == before
    assert (report.added, report.changed, report.removed, report.unchanged) == (1, 1, 1, 1)
    moved_chunks = Chunk.objects.filter(document__path="d.md").count()
    assert report.reused_embeddings >= moved_chunks  # d.md is c.md's text: all from the cache
    assert report.counts["chunks_embedded"] == report.chunks - report.reused_embeddings


def test_a_full_run_rechunks_everything_but_embeds_nothing_new(files):
    files.write("a.md", random_text(random.Random(1)))
    source = glob_source("full")
    source_index(source=source)
    old_pks = set(Chunk.objects.filter(source=source).values_list("pk", flat=True))

    report = source_index(source=source, full=True)

    assert report.changed == 1
    assert report.counts["chunks_embedded"] == 0
    assert set(Chunk.objects.filter(source=source).values_list("pk", flat=True)).isdisjoint(old_pks)


# --- chunking settings: what a run rebuilds -------------------------------------------------


def rechunk(catalog: Catalog, size: int, overlap: int) -> None:
    """The curator's edit of the catalog's chunking (the dashboard's service)."""
    catalog_update(catalog=catalog, settings=CatalogSettings(name=catalog.name, chunk_size=size,
                                                             chunk_overlap=overlap))


def written_files(files: Files, count: int, seed: int) -> None:
    rng = random.Random(seed)
    for i in range(count):
        files.write(f"doc{i}.md", random_text(rng) + random_text(rng))


def test_a_changed_chunk_size_is_rebuilt_by_the_next_run_even_one_not_full(files):
    # given: a source indexed at 200/40, then its catalog changed to 120/20
    written_files(files, 4, seed=30)
    source = glob_source("resized")
    source_index_now(source=source, trigger=IndexRun.Trigger.COMMAND)
    rechunk(source.catalog, 120, 20)

    # when: a run that is not full (the scan's, an edit's)
    run = source_index_now(source=source, trigger=IndexRun.Trigger.COMMAND)
    again = source_index_now(source=source, trigger=IndexRun.Trigger.COMMAND)

    # then: every document is cut again, as a catalog built at 120/20 from scratch is
    assert (run.full, run.counts["documents_changed"], run.counts["documents_unchanged"]) == (False, 4, 0)
    assert max(len(c) for c in Chunk.objects.filter(source=source).values_list("content", flat=True)) <= 120
    scratch = glob_source("scratch", chunk_size=120, chunk_overlap=20)
    source_index(source=scratch)
    assert snapshot(source.catalog) == snapshot(scratch.catalog)
    assert again.counts["chunks_written"] == 0 and again.counts["documents_unchanged"] == 4


@pytest.fixture
def model_switch(settings):
    """Turn the embedding model off and on again, as a deployment's setting would."""
    chosen = settings.LECTERN_EMBEDDING_MODEL

    def switch(on: bool) -> None:
        settings.LECTERN_EMBEDDING_MODEL = chosen if on else "none"
        reset_embedder()

    yield switch
    switch(True)


@pytest.mark.parametrize("change", ["chunk_size", "chunk_overlap", "chunker", "model"])
def test_the_scan_rebuilds_a_source_cut_under_other_settings_with_unchanged_files(
        change, files, model_switch, django_capture_on_commit_callbacks):
    # given: an indexed source whose files do not change afterwards
    written_files(files, 3, seed=31)
    if change == "model":
        model_switch(False)  # indexed lexical-only: no vectors
    source = glob_source("settings")
    source_index_now(source=source, trigger=IndexRun.Trigger.COMMAND)
    assert sources_scan() == []  # nothing moved yet

    # when: what cuts its chunks changes: the catalog's size or overlap, the chunker
    # (rows written by the version before carry no stamp: the upgrade), or the model
    if change == "chunk_size":
        rechunk(source.catalog, 150, 40)
    elif change == "chunk_overlap":
        rechunk(source.catalog, 200, 10)
    elif change == "chunker":
        Document.objects.filter(source=source).update(chunking="")
    else:
        model_switch(True)
    with django_capture_on_commit_callbacks(execute=True):
        runs = sources_scan()  # the sync queue executes each run on commit

    # then: the scan queues a run (not a full one), which rebuilds every document as a
    # from-scratch build under the new settings does; the next scan finds nothing to do
    assert [(run.source_id, run.full) for run in runs] == [(source.pk, False)]
    run = IndexRun.objects.get(pk=runs[0].pk)
    assert run.status == IndexRun.Status.SUCCEEDED and run.counts["documents_changed"] == 3
    scratch = glob_source("scratch", chunk_size=source.catalog.chunk_size, chunk_overlap=source.catalog.chunk_overlap)
    source_index(source=scratch)
    assert snapshot(source.catalog) == snapshot(scratch.catalog)
    vectors = Chunk.objects.filter(source=source, embedding__isnull=False).count()
    assert vectors == Chunk.objects.filter(source=source).count() > 0
    assert sources_scan() == []


@pytest.fixture(params=["switched off", "failing to load"])
def model_outage(request, settings, tmp_path):
    """The embedding model, configured as a directory of its own (the default model's
    files), taken away from this process and given back: switched off
    (LECTERN_EMBEDDING_MODEL=none), or failing to load as a worker's does when its model
    file is missing (get_embedder remembers the failure for the life of the process)."""
    files = default_model_files()
    folder = tmp_path / "minilm"
    folder.mkdir()
    (folder / "tokenizer.json").symlink_to(files.tokenizer)
    (folder / "SHA256SUMS").write_text("".join(f"{digest}  {name}\n" for name, digest in files.sha256.items()))
    model = folder / "model.onnx"
    model.symlink_to(files.model)
    configured = settings.LECTERN_EMBEDDING_MODEL = str(folder)
    reset_embedder()

    def outage(down: bool) -> None:
        if request.param == "switched off":
            settings.LECTERN_EMBEDDING_MODEL = "none" if down else configured
        elif down:
            model.unlink()
        else:
            model.symlink_to(files.model)
        reset_embedder()
        assert (get_embedder() is None) == down

    yield outage
    reset_embedder()


def vectors_by_chunk(source: ReferenceSource) -> dict[int, str | None]:
    """Each chunk's vector (its text form; None: lexical only), by chunk id."""
    return {pk: None if vector is None else str(list(vector))
            for pk, vector in Chunk.objects.filter(source=source).values_list("pk", "embedding")}


def test_while_the_model_is_down_the_scan_queues_nothing_for_unchanged_sources(files, model_outage):
    # given: a source indexed with the model, whose files do not change afterwards
    written_files(files, 3, seed=32)
    source = glob_source("outage")
    source_index_now(source=source, trigger=IndexRun.Trigger.COMMAND)
    before = vectors_by_chunk(source)
    assert before and None not in before.values()

    # when: the model is down for this process (a worker) and the scan runs
    model_outage(True)
    runs = sources_scan()

    # then: nothing is queued; every chunk keeps its vector
    assert runs == []
    assert vectors_by_chunk(source) == before


def test_a_run_while_the_model_is_down_recuts_only_the_changed_document_and_the_model_embeds_it_later(
        files, model_outage, django_capture_on_commit_callbacks):
    # given: a source indexed with the model; then the model is down and one file changes
    written_files(files, 3, seed=33)
    source = glob_source("outage")
    source_index_now(source=source, trigger=IndexRun.Trigger.COMMAND)
    kept = {pk: vector for pk, vector in vectors_by_chunk(source).items()
            if Chunk.objects.filter(pk=pk).exclude(document__path="doc1.md").exists()}
    model_outage(True)
    files.write("doc1.md", random_text(random.Random(34)))

    # when: a run of the source while the model is down
    down = source_index_now(source=source, trigger=IndexRun.Trigger.COMMAND)

    # then: only the changed document is cut again (lexical only); the others keep
    # their chunks and vectors
    assert (down.counts["documents_changed"], down.counts["documents_unchanged"]) == (1, 2)
    after = vectors_by_chunk(source)
    assert {pk: after.get(pk) for pk in kept} == kept
    lexical = Chunk.objects.filter(source=source, document__path="doc1.md")
    assert lexical.exists() and not lexical.filter(embedding__isnull=False).exists()

    # when: the model is back and the scan runs
    model_outage(False)
    with django_capture_on_commit_callbacks(execute=True):
        runs = sources_scan()  # the sync queue executes each run on commit

    # then: the scan's run cuts the lexical document again and embeds it, leaving the
    # others alone: every chunk has a vector, the index is a from-scratch build's
    assert [run.source_id for run in runs] == [source.pk]
    back = IndexRun.objects.get(pk=runs[0].pk)
    assert (back.counts["documents_changed"], back.counts["documents_unchanged"]) == (1, 2)
    after = vectors_by_chunk(source)
    assert {pk: after.get(pk) for pk in kept} == kept and None not in after.values()
    scratch = glob_source("scratch")
    source_index(source=scratch)
    assert snapshot(source.catalog) == snapshot(scratch.catalog)
    assert sources_scan() == []


def test_an_index_run_records_counts_progress_and_timings(files):
    files.write("a.md", random_text(random.Random(2)))
    source = glob_source("runs")

    run = source_index_now(source=source, trigger=IndexRun.Trigger.COMMAND)

    assert run.status == IndexRun.Status.SUCCEEDED
    assert run.progress == 100
    assert run.counts["documents_added"] == 1
    assert set(run.timings) == {"collect", "chunk", "embed", "write"}
    assert run.started_at is not None and run.finished_at is not None
    assert run.started_at <= run.finished_at


def test_a_run_shows_each_new_stage_at_once_and_throttles_progress_within_one(files):
    source = glob_source("stages")
    run = IndexRun.objects.create(catalog=source.catalog, source=source, trigger="api", status="running")
    report = _RunProgress(run.pk)

    def seen() -> tuple[str, int]:
        run.refresh_from_db()
        return run.stage, run.progress

    report("chunk", 0, 3)
    assert seen()[0] == "chunk"
    report("embed", 0, 100)  # microseconds later: a new stage is written all the same
    assert seen()[0] == "embed"
    before = seen()
    report("embed", 50, 100)  # the same stage within half a second waits
    assert seen() == before
    report("embed", 100, 100)  # a stage's end is always written
    assert seen()[0] == "embed" and seen()[1] > before[1]


def test_executing_a_finished_run_again_does_nothing(files):
    files.write("a.md", random_text(random.Random(3)))
    source = glob_source("idem")
    run = source_index_now(source=source, trigger=IndexRun.Trigger.COMMAND)
    finished_at = run.finished_at

    again = index_run_execute(run_id=run.pk)

    assert again is not None
    assert again.finished_at == finished_at
    assert again.status == IndexRun.Status.SUCCEEDED


def test_a_run_left_running_by_a_dead_worker_is_failed_by_the_next(files):
    files.write("a.md", random_text(random.Random(4)))
    source = glob_source("stale")
    dead = IndexRun.objects.create(catalog=source.catalog, source=source, trigger="schedule", status="running")

    run = source_index_now(source=source, trigger=IndexRun.Trigger.COMMAND)

    dead.refresh_from_db()
    assert run.status == IndexRun.Status.SUCCEEDED
    assert dead.status == IndexRun.Status.FAILED
    assert "interrupted" in dead.error


def test_a_second_request_returns_the_queued_run(files):
    source = glob_source("queue")

    first, created = index_run_request(source=source, trigger=IndexRun.Trigger.API)
    second, created_again = index_run_request(source=source, trigger=IndexRun.Trigger.API)
    full, created_full = index_run_request(source=source, trigger=IndexRun.Trigger.API, full=True)

    assert created and not created_again and second.pk == first.pk
    assert created_full and full.pk != first.pk
    assert IndexRun.objects.filter(source=source).count() == 2


def test_the_scan_requests_runs_only_where_the_fingerprint_moved(files, django_capture_on_commit_callbacks):
    rng = random.Random(5)
    files.write("a.md", random_text(rng))
    source = glob_source("scan")
    broken = ReferenceSource.objects.create(catalog=source.catalog, slug="broken", name="Broken", kind="glob",
                                            location="../outside/*.md")
    source_index(source=source)

    quiet = sources_scan()
    files.write("a.md", random_text(rng))
    with django_capture_on_commit_callbacks(execute=True):
        moved = sources_scan()

    broken.refresh_from_db()
    assert [r.source_id for r in quiet] == []
    assert [r.source_id for r in moved] == [source.pk]
    assert IndexRun.objects.get(pk=moved[0].pk).status == IndexRun.Status.SUCCEEDED  # sync queue in tests
    assert broken.status == ReferenceSource.Status.ERROR
    assert ".." in broken.last_error


def test_the_scan_schedule_follows_the_setting(db):
    schedule = Schedule.objects.get(name=SCAN_SCHEDULE)

    assert schedule.func == "catalog.tasks.scan"
    assert schedule.schedule_type == Schedule.MINUTES


# --- API ------------------------------------------------------------------------------------


def token_for(name: str, catalogs: list[Catalog], *, curator: bool) -> str:
    _, token = agent_with_token(name=name, catalogs=catalogs, is_curator=curator)
    return token


def api(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def test_a_curator_token_queues_a_run_and_watches_it(files, django_capture_on_commit_callbacks):
    files.write("a.md", random_text(random.Random(6)))
    source = glob_source("api")
    client = api(token_for("curator", [source.catalog], curator=True))

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/api/v1/catalogs/api/reindex?source=notes&full=true")
    run_id = response.json()["runs"][0]["id"]
    watched = client.get(f"/api/v1/index-runs/{run_id}")

    assert response.status_code == 202
    assert response.json()["runs"][0]["source"] == "notes"
    assert watched.status_code == 200
    assert watched.json()["status"] == "succeeded"
    assert watched.json()["counts"]["documents_added"] == 1


def test_reindex_refusals_change_nothing(files):
    source = glob_source("guarded")
    other = Catalog.objects.create(slug="other", name="Other")
    reader = api(token_for("reader", [source.catalog], curator=False))
    outsider = api(token_for("outsider", [other], curator=True))

    denied = reader.post("/api/v1/catalogs/guarded/reindex")
    hidden = outsider.post("/api/v1/catalogs/guarded/reindex")
    curator = api(token_for("curator2", [source.catalog], curator=True))
    bad = curator.post("/api/v1/catalogs/guarded/reindex?full=maybe")
    missing = curator.post("/api/v1/catalogs/guarded/reindex?source=nope")
    direct = IndexRun.objects.create(catalog=source.catalog, source=source, trigger="api")
    run_hidden = outsider.get(f"/api/v1/index-runs/{direct.pk}")

    assert (denied.status_code, denied.json()["error"]["code"]) == (403, "forbidden")
    assert hidden.status_code == 404 and bad.status_code == 400 and missing.status_code == 404
    assert run_hidden.status_code == 404
    assert IndexRun.objects.filter(source=source).count() == 1  # only the one this test made directly


def test_a_dead_workers_running_run_does_not_swallow_new_requests(files):
    source = glob_source("dead")
    ReferenceSource.objects.filter(pk=source.pk).update(status=ReferenceSource.Status.INDEXING)
    dead = IndexRun.objects.create(catalog=source.catalog, source=source, trigger="schedule", status="running")

    run, created = index_run_request(source=source, trigger=IndexRun.Trigger.API)

    dead.refresh_from_db()
    source.refresh_from_db()
    assert created and run.pk != dead.pk and run.status == IndexRun.Status.QUEUED
    assert dead.status == IndexRun.Status.FAILED
    assert source.status == ReferenceSource.Status.ERROR and "interrupted" in source.last_error


@contextmanager
def another_session_holding(source: ReferenceSource) -> Iterator[None]:
    """The source's advisory lock held by another connection, as a live writer holds it.
    Released explicitly: a closed connection's locks are freed some time after close()."""
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s, %s)", [LOCK_NAMESPACE, source.pk])
        yield
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, source.pk])
    finally:
        other.close()


def test_recovery_fails_an_orphaned_run_and_queues_its_source_again(files, django_capture_on_commit_callbacks):
    files.write("a.md", random_text(random.Random(8)))
    source = glob_source("orphan")
    ReferenceSource.objects.filter(pk=source.pk).update(status=ReferenceSource.Status.INDEXING)
    orphan = IndexRun.objects.create(catalog=source.catalog, source=source, trigger="schedule", status="running")

    with django_capture_on_commit_callbacks(execute=True):
        recovered = runs_recover()  # the sync queue executes the new run on commit

    orphan.refresh_from_db()
    assert orphan.status == IndexRun.Status.FAILED and "interrupted" in orphan.error
    assert [(run.source_id, run.trigger) for run in recovered] == [(source.pk, IndexRun.Trigger.RECOVERY)]
    assert IndexRun.objects.get(pk=recovered[0].pk).status == IndexRun.Status.SUCCEEDED
    assert ReferenceSource.objects.get(pk=source.pk).status == ReferenceSource.Status.READY


def test_recovery_carries_an_interrupted_full_run_on_as_a_full_run(files, django_capture_on_commit_callbacks):
    # given: a full run left running by a dead worker, and a run that was not full
    files.write("a.md", random_text(random.Random(11)))
    source = glob_source("orphan-full")
    other = ReferenceSource.objects.create(catalog=source.catalog, slug="other", name="Other", kind="glob",
                                           location="*.md")
    IndexRun.objects.create(catalog=source.catalog, source=source, trigger="ui", status="running", full=True)
    IndexRun.objects.create(catalog=source.catalog, source=other, trigger="ui", status="running", full=False)

    with django_capture_on_commit_callbacks(execute=True):
        recovered = runs_recover()

    assert sorted((run.source_id, run.full) for run in recovered) == [(source.pk, True), (other.pk, False)]


def test_a_run_that_fails_an_interrupted_full_run_becomes_full(files):
    files.write("a.md", random_text(random.Random(12)))
    source = glob_source("taken-over")
    source_index_now(source=source, trigger=IndexRun.Trigger.COMMAND)
    dead = IndexRun.objects.create(catalog=source.catalog, source=source, trigger="ui", status="running", full=True)

    run = source_index_now(source=source, trigger=IndexRun.Trigger.COMMAND)

    dead.refresh_from_db()
    assert dead.status == IndexRun.Status.FAILED
    assert run.full and run.counts["documents_changed"] == 1


def test_recovery_leaves_a_run_whose_worker_holds_the_source_lock(files):
    source = glob_source("alive")
    alive = IndexRun.objects.create(catalog=source.catalog, source=source, trigger="schedule", status="running")
    with another_session_holding(source):  # the live worker's session
        recovered = runs_recover()
        request, created = index_run_request(source=source, trigger=IndexRun.Trigger.API)

    alive.refresh_from_db()
    assert recovered == [] and alive.status == IndexRun.Status.RUNNING
    assert created and request.pk != alive.pk and request.status == IndexRun.Status.QUEUED


def test_recovery_enqueues_a_queued_run_whose_task_is_gone(files):
    files.write("a.md", random_text(random.Random(9)))
    source = glob_source("lost")
    lost = IndexRun.objects.create(catalog=source.catalog, source=source, trigger="api")

    recovered = runs_recover()

    lost.refresh_from_db()
    assert [run.pk for run in recovered] == [lost.pk]
    assert lost.status == IndexRun.Status.SUCCEEDED


def test_the_scan_leaves_a_source_a_writer_holds(files):
    files.write("a.md", random_text(random.Random(10)))
    source = glob_source("held")
    with another_session_holding(source):
        held = sources_scan()
    free = sources_scan()

    assert held == []
    assert [run.source_id for run in free] == [source.pk]


@pytest.mark.parametrize("full", ["1", "yes", "on", "ture", "TRUE"])
def test_full_is_true_or_false_as_the_schema_says_anything_else_is_refused(full, files):
    source = glob_source("api")
    client = api(token_for("curator", [source.catalog], curator=True))
    before = IndexRun.objects.count()

    response = client.post(f"/api/v1/catalogs/api/reindex?full={full}")

    assert response.status_code == 400 and response.json()["error"]["details"]["fields"]["full"]
    assert IndexRun.objects.count() == before
