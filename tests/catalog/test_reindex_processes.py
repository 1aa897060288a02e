"""Index runs in real processes (`manage.py index`, `import_jsonl` and `qcluster`
children on the test database).

A worker SIGKILLed while embedding, or inside the write transaction, leaves the previous
generation searchable and exactly consistent (no orphan rows, exact term frequencies and
catalog statistics); its run stays "running" until the next run, or a restarted worker,
fails it as interrupted and builds exactly what a from-scratch build holds. Two writers
of one source serialise on the source's advisory lock: one does the work, the other
waits and finds none; an import holds its source against the scan; an edit made while
a run works is indexed by the run the API hands back, and is never answered with a 500
(curators putting files at once while a worker indexes, a PUT arriving while a run
holds the catalog row in its write, a PUT losing a deadlock), nor is a dashboard save
losing one (an edit of a source, or a new one, stored only with the run that indexes it).

Every kill and every check happens at a point the test holds the child at (a barrier:
a lock the child must wait for), never after a sleep or at a progress threshold, so the
outcome does not depend on how fast the machine is.

The children see only committed rows, hence `transactional_db`. Their database
connections are tagged with PGAPPNAME so that pg_stat_activity and pg_locks tell them
apart from this process's connections.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np
import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.urls import reverse
from django_q.conf import Conf
from django_q.models import Schedule
from rest_framework.test import APIClient

from catalog import analysis
from catalog.catalogs import CatalogSettings, catalog_update
from catalog.embedder import get_embedder, vector_literal
from catalog.indexing.chunks import prepare_chunks
from catalog.indexing.embedding_cache import EMBED_GROUP
from catalog.indexing.runs import (
    LOCK_NAMESPACE,
    index_run_create,
    index_run_execute,
    index_run_request,
    runs_recover,
    source_import,
    source_index_now,
    sources_scan,
)
from catalog.indexing.source_index import source_index
from catalog.models import Catalog, Chunk, Document, EmbeddingCache, IndexRun, ReferenceSource, Term, UploadedFile
from catalog.sources.beir import parse_beir_jsonl
from catalog.sources.documents import DocumentInput, source_fingerprint
from catalog.sources.editing import upload_put, uploads_replace
from catalog.sources.fingerprints import text_sha256
from catalog.tag_keys import tag_key
from config import embedded_pg
from retrieval.search.lexical import bm25_search
from retrieval.search.selectors import SearchOptions, chunk_search
from tests.catalog.checks import term_postings_mismatches
from tests.config.servers import child_env
from tests.factories import agent_with_token, person

BASE_DIR = Path(__file__).resolve().parents[2]
FIRST = "firstgen"  # in every first-generation chunk (its document's title is the heading)
SECOND = "secondgen"  # in every second-generation chunk
WORDS = {
    FIRST: "retry backoff jitter circuit breaker cache ttl invalidate token secret rotate log json metric".split(),
    SECOND: ("harbor lantern meadow orchard pebble quarry ribbon saddle thimble velvet walnut yarrow anchor "
             "beacon cobble dune ember fjord glacier hollow inlet juniper kelp lagoon marsh").split(),
}
QUERIES = [FIRST, SECOND, f"{FIRST} retry cache", f"{SECOND} harbor glacier", "lantern token"]
POLL = 0.02


# --- files and generations ---------------------------------------------------------------


class Tree:
    """A source root whose writes get strictly increasing mtimes; `tag` makes this test's
    texts unique, so no other run's embedding cache can stand in for the embedder."""

    def __init__(self, root: Path) -> None:
        self.root, self.clock, self.tag = root, 1_700_000_000.0, uuid.uuid4().hex[:8]

    def write(self, name: str, generation: str, sentences: int, seed: int) -> None:
        rng = random.Random(seed)  # sizes (and so chunk counts) do not depend on the tag
        words = WORDS[generation]
        body = " ".join(" ".join(rng.choices(words, k=rng.randint(6, 12))).capitalize() + "."
                        for _ in range(sentences))
        path = self.root / name
        path.write_text(f"# {generation.title()} {self.tag} {name}\n\n{body}\n", encoding="utf-8")
        self.clock += 1.5
        os.utime(path, (self.clock, self.clock))

    def first_generation(self) -> None:
        for seed, name in enumerate(("a.md", "b.md", "c.md")):
            self.write(name, FIRST, 4, seed)

    def second_generation(self, new_documents: int, sentences: int = 40) -> None:
        """a.md changes, b.md stays, c.md goes, d*.md are new."""
        self.write("a.md", SECOND, sentences, 100)
        (self.root / "c.md").unlink()
        for i in range(new_documents):
            self.write(f"d{i:02d}.md", SECOND, sentences, 200 + i)

    def documents(self) -> list[DocumentInput]:
        return [DocumentInput(p.name, p.read_text().splitlines()[0][2:], p.read_text(), p.stat().st_size)
                for p in sorted(self.root.glob("*.md"))]


@pytest.fixture
def tree(tmp_path, settings) -> Tree:
    root = tmp_path / "root"
    root.mkdir()
    settings.LECTERN_SOURCE_ROOTS = [root]
    return Tree(root)


def glob_source(slug: str, chunk_size: int = 200, chunk_overlap: int = 40) -> ReferenceSource:
    catalog = Catalog.objects.create(slug=slug, name=slug, chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    return ReferenceSource.objects.create(catalog=catalog, slug="notes", name="Notes", kind="glob", location="*.md")


def run_in_process(source: ReferenceSource) -> IndexRun:
    run = index_run_execute(run_id=index_run_create(source=source, trigger=IndexRun.Trigger.COMMAND).pk)
    assert run is not None
    assert run.status == IndexRun.Status.SUCCEEDED, run.error
    return run


# --- child processes and the database's view of them ------------------------------------


class Child(subprocess.Popen[bytes]):
    log: Path  # where its stdout and stderr go


class Children:
    def __init__(self, tmp_path: Path, root: Path) -> None:
        self.app = f"lectern-test-child-{uuid.uuid4().hex[:8]}"
        self.env = {**os.environ, **child_env(LECTERN_SOURCE_ROOTS=str(root), PGAPPNAME=self.app)}
        self.tmp_path = tmp_path
        self.started: list[Child] = []

    def start(self, source: ReferenceSource) -> Child:
        """`manage.py index` of one source."""
        return self.command("index", "--catalog", source.catalog.slug, "--source", source.slug, "--no-progress")

    def command(self, *args: str) -> Child:
        log = self.tmp_path / f"child-{len(self.started)}.log"
        with open(log, "wb") as out:
            child = Child([sys.executable, "manage.py", *args], cwd=BASE_DIR, env=self.env, stdout=out,
                                     stderr=subprocess.STDOUT)
        child.log = log
        self.started.append(child)
        return child

    def finish(self, child: Child, timeout: float = 120) -> str:
        """The output of a child that must exit 0 within `timeout` seconds."""
        try:
            rc = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            pytest.fail(f"child {child.pid} still running after {timeout}s:\n{output(child)}")
        assert rc == 0, f"child {child.pid} exited {rc}:\n{output(child)}"
        return output(child)

    def kill(self, child: Child, backend: dict) -> None:
        """SIGKILL a child held at a barrier, and end its backend: one waiting for a lock
        notices its client is gone only once granted the lock."""
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [backend["pid"]])
        self.wait_gone()

    def backends(self) -> list[dict]:
        """The children's live connections to the test database."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid, state, wait_event_type, query, backend_xid IS NOT NULL FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = %s", [self.app])
            keys = ("pid", "state", "wait_event_type", "query", "wrote")
            return [dict(zip(keys, row, strict=True)) for row in cursor.fetchall()]

    def wait_gone(self, timeout: float = 30) -> None:
        wait_for(lambda: not self.backends(), timeout, "the killed children's backends to exit")

    def close(self) -> None:
        for child in self.started:
            if child.poll() is None:
                child.kill()
            child.wait(timeout=30)
        if self.backends():  # one blocked on a lock outlives its client: end it, or the flush waits
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                               "WHERE datname = current_database() AND application_name = %s", [self.app])
            self.wait_gone()


def output(child: Child) -> str:
    return child.log.read_text(errors="replace")[-4000:]


@pytest.fixture
def children(transactional_db, tree, tmp_path):
    spawned = Children(tmp_path, tree.root)
    try:
        yield spawned
    finally:
        spawned.close()


def second_connection(application_name: str, *, user: str | None = None) -> psycopg.Connection:
    """A second connection of this process to the test database (as the app, unless
    `user` names another role of the same server)."""
    s = connection.settings_dict
    password = s["PASSWORD"] if user is None else None
    return psycopg.connect(dbname=s["NAME"], user=user or s["USER"], password=password, host=s["HOST"],
                           port=s["PORT"] or None, application_name=application_name)


@pytest.fixture
def holder(transactional_db):
    """A connection for holding row locks the children run into."""
    conn = second_connection("lectern-test-holder")
    try:
        yield conn
    finally:
        conn.close()


class Barrier:
    """Where a worker embedding a source's chunks stops until the test lets it go on.

    An uncommitted row of the embedding cache for one text: a worker caching that text's
    vector (INSERT ... ON CONFLICT DO NOTHING) waits for this transaction. Chunks are
    embedded shortest first, in groups each cached as soon as it is done, so holding the
    longest text stops the worker in its last group with every group before it cached.
    """

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def hold(self, catalog: Catalog, documents: list[DocumentInput]) -> list[str]:
        """Hold the last text a run indexing `documents` embeds; returns every text it embeds."""
        embedder = get_embedder()
        assert embedder is not None
        texts = [chunk.text for chunk in prepare_chunks(catalog, documents, embedder)]
        self.conn.execute("INSERT INTO catalog_embeddingcache (model, text_sha256, embedding, created_at) "
                          "VALUES (%s, %s, %s::vector, now())",
                          [embedder.model_id, text_sha256(max(texts, key=len)), vector_literal(np.ones(384))])
        return texts

    def release(self) -> None:
        self.conn.rollback()


@pytest.fixture
def barrier(transactional_db):
    conn = second_connection("lectern-test-barrier")
    try:
        yield Barrier(conn)
    finally:
        conn.close()


def at_barrier(children: Children) -> dict | None:
    """The child backend waiting at the barrier."""
    return next((b for b in children.backends() if b["state"] == "active" and b["wait_event_type"] == "Lock"
                 and "INSERT INTO catalog_embeddingcache" in b["query"]), None)


Found = TypeVar("Found")


def wait_for(predicate: Callable[[], Found | None], timeout: float, what: str,
             alive: tuple[Child, ...] = ()) -> Found:
    """What `predicate` returns once it is truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        for child in alive:
            if child.poll() is not None:
                pytest.fail(f"child {child.pid} exited {child.returncode} while waiting for {what}:\n{output(child)}")
        if time.monotonic() > deadline:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pid, application_name, state, wait_event_type, wait_event, left(query, 120) "
                               "FROM pg_stat_activity WHERE datname = current_database()")
                activity = "\n".join(map(str, cursor.fetchall()))
            pytest.fail(f"timed out after {timeout}s waiting for {what}; connections:\n{activity}")
        time.sleep(POLL)


def latest_run(source: ReferenceSource, after: int = 0) -> IndexRun:
    run = IndexRun.objects.filter(source=source, pk__gt=after).order_by("-pk").first()
    assert run is not None, f"no run of {source} after run {after}"
    return run


def ran_after(later: IndexRun, earlier: IndexRun) -> bool:
    """`later` started once `earlier` had finished: one writer at a time."""
    assert later.started_at is not None and earlier.finished_at is not None
    return later.started_at >= earlier.finished_at


def lock_source_row(holder: psycopg.Connection, source: ReferenceSource) -> None:
    """Hold the source row FOR NO KEY UPDATE (open transaction): foreign-key checks (KEY
    SHARE) pass, so a worker writes documents, chunks, postings (per chunk and term-major)
    and terms, refreshes the statistics, and then blocks on the last statement of
    source_apply_diff's transaction, the update of the source row."""
    holder.execute("SELECT 1 FROM catalog_referencesource WHERE id = %s FOR NO KEY UPDATE", [source.pk])


def blocked_in_write(children: Children) -> dict | None:
    """The child backend that waits on the source row lock with its writes done."""
    for backend in children.backends():
        if (backend["state"] == "active" and backend["wait_event_type"] == "Lock" and backend["wrote"]
                and backend["query"].startswith('UPDATE "catalog_referencesource"')):
            return backend
    return None


def relations_written(pid: int) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT relation::regclass::text FROM pg_locks WHERE pid = %s AND mode = 'RowExclusiveLock' "
                       "AND locktype = 'relation'", [pid])
        return {row[0] for row in cursor.fetchall()}


def advisory_lock(source: ReferenceSource) -> list[tuple[int, bool]]:
    """(pid, granted) of every session holding or awaiting the source's advisory lock."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid, granted FROM pg_locks WHERE locktype = 'advisory' AND classid = %s "
                       "AND objid = %s AND objsubid = 2 AND database = "
                       "(SELECT oid FROM pg_database WHERE datname = current_database())",
                       [LOCK_NAMESPACE, source.pk])
        return cursor.fetchall()


# --- what the index holds -----------------------------------------------------------------


def snapshot(catalog: Catalog) -> dict:
    """Everything a reader sees, by path: comparable across catalogs."""
    catalog.refresh_from_db()
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT d.path, c.ordinal, c.byte_offset, c.content, c.heading, c.token_count, c.embedding::text,
                   p.length, (SELECT array_agg(t.text || ':' || f ORDER BY t.text)
                              FROM unnest(p.terms, p.tfs) AS x(term_id, f) JOIN catalog_term t ON t.id = x.term_id)
            FROM catalog_chunk c JOIN catalog_document d ON d.id = c.document_id
            LEFT JOIN catalog_postings p ON p.chunk_id = c.id
            WHERE c.catalog_id = %s ORDER BY d.path, c.byte_offset
            """, [catalog.pk])
        chunks = cursor.fetchall()
    scores = {q: sorted(round(s, 9) for _, _, s in bm25_search(catalog=catalog, query=q, limit=1000)[0])
              for q in QUERIES}
    return {
        "documents": sorted(Document.objects.filter(catalog=catalog).values_list("path", "title", "content_sha256",
                                                                                 "text")),
        "chunks": chunks,
        "df": dict(Term.objects.filter(catalog=catalog).values_list("text", "df")),
        "stats": (catalog.chunk_count, catalog.token_total, catalog.term_count, round(catalog.idf_sum, 9)),
        "scores": scores,
    }


def from_scratch(tree: Tree, chunk_size: int = 200, chunk_overlap: int = 40) -> dict:
    """What a fresh catalog built from the files as they are now holds."""
    reference = glob_source(f"scratch-{tree.tag}", chunk_size, chunk_overlap)
    source_index(source=reference)
    return snapshot(reference.catalog)


def rows(sql: str, params: list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def assert_consistent(catalog: Catalog) -> None:
    """No orphan or duplicate rows; term frequencies and catalog statistics equal a
    recomputation from the postings."""
    catalog.refresh_from_db()
    pk = catalog.pk
    assert rows("""SELECT c.id FROM catalog_chunk c LEFT JOIN catalog_document d ON d.id = c.document_id
                   LEFT JOIN catalog_referencesource s ON s.id = d.source_id
                   WHERE c.catalog_id = %s AND (s.id IS NULL OR c.source_id <> d.source_id
                                                OR d.catalog_id <> c.catalog_id OR s.catalog_id <> c.catalog_id)""",
                [pk]) == [], "chunks without a document of an existing source of this catalog"
    assert rows("""SELECT p.chunk_id FROM catalog_postings p LEFT JOIN catalog_chunk c ON c.id = p.chunk_id
                   WHERE p.catalog_id = %s AND (c.id IS NULL OR c.catalog_id <> p.catalog_id)""",
                [pk]) == [], "postings without a chunk"
    assert rows("""SELECT c.id FROM catalog_chunk c LEFT JOIN catalog_postings p ON p.chunk_id = c.id
                   WHERE c.catalog_id = %s AND (p.chunk_id IS NULL OR cardinality(p.terms) <> cardinality(p.tfs))""",
                [pk]) == [], "chunks without (well-formed) postings"
    assert term_postings_mismatches(catalog) == [], "term-major postings differ from the per-chunk arrays"
    assert rows("""SELECT d.id FROM catalog_document d LEFT JOIN catalog_chunk c ON c.document_id = d.id
                   WHERE d.catalog_id = %s AND c.id IS NULL""", [pk]) == [], "documents without chunks"
    assert rows("""SELECT document_id, byte_offset, count(*) FROM catalog_chunk WHERE catalog_id = %s
                   GROUP BY 1, 2 HAVING count(*) > 1""", [pk]) == [], "duplicate chunks"
    assert rows("""SELECT x.term_id FROM (SELECT DISTINCT unnest(terms) AS term_id FROM catalog_postings
                                          WHERE catalog_id = %s) x
                   LEFT JOIN catalog_term t ON t.id = x.term_id AND t.catalog_id = %s WHERE t.id IS NULL""",
                [pk, pk]) == [], "postings naming terms the catalog lacks"
    assert rows("""SELECT t.text, t.df, coalesce(x.n, 0) FROM catalog_term t
                   LEFT JOIN (SELECT unnest(terms) AS term_id, count(*) AS n FROM catalog_postings
                              WHERE catalog_id = %s GROUP BY 1) x ON x.term_id = t.id
                   WHERE t.catalog_id = %s AND (t.df <> coalesce(x.n, 0) OR t.df <= 0)""",
                [pk, pk]) == [], "term df differs from the postings"
    for content, text, offset in Chunk.objects.filter(catalog=catalog).values_list("content", "document__text",
                                                                                    "byte_offset"):
        assert text.encode()[offset: offset + len(content.encode())] == content.encode()

    (n_chunks, total), = rows("SELECT count(*), coalesce(sum(length), 0) FROM catalog_postings WHERE catalog_id = %s",
                              [pk])
    dfs = list(Term.objects.filter(catalog=catalog).values_list("df", flat=True))
    assert Chunk.objects.filter(catalog=catalog).count() == n_chunks
    assert (catalog.chunk_count, catalog.token_total, catalog.term_count) == (n_chunks, total, len(dfs))
    idf_sum = sum(math.log(n_chunks - df + 0.5) - math.log(df + 0.5) for df in dfs)
    assert catalog.idf_sum == pytest.approx(idf_sum, rel=1e-9, abs=1e-9)


def assert_first_generation(catalog: Catalog, before: dict) -> None:
    """The killed run changed nothing a reader sees, and the rows are consistent."""
    assert snapshot(catalog) == before
    assert_consistent(catalog)
    assert not Chunk.objects.filter(catalog=catalog, content__contains=SECOND).exists()
    assert not Chunk.objects.filter(catalog=catalog, heading__contains=SECOND).exists()
    assert sorted(Document.objects.filter(catalog=catalog).values_list("path", flat=True)) == ["a.md", "b.md", "c.md"]
    options = SearchOptions(mode="bm25", top_k=50)
    assert chunk_search(catalog=catalog, query=f"{SECOND} harbor lantern glacier", options=options).hits == []
    hits = chunk_search(catalog=catalog, query=f"{FIRST} retry cache", options=options).hits
    assert {hit.document_id for hit in hits} == {"a.md", "b.md", "c.md"}
    texts = dict(Document.objects.filter(catalog=catalog).values_list("path", "text"))
    assert all(hit.content in texts[hit.document_id] and SECOND not in hit.content for hit in hits)


def assert_stale(run: IndexRun) -> None:
    run.refresh_from_db()
    assert (run.status, run.finished_at, run.error) == (IndexRun.Status.RUNNING, None, "")


def assert_failed_as_interrupted(run: IndexRun) -> None:
    run.refresh_from_db()
    assert run.status == IndexRun.Status.FAILED
    assert "interrupted" in run.error
    assert run.finished_at is not None


def assert_second_generation(source: ReferenceSource, tree: Tree) -> None:
    source.refresh_from_db()
    assert source.status == ReferenceSource.Status.READY
    assert source.fingerprint == source_fingerprint(source=source)
    assert_consistent(source.catalog)
    assert snapshot(source.catalog) == from_scratch(tree)
    assert not IndexRun.objects.filter(source=source, status=IndexRun.Status.RUNNING).exists()


# --- a worker killed ------------------------------------------------------------------------


def test_a_worker_killed_while_embedding_leaves_the_first_generation_and_the_next_run_resumes(
        tree, children, barrier):
    source = glob_source("killed-embedding")
    tree.first_generation()
    first = run_in_process(source)
    before = snapshot(source.catalog)
    assert_consistent(source.catalog)
    tree.second_generation(new_documents=6)
    texts = barrier.hold(source.catalog, [d for d in tree.documents() if d.path != "b.md"])
    total = len(texts)
    assert EMBED_GROUP + 16 <= total <= 8 * EMBED_GROUP, total  # a group cached before the barrier's

    child = children.start(source)
    backend = wait_for(lambda: at_barrier(children), 120, "the worker to reach the barrier", alive=(child,))
    run = latest_run(source, first.pk)
    assert (run.status, run.stage) == (IndexRun.Status.RUNNING, "embed")
    children.kill(child, backend)
    barrier.release()

    assert_stale(run)
    source.refresh_from_db()
    assert source.fingerprint != source_fingerprint(source=source)  # a scan still sees it moved
    assert_first_generation(source.catalog, before)

    resumed = run_in_process(source)

    counts = resumed.counts
    assert (counts["documents_added"], counts["documents_changed"], counts["documents_removed"],
            counts["documents_unchanged"]) == (6, 1, 1, 1)
    assert counts["chunks_written"] == total
    assert counts["chunks_reused"] >= EMBED_GROUP  # the killed run's finished groups came from the cache
    assert counts["chunks_embedded"] == total - counts["chunks_reused"] > 0
    assert_failed_as_interrupted(run)
    assert_second_generation(source, tree)


def test_a_worker_killed_inside_the_write_transaction_leaves_the_first_generation(tree, children, holder, barrier):
    source = glob_source("killed-writing")
    tree.first_generation()
    first = run_in_process(source)
    before = snapshot(source.catalog)
    tree.second_generation(new_documents=4, sentences=16)
    total = len(barrier.hold(source.catalog, [d for d in tree.documents() if d.path != "b.md"]))

    child = children.start(source)
    wait_for(lambda: at_barrier(children), 120, "the worker to reach the barrier", alive=(child,))
    lock_source_row(holder, source)  # taken after the worker set its source "indexing"
    barrier.release()
    backend = wait_for(lambda: blocked_in_write(children), 120, "the worker to block inside its write transaction",
                       alive=(child,))
    # Everything is written, nothing committed: readers still see the first generation.
    assert {"catalog_document", "catalog_chunk", "catalog_postings", "catalog_termblock", "catalog_term",
            "catalog_catalog"} <= relations_written(backend["pid"])
    assert snapshot(source.catalog) == before
    run = latest_run(source, first.pk)
    assert (run.status, run.stage) == (IndexRun.Status.RUNNING, "embed")

    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(timeout=30) == -signal.SIGKILL
    holder.rollback()  # its backend gets the row, finds its client gone, and rolls back
    children.wait_gone()

    assert_stale(run)
    assert_first_generation(source.catalog, before)
    assert advisory_lock(source) == []

    out = children.finish(children.start(source))  # the next run, in another worker process

    resumed = latest_run(source, run.pk)
    assert f"run {resumed.pk} succeeded" in out
    assert resumed.status == IndexRun.Status.SUCCEEDED
    assert resumed.counts["chunks_written"] == total
    assert resumed.counts["chunks_embedded"] == 0  # the killed run had embedded (and cached) them all
    assert_failed_as_interrupted(run)
    assert_second_generation(source, tree)


def test_a_restarted_worker_at_once_requeues_the_run_a_killed_worker_left_running(tree, children, barrier):
    source = glob_source("recovered")
    tree.first_generation()
    first = run_in_process(source)
    tree.second_generation(new_documents=2, sentences=12)
    barrier.hold(source.catalog, [d for d in tree.documents() if d.path != "b.md"])
    child = children.start(source)
    backend = wait_for(lambda: at_barrier(children), 120, "the worker to reach the barrier", alive=(child,))
    orphan = latest_run(source, first.pk)
    children.kill(child, backend)
    barrier.release()
    assert_stale(orphan)
    assert ReferenceSource.objects.get(pk=source.pk).status == ReferenceSource.Status.INDEXING
    Schedule.objects.all().delete()  # no scheduled scan: only the worker's start may recover it

    worker = children.command("qcluster")
    recovered = wait_for(
        lambda: IndexRun.objects.filter(source=source, trigger=IndexRun.Trigger.RECOVERY,
                                        status=IndexRun.Status.SUCCEEDED).first(),
        120, "the restarted worker to index the source again", alive=(worker,))

    worker.send_signal(signal.SIGTERM)
    children.finish(worker)
    assert_failed_as_interrupted(orphan)
    assert (recovered.counts["documents_added"], recovered.counts["documents_changed"],
            recovered.counts["documents_removed"]) == (2, 1, 1)
    assert_second_generation(source, tree)


def test_a_full_run_killed_after_a_chunk_size_change_is_recovered_as_a_full_run_that_rechunks(
        tree, children, barrier):
    # given: documents of about 1,000 characters indexed at 1000/100, then the catalog
    # changed to 600/60 and a full run started (as the dashboard's edit asks for one)
    source = glob_source("resized", chunk_size=1000, chunk_overlap=100)
    for seed, name in enumerate(("a.md", "b.md", "c.md")):
        tree.write(name, FIRST, 14, seed)
    first = run_in_process(source)
    assert max(len(c) for c in Chunk.objects.filter(source=source).values_list("content", flat=True)) > 600
    catalog_update(catalog=source.catalog, settings=CatalogSettings(name="resized", chunk_size=600,
                                                                    chunk_overlap=60))
    texts = barrier.hold(source.catalog, tree.documents())
    held = max(texts, key=len)
    assert not EmbeddingCache.objects.filter(text_sha256=text_sha256(held)).exists()  # so the run must stop there
    child = children.command("index", "--catalog", "resized", "--source", "notes", "--full", "--no-progress")
    backend = wait_for(lambda: at_barrier(children), 120, "the full run to reach the barrier", alive=(child,))
    interrupted = latest_run(source, first.pk)
    assert (interrupted.status, interrupted.full) == (IndexRun.Status.RUNNING, True)

    # when: its worker is killed, and recovery (a worker's start, or the scan) takes over
    children.kill(child, backend)
    barrier.release()
    recovered = runs_recover()  # the sync queue executes the recovery run in this process

    # then: the recovery run is full and re-cuts every document at 600: the index is
    # what a catalog built at 600/60 from scratch holds
    assert [run.full for run in recovered] == [True]
    run = IndexRun.objects.get(pk=recovered[0].pk)
    assert (run.trigger, run.status) == (IndexRun.Trigger.RECOVERY, IndexRun.Status.SUCCEEDED)
    assert run.counts["documents_changed"] == 3 and run.counts["chunks_written"] == len(texts)
    assert_failed_as_interrupted(interrupted)
    assert max(len(c) for c in Chunk.objects.filter(source=source).values_list("content", flat=True)) <= 600
    assert_consistent(source.catalog)
    assert snapshot(source.catalog) == from_scratch(tree, 600, 60)


# --- writers at once ----------------------------------------------------------------------------


def test_two_workers_started_together_do_the_work_once(tree, children):
    source = glob_source("together")
    tree.first_generation()
    first = run_in_process(source)
    tree.second_generation(new_documents=3, sentences=12)

    pair = [children.start(source), children.start(source)]
    for child in pair:
        children.finish(child)

    runs = list(IndexRun.objects.filter(source=source, pk__gt=first.pk).order_by("started_at"))
    assert [run.status for run in runs] == [IndexRun.Status.SUCCEEDED] * 2
    worker, idle = runs
    assert (worker.counts["documents_added"], worker.counts["documents_changed"],
            worker.counts["documents_removed"]) == (3, 1, 1)
    assert worker.counts["chunks_written"] > 0
    assert idle.counts == {"documents_added": 0, "documents_changed": 0, "documents_removed": 0,
                           "documents_unchanged": 5, "chunks_embedded": 0, "chunks_reused": 0, "chunks_written": 0}
    assert ran_after(idle, worker)
    assert_second_generation(source, tree)


def test_a_second_worker_waits_while_the_first_holds_the_source_lock(tree, children, holder, barrier):
    source = glob_source("waiting")
    tree.first_generation()
    first = run_in_process(source)
    tree.second_generation(new_documents=2, sentences=12)
    barrier.hold(source.catalog, [d for d in tree.documents() if d.path != "b.md"])

    holding = children.start(source)
    backend = wait_for(lambda: at_barrier(children), 120, "the first worker to reach the barrier", alive=(holding,))
    run = latest_run(source, first.pk)
    assert run.status == IndexRun.Status.RUNNING
    assert advisory_lock(source) == [(backend["pid"], True)]

    waiting = children.start(source)
    wait_for(lambda: len(advisory_lock(source)) == 2, 60, "the second worker to wait for the source lock",
             alive=(holding, waiting))
    assert sorted(granted for _, granted in advisory_lock(source)) == [False, True]
    second = latest_run(source, run.pk)
    assert second.status == IndexRun.Status.QUEUED  # created, not claimed: it waits for the lock

    barrier.release()
    children.finish(holding)
    children.finish(waiting)

    worker, idle = IndexRun.objects.filter(pk__in=[run.pk, second.pk]).order_by("pk")
    assert (worker.status, idle.status) == (IndexRun.Status.SUCCEEDED, IndexRun.Status.SUCCEEDED)
    assert (worker.counts["documents_added"], worker.counts["documents_changed"],
            worker.counts["documents_removed"]) == (2, 1, 1)
    assert idle.counts["chunks_written"] == 0 and idle.counts["documents_unchanged"] == 4
    assert ran_after(idle, worker)
    assert advisory_lock(source) == []
    assert_second_generation(source, tree)


def beir_lines(count: int) -> list[str]:
    rng = random.Random(7)
    return [json.dumps({"_id": f"doc{i}", "title": f"Note {i}",
                        "text": " ".join(" ".join(rng.choices(WORDS[SECOND], k=10)).capitalize() + "."
                                         for _ in range(6))}) for i in range(count)]


def test_an_import_holds_its_source_against_the_scan_and_other_writers(tree, children, barrier, tmp_path):
    catalog = Catalog.objects.create(slug="imported", name="Imported", chunk_size=200, chunk_overlap=40)
    lines = beir_lines(12)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    barrier.hold(catalog, parse_beir_jsonl(lines))

    importing = children.command("import_jsonl", str(corpus), "--catalog", "imported", "--source", "corpus",
                                 "--no-progress")
    wait_for(lambda: at_barrier(children), 120, "the import to reach the barrier", alive=(importing,))
    source = ReferenceSource.objects.get(catalog=catalog, slug="corpus")
    scanned = sources_scan()  # what the worker's scheduled scan does meanwhile
    indexing = children.start(source)  # and `manage.py index` started by hand
    wait_for(lambda: len(advisory_lock(source)) == 2, 60, "the second writer to wait for the source lock",
             alive=(importing, indexing))
    barrier.release()
    out = children.finish(importing)
    children.finish(indexing)

    imported, idle = IndexRun.objects.filter(source=source).order_by("pk")
    assert scanned == []
    assert f"imported/corpus: run {imported.pk}: 12 documents" in out
    assert imported.status == IndexRun.Status.SUCCEEDED and imported.counts["documents_added"] == 12
    assert idle.status == IndexRun.Status.SUCCEEDED and idle.counts["chunks_written"] == 0
    assert ran_after(idle, imported)
    assert Document.objects.filter(source=source).count() == 12
    assert_consistent(catalog)


def test_an_edit_during_a_run_is_indexed_by_the_run_the_api_hands_back(tree, children, barrier, monkeypatch):
    catalog = Catalog.objects.create(slug="edited", name="Edited", chunk_size=200, chunk_overlap=40)
    documents = parse_beir_jsonl(beir_lines(6))
    first = source_import(catalog=catalog, slug="notes", documents=documents[:3], trigger=IndexRun.Trigger.COMMAND)
    source = first.source
    uploads_replace(source=source, documents=documents)  # three more for a worker to index
    barrier.hold(catalog, documents[3:])
    agent_with_token(name="curator", catalogs=[catalog], token="lct_edit", is_curator=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer lct_edit")
    monkeypatch.setattr(Conf, "SYNC", False)  # the API enqueues for a real worker, as in production
    Schedule.objects.all().delete()

    child = children.start(source)
    wait_for(lambda: at_barrier(children), 120, "the worker to reach the barrier", alive=(child,))
    running = latest_run(source, first.pk)
    put = client.put("/api/v1/catalogs/edited/sources/notes/files",
                     {"path": "late.md", "text": "Harbor lantern meadow, written while a run worked."}, format="json")
    deleted = client.delete("/api/v1/catalogs/edited/sources/notes/files?path=doc0")
    worker = children.command("qcluster")
    handed = put.json()["run"]
    barrier.release()
    children.finish(child)
    follow_up = wait_for(lambda: IndexRun.objects.filter(pk=handed["id"], status=IndexRun.Status.SUCCEEDED).first(),
                         120, "the worker to execute the run the API handed back", alive=(worker,))
    worker.send_signal(signal.SIGTERM)
    children.finish(worker)

    assert (put.status_code, deleted.status_code) == (202, 202)
    assert handed["id"] != running.pk and handed["status"] == "queued"
    assert deleted.json()["run"]["id"] == handed["id"]
    running.refresh_from_db()
    assert running.status == IndexRun.Status.SUCCEEDED and running.counts["documents_added"] == 3
    assert (follow_up.counts["documents_added"], follow_up.counts["documents_removed"]) == (1, 1)
    assert sorted(Document.objects.filter(source=source).values_list("path", flat=True)) == [
        "doc1", "doc2", "doc3", "doc4", "doc5", "late.md"]
    assert_consistent(catalog)


# --- edits while runs write -----------------------------------------------------------------


FILES_URL = "/api/v1/catalogs/{}/sources/notes/files"


class Put(threading.Thread):
    """A curator's PUTs of upload files, in a thread of its own (so a database connection
    of its own, whose backend pid it records): each answer is kept."""

    def __init__(self, catalog: str, token: str, files: list[tuple[str, str]]) -> None:
        super().__init__()
        self.url, self.token, self.files = FILES_URL.format(catalog), token, files
        self.pid: int | None = None
        self.answers: list[tuple[int, dict]] = []

    def run(self) -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                self.pid = cursor.fetchone()[0]
            client = APIClient(raise_request_exception=False)  # a 500 is an answer here, as a caller gets it
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {self.token}")
            for path, text in self.files:
                response = client.put(self.url, {"path": path, "text": text}, format="json")
                self.answers.append((response.status_code, response.json()))
        finally:
            connection.close()


def waiting_on_a_lock(pid: int | None) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'", [pid])
        return cursor.fetchone() is not None


def upload_catalog(slug: str) -> tuple[ReferenceSource, str]:
    """An upload source with three files, indexed; a curator token for the API."""
    catalog = Catalog.objects.create(slug=slug, name=slug, chunk_size=200, chunk_overlap=40)
    source = source_import(catalog=catalog, slug="notes", documents=parse_beir_jsonl(beir_lines(3)),
                           trigger=IndexRun.Trigger.COMMAND).source
    token = f"lct_{slug}"
    agent_with_token(name=f"curator-{slug}", catalogs=[catalog], token=token, is_curator=True)
    return source, token


def assert_every_upload_indexed(source: ReferenceSource) -> None:
    assert not IndexRun.objects.filter(source=source, status__in=[IndexRun.Status.QUEUED, IndexRun.Status.RUNNING,
                                                                  IndexRun.Status.FAILED]).exists()
    uploads = set(UploadedFile.objects.filter(source=source).values_list("path", "sha256"))
    assert set(Document.objects.filter(source=source).values_list("path", "content_sha256")) == uploads
    assert_consistent(source.catalog)


def blocked_on_a_term(children: Children) -> dict | None:
    """The child backend whose insert of the catalog's terms waits on the holder's row:
    inside source_apply_diff's transaction, the catalog row locked, the source row not."""
    return next((b for b in children.backends() if b["state"] == "active" and b["wait_event_type"] == "Lock"
                 and "INSERT INTO catalog_term " in b["query"]), None)


def hold_the_next_write(holder: psycopg.Connection, source: ReferenceSource, word: str) -> None:
    """Stop the source's next run inside its write transaction (the catalog row locked,
    the source row not yet): a new file holds `word`, whose term row the holder inserts
    uncommitted, so the run's insert of its terms waits for the holder."""
    (term,) = analysis.term_frequencies(word)[0]
    upload_put(source=source, path="new.md", title="New", text=f"A new note about the {word}.")
    holder.execute("INSERT INTO catalog_term (catalog_id, text, df) VALUES (%s, %s, 0)", [source.catalog_id, term])


def test_curators_putting_files_while_a_worker_indexes_get_no_500_and_every_file_is_indexed(
        tree, children, holder, monkeypatch):
    # given: a worker (qcluster) held inside the write of a run of the source, then
    # executing the runs that three curators' PUTs queue
    source, token = upload_catalog("crowded")
    hold_the_next_write(holder, source, f"quokka{tree.tag}")
    monkeypatch.setattr(Conf, "SYNC", False)  # the API enqueues for the real worker
    Schedule.objects.all().delete()
    index_run_request(source=source, trigger=IndexRun.Trigger.API)
    worker = children.command("qcluster")
    wait_for(lambda: blocked_on_a_term(children), 120, "the worker to wait inside its write", alive=(worker,))

    # when: 3 x 25 PUTs at once; the worker goes on once they are done or one of them
    # waits on a lock, and its runs then switch the source again and again
    curators = [Put("crowded", token, [(f"c{n}/f{i:02d}.md", f"Curator {n} wrote note {i} about harbor lanterns.")
                                       for i in range(25)]) for n in range(3)]
    for put in curators:
        put.start()
    wait_for(lambda: all(not put.is_alive() for put in curators) or any(waiting_on_a_lock(put.pid)
                                                                         for put in curators),
             120, "the PUTs to be answered or wait on a lock")
    holder.rollback()
    for put in curators:
        put.join(timeout=300)
    wait_for(lambda: not IndexRun.objects.filter(source=source, status__in=[IndexRun.Status.QUEUED,
                                                                            IndexRun.Status.RUNNING]).exists(),
             300, "the worker to execute every run the PUTs queued", alive=(worker,))
    worker.send_signal(signal.SIGTERM)
    children.finish(worker)

    # then: every PUT was accepted, and every stored file is indexed by a run
    answers = [status for put in curators for status, _ in put.answers]
    assert answers == [202] * 75, [body for put in curators for status, body in put.answers if status != 202][:3]
    assert UploadedFile.objects.filter(source=source).count() == 79
    assert_every_upload_indexed(source)


def test_a_put_while_a_run_holds_the_catalog_row_in_its_write_is_answered_at_once(tree, children, holder,
                                                                                  monkeypatch):
    # given: a worker indexing a new file of an upload source, held inside its write
    # transaction (the catalog row locked, the source row not yet) by an uncommitted row
    # of a term that file holds, which the worker's insert of its terms waits for
    source, token = upload_catalog("held")
    hold_the_next_write(holder, source, f"quokka{tree.tag}")
    child = children.start(source)
    wait_for(lambda: blocked_on_a_term(children), 120, "the worker to wait inside its write", alive=(child,))
    monkeypatch.setattr(Conf, "SYNC", False)  # the API enqueues; the run is executed below

    # when: a curator PUTs another file meanwhile, and then the worker goes on
    put = Put("held", token, [("late.md", "Written while a run held the catalog in its write.")])
    put.start()
    wait_for(lambda: not put.is_alive() or waiting_on_a_lock(put.pid), 60, "the PUT to answer or wait on a lock")
    holder.rollback()
    put.join(timeout=120)
    children.finish(child)

    # then: the PUT was accepted (it never waited for the catalog row, so no deadlock
    # with the worker's update of the source row), the worker's run succeeded, and the
    # run handed back indexes the late file
    ((status, body),) = put.answers
    assert status == 202, body
    held = IndexRun.objects.filter(source=source, trigger=IndexRun.Trigger.COMMAND).latest("pk")
    assert held.status == IndexRun.Status.SUCCEEDED and held.counts["documents_added"] == 1
    handed = index_run_execute(run_id=body["run"]["id"])  # what the worker does with the run handed back
    assert handed is not None and handed.status == IndexRun.Status.SUCCEEDED
    assert_every_upload_indexed(source)
    assert Document.objects.filter(source=source, path__in=["new.md", "late.md"]).count() == 2


@pytest.fixture
def superuser_holder(transactional_db):
    """A lock holder that may set deadlock_timeout, a superuser's setting: the embedded
    server's own superuser (the app's role is not one; another server lends none)."""
    if os.environ.get("DATABASE_URL"):
        pytest.skip("deadlock_timeout is a superuser's setting: only the embedded Postgres lends one")
    conn = second_connection("lectern-test-holder", user=embedded_pg.SUPERUSER)
    try:
        yield conn
    finally:
        conn.close()


def test_a_put_that_loses_a_deadlock_is_retried_not_answered_with_a_500(tree, superuser_holder):
    # given: another session holding the source row, so that a PUT replacing doc0 locks
    # the file's row and then waits for the source row (to record who changed it)
    holder = superuser_holder
    source, token = upload_catalog("deadlocked")
    holder.execute("SET deadlock_timeout = '10min'")  # the PUT, not the holder, finds the deadlock
    holder.execute("SELECT 1 FROM catalog_referencesource WHERE id = %s FOR NO KEY UPDATE", [source.pk])
    put = Put("deadlocked", token, [("doc0", "Doc zero, rewritten while another session held its source.")])
    put.start()
    wait_for(lambda: not put.is_alive() or waiting_on_a_lock(put.pid), 60, "the PUT to wait for the source row")
    assert put.is_alive(), put.answers

    # when: the holder then asks for the file's row: a deadlock, which the PUT loses;
    # the holder's lock is granted once the PUT's transaction has rolled back
    doc0 = UploadedFile.objects.get(source=source, path="doc0")
    holder.execute("SELECT 1 FROM catalog_uploadedfile WHERE id = %s FOR UPDATE", [doc0.pk])
    holder.rollback()
    put.join(timeout=120)

    # then: the PUT, which lost its first attempt (the holder's lock was granted, and the
    # holder never detects a deadlock), tried again; it was accepted, the file written once
    # and indexed, or, should the holder's wake-up lose every retry on a loaded machine,
    # refused as busy with nothing written: never a 500
    ((status, body),) = put.answers
    doc0.refresh_from_db()
    if status == 409:
        assert body["error"]["code"] == "busy", body
        assert not doc0.text.startswith("Doc zero, rewritten")
        return
    assert status == 202, body
    assert doc0.text.startswith("Doc zero, rewritten")
    assert IndexRun.objects.get(pk=body["run"]["id"]).status == IndexRun.Status.SUCCEEDED  # sync queue in tests
    assert_every_upload_indexed(source)


# --- the dashboard's saves losing a deadlock -------------------------------------------------


class Save(threading.Thread):
    """A curator's form post on the dashboard, in a thread of its own (so a database
    connection of its own, whose backend pid it records); the answer's status and page
    are kept."""

    def __init__(self, user: User, url: str, data: dict[str, object]) -> None:
        super().__init__()
        self.user, self.url, self.data = user, url, data
        self.pid: int | None = None
        self.answer: tuple[int, str] | None = None

    def run(self) -> None:
        try:
            client = Client(raise_request_exception=False)  # a 500 is an answer here, as a browser gets it
            client.force_login(self.user)
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                self.pid = cursor.fetchone()[0]
            response = client.post(self.url, self.data)
            self.answer = (response.status_code, response.content.decode())
        finally:
            connection.close()


def deadlock_the_save(holder: psycopg.Connection, save: Save, then: str, params: list[object]) -> tuple[int, str]:
    """Start `save` while `holder` holds the catalog row FOR UPDATE: the save does its
    writes, then waits at its commit, whose deferred foreign-key checks take the rows
    referenced (KEY SHARE). Then the holder runs `then`, which waits for something the
    save holds: a deadlock, which the save finds and loses (the holder waits ten minutes
    before looking). The holder's statement goes through once the save's transaction
    has rolled back; then the holder lets go, and the save's answer comes back."""
    holder.execute("SET deadlock_timeout = '10min'")
    save.start()
    wait_for(lambda: not save.is_alive() or waiting_on_a_lock(save.pid), 60, "the save to wait on a lock")
    assert save.is_alive(), save.answer
    holder.execute(then, params)
    holder.rollback()
    save.join(timeout=120)
    assert save.answer is not None
    return save.answer


def test_a_dashboard_edit_that_loses_a_deadlock_is_retried_with_its_run_not_answered_with_a_500(
        tree, superuser_holder):
    # given: an indexed inline source; another session holding its catalog row, which
    # the edit's commit checks (the run it requests references it)
    catalog = Catalog.objects.create(slug="edited", name="Edited", chunk_size=200, chunk_overlap=40)
    source = ReferenceSource.objects.create(catalog=catalog, slug="intro", name="Intro", kind="inline",
                                            content="The old welcome text.")
    source_index_now(source=source, trigger=IndexRun.Trigger.COMMAND)
    superuser_holder.execute("SELECT 1 FROM catalog_catalog WHERE id = %s FOR UPDATE", [catalog.pk])
    new_text = "A new welcome text, saved while another session held the catalog."

    # when: a curator saves new content; once the save waits for the catalog row, the
    # holder asks for the source row, which the save has locked
    status, page = deadlock_the_save(superuser_holder, Save(
        person("cora", "curator"), reverse("catalogs-source-edit", args=["edited", "intro"]),
        {"name": "Intro", "mode": "selectable", "content": new_text}),
        "SELECT 1 FROM catalog_referencesource WHERE id = %s FOR UPDATE", [source.pk])

    # then: the save, which lost its first attempt, tried again; it was saved with its
    # run, which indexed the new text, or, should every retry lose on a loaded machine,
    # refused as busy with nothing saved: never a 500, never the edit without its run
    source.refresh_from_db()
    if status == 409:
        assert "Not saved: " in page and "try again" in page
        assert source.content == "The old welcome text."
        return
    assert status == 302, status
    assert source.content == new_text
    run = IndexRun.objects.filter(source=source, trigger=IndexRun.Trigger.UI).get()
    assert run.status == IndexRun.Status.SUCCEEDED  # sync queue in tests
    assert Document.objects.get(source=source).text == new_text


def test_a_dashboard_create_that_loses_a_deadlock_is_retried_not_answered_with_a_500(tree, superuser_holder):
    # given: a catalog; another session holding its row, which a new source references
    catalog = Catalog.objects.create(slug="created", name="Created", chunk_size=200, chunk_overlap=40)
    superuser_holder.execute("SELECT 1 FROM catalog_catalog WHERE id = %s FOR UPDATE", [catalog.pk])

    # when: a curator creates an inline source with a new tag; once the create waits for
    # the catalog row, the holder creates the same tag, whose key the create has taken
    status, page = deadlock_the_save(superuser_holder, Save(
        person("cora", "curator"), reverse("catalogs-source-create", args=["created"]) + "?kind=inline",
        {"slug": "oncall", "name": "On call", "mode": "selectable", "content": "Answer pages within five minutes.",
         "tags_new": "Paging"}),
        "INSERT INTO catalog_tag (name, key) VALUES ('Paging', %s)", [tag_key("Paging")])

    # then: the create, which lost its first attempt, tried again; the source was
    # created once, tagged, with the run that indexed it, or, should every retry lose,
    # refused as busy with nothing created: never a 500
    created = ReferenceSource.objects.filter(catalog=catalog, slug="oncall")
    if status == 409:
        assert "Not created: " in page and "try again" in page
        assert not created.exists()
        return
    assert status == 302, status
    source = created.get()
    assert list(source.tags.values_list("name", flat=True)) == ["Paging"]
    run = IndexRun.objects.filter(source=source).get()
    assert (run.trigger, run.status) == (IndexRun.Trigger.UI, IndexRun.Status.SUCCEEDED)  # sync queue in tests
    assert Document.objects.get(source=source).text == "Answer pages within five minutes."


def test_a_failing_run_ends_a_command_with_one_line(tree, children):
    catalog = Catalog.objects.create(slug="broken", name="Broken")
    ReferenceSource.objects.create(catalog=catalog, slug="outside", name="Outside", kind="glob",
                                   location="../outside/*.md")

    child = children.command("index", "--catalog", "broken", "--no-progress")

    assert child.wait(timeout=120) == 1
    lines = output(child).strip().splitlines()
    run = IndexRun.objects.get(source__catalog=catalog)
    assert lines == [f"CommandError: outside: run {run.pk} failed: SourceError: glob '../outside/*.md' may not "
                     f"contain '..'"]
    assert run.status == IndexRun.Status.FAILED
