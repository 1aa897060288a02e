"""GET /api/v1/status and POST /api/v1/status/reset (seed 004), and the status page.

- Who sees what: the embeddings to anyone signed in or holding a token; everything to
  people with a role; its own catalogs' indexes and index runs to a curator agent, and
  nothing of the server or of other catalogs (docs/subsystems/dashboard.md, "Status").
- What it reports: the database and its extensions, the queue (waiting, being run,
  failed), the schedules and the last scan, index runs, each catalog's index, the sizes
  of the tables and indexes, the disk; in a constant number of statements.
- The reset: curators only, audited, the model loaded again (a model that failed to
  load is tried again: what the reset is for), the detection caches dropped here at once
  and in every other process when it next looks (retrieval.runtime.runtime_follow).
"""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_q.models import OrmQ, Schedule, Task
from rest_framework.test import APIClient

from catalog.audit.log import Action, Actor, AuditEvent, audit_append
from catalog.embedder import get_embedder, reset_embedder
from catalog.models import AuditEntry, Catalog, IndexRun, ReferenceSource
from catalog.sources.documents import DocumentInput
from catalog.tasks import SCAN_SCHEDULE
from retrieval import runtime
from retrieval.enrichment.detection import cached_indexes, catalog_index
from tests.factories import agent_with_token, import_documents, person

pytestmark = pytest.mark.django_db

FULL_KEYS = {"view", "generated_at", "embeddings", "model", "process", "last_reset", "database", "queue",
             "index_runs", "schedules", "last_scan", "catalogs", "storage", "disk"}
CATALOGS_KEYS = {"view", "generated_at", "embeddings", "process", "index_runs", "catalogs"}


def session(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def catalog(make_catalog) -> Catalog:
    catalog = make_catalog("ops")
    import_documents(catalog=catalog, slug="handbook", documents=[
        DocumentInput("retries.md", "Retries", "Retry transient failures with backoff.", 40),
        DocumentInput("caching.md", "Caching", "Cache responses with a time to live.", 40)])
    catalog.refresh_from_db()
    return catalog


@pytest.fixture
def model_again():
    """The model as configured once the test is done (a test may break or reset it)."""
    yield
    reset_embedder()


# --- who sees what -------------------------------------------------------------------------


def test_people_with_a_role_see_everything_curator_agents_their_catalogs_others_the_embeddings(catalog):
    reader = agent_with_token(name="reader", catalogs=[catalog])[1]
    keeper = agent_with_token(name="keeper", catalogs=[catalog], is_curator=True)[1]
    full = {"curator": session(person("cora", "curator")), "reviewer": session(person("rita", "reviewer")),
            "superuser": session(person("sue", is_superuser=True))}
    basic = {"no role": session(person("nobody")), "staff": session(person("stan", is_staff=True)),
             "agent": bearer(reader)}

    assert Client().get("/api/v1/status").status_code == 401
    for who, client in basic.items():
        body = client.get("/api/v1/status").json()
        assert body == {"view": "basic", "embeddings": body["embeddings"]}, who
        assert body["embeddings"]["mode"] == "hybrid"
    for who, client in full.items():
        body = client.get("/api/v1/status").json()
        assert set(body) == FULL_KEYS and body["view"] == "full", who
    body = bearer(keeper).get("/api/v1/status").json()
    assert set(body) == CATALOGS_KEYS and body["view"] == "catalogs"


def test_a_curator_agent_sees_its_own_catalogs_and_nothing_of_the_server_or_other_catalogs(catalog, make_catalog):
    """Issue 20, item 6: an agent scoped to `ops` learned other catalogs' names and
    counts, the queue's failures, the database's data directory and the disk's use."""
    now = timezone.now()
    other = make_catalog("payroll-secret")
    hidden = ReferenceSource.objects.create(catalog=other, slug="salaries", name="Salaries", kind="inline",
                                            content="x")
    IndexRun.objects.create(catalog=other, source=hidden, trigger="api", status="failed", finished_at=now,
                            error="payroll import failed")
    IndexRun.objects.create(catalog=catalog, source=catalog.sources.get(), trigger="api")  # queued, its own
    Task.objects.create(id="p" * 32, name="payroll", func="catalog.tasks.reindex", started=now, stopped=now,
                        success=False, result="boom : Traceback\nValueError: /srv/payroll-secret/2026.csv\n")
    keeper = agent_with_token(name="keeper", catalogs=[catalog], is_curator=True)[1]

    response = bearer(keeper).get("/api/v1/status")

    body = response.json()
    assert response.status_code == 200 and set(body) == CATALOGS_KEYS
    (ops,) = body["catalogs"]
    assert (ops["slug"], ops["sources"], ops["documents"], ops["chunks"]) == ("ops", 1, 2, catalog.chunk_count)
    assert (body["index_runs"]["queued"], body["index_runs"]["failed_24h"]) == (1, 0)
    served = json.dumps(body)
    for secret in ("payroll", "Salaries", "pgdata", "/srv", str(django_settings.BASE_DIR)):
        assert secret not in served, secret
    assert bearer(keeper).get("/status/").status_code == 302, "the status page is for people signed in"


def test_the_full_status_reports_database_queue_schedules_runs_catalogs_and_sizes(catalog):
    now = timezone.now()
    OrmQ.objects.create(key="lectern", payload="x", lock=now - timedelta(seconds=5))  # waiting
    OrmQ.objects.create(key="lectern", payload="y", lock=now + timedelta(minutes=60))  # taken by a worker
    Task.objects.create(id="f" * 32, name="broken", func="catalog.tasks.reindex", started=now, stopped=now,
                        success=False, result="boom : Traceback (most recent call last):\n  ...\nValueError: boom\n")
    Task.objects.create(id="s" * 32, name="scan", func="catalog.tasks.scan", started=now - timedelta(seconds=30),
                        stopped=now - timedelta(seconds=29), success=True, result=2)
    Schedule.objects.filter(name=SCAN_SCHEDULE).update(next_run=now + timedelta(seconds=30))
    source = catalog.sources.get()
    IndexRun.objects.create(catalog=catalog, source=source, trigger="api")  # queued
    ReferenceSource.objects.create(catalog=catalog, slug="draft", name="Draft", kind="inline", content="Soon.")

    body = session(person("rita", "reviewer")).get("/api/v1/status").json()

    database = body["database"]
    assert database["version"].split(".")[0].isdigit() and database["size_bytes"] > 0
    assert {"vector", "pg_trgm"} <= {x["name"] for x in database["extensions"]}
    assert (database["role"], database["role_can_disable_triggers"]) == ("lectern_app", False)
    assert database["data_directory"]  # the embedded app role may read settings (pg_read_all_settings)
    queue = body["queue"]
    assert (queue["waiting"], queue["in_progress"], queue["failed"], queue["failed_24h"]) == (1, 1, 1, 1)
    assert queue["recent_failures"][0]["error"] == "ValueError: boom"
    assert queue["recent_failures"][0]["func"] == "catalog.tasks.reindex"
    scan = body["last_scan"]
    assert (scan["success"], scan["result"], scan["every"], scan["overdue_s"]) == (True, "2", "minute", 0)
    assert {s["name"] for s in body["schedules"]} >= {SCAN_SCHEDULE, "lectern-purge-traces"}
    assert body["index_runs"]["queued"] == 1 and body["index_runs"]["last_finished_at"] is not None
    (ops,) = body["catalogs"]
    assert (ops["slug"], ops["sources"], ops["sources_not_ready"], ops["documents"], ops["chunks"]) == \
        ("ops", 2, 1, 2, catalog.chunk_count)
    assert ops["terms"] == catalog.term_count > 0
    sizes = {part["relation"]: part["bytes"] for part in body["storage"]}
    assert sizes["catalog_chunk_c*_hnsw"] > 0 and sizes["catalog_termblock"] > 0 and sizes["catalog_term"] > 0
    assert body["disk"] and body["disk"][0]["total_bytes"] >= body["disk"][0]["used_bytes"] > 0
    assert body["process"]["pid"] > 0 and body["embeddings"]["model"] == "all-MiniLM-L6-v2-int8"


def _statements(client: Client, path: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(path).status_code == 200
    return len(queries)


def test_status_takes_the_same_statements_however_much_there_is(make_catalog):
    """Pinned: more catalogs, failures, schedules' tasks and runs cost no more statements."""
    rita = session(person("rita", "reviewer"))
    keeper, token = agent_with_token(name="keeper", catalogs=[make_catalog("own")], is_curator=True)
    bearer(token).get("/api/v1/status")  # a token's first use is recorded once (last_used_at)
    small = (_statements(rita, "/api/v1/status"), _statements(rita, "/status/"),
             _statements(bearer(token), "/api/v1/status"))
    now = timezone.now()
    for i in range(4):
        catalog = make_catalog(f"c{i}")
        keeper.catalogs.add(catalog)  # its view grows with its scope, not its statements
        source = ReferenceSource.objects.create(catalog=catalog, slug="s", name="S", kind="inline", content="x")
        IndexRun.objects.create(catalog=catalog, source=source, trigger="api", status="failed", finished_at=now)
        Task.objects.create(id=f"{i}" * 32, name=f"t{i}", func="catalog.tasks.reindex", started=now, stopped=now,
                            success=False, result=f"E{i}")
        Task.objects.create(id=f"s{i}".ljust(32, "x"), name=f"s{i}", func="catalog.tasks.scan", started=now,
                            stopped=now, success=True, result=0)

    large = (_statements(rita, "/api/v1/status"), _statements(rita, "/status/"),
             _statements(bearer(token), "/api/v1/status"))

    assert large == small, (small, large)


# --- the reset -----------------------------------------------------------------------------


def test_a_curator_resets_the_model_after_fixing_it_and_the_reset_is_audited(settings, catalog, model_again):
    settings.LECTERN_EMBEDDING_MODEL = "/nonexistent/model"
    reset_embedder()
    cora = api_session(person("cora", "curator"))
    broken = cora.get("/api/v1/status").json()["embeddings"]
    settings.LECTERN_EMBEDDING_MODEL = "default"  # the files are put right; the process still remembers failing

    still = cora.get("/api/v1/status").json()["embeddings"]
    reset = cora.post("/api/v1/status/reset")
    after = cora.get("/api/v1/status").json()

    assert broken["mode"] == "lexical-only" and "SHA256SUMS" in broken["reason"]
    assert still == broken, "without a reset the failure is remembered"
    assert reset.status_code == 200, reset.content
    body = reset.json()
    assert body["embeddings"] == {"mode": "hybrid", "model": "all-MiniLM-L6-v2-int8", "reason": None}
    entry = AuditEntry.objects.get(action=Action.RUNTIME_RESET)
    assert body["reset"]["seq"] == entry.seq and body["reset"]["by"] == "cora"
    assert (entry.actor_kind, entry.actor_name) == ("user", "cora")
    assert after["embeddings"]["mode"] == "hybrid"
    assert after["last_reset"]["seq"] == after["process"]["applied_reset"] == entry.seq


def test_the_reset_drops_this_processs_detection_indexes(catalog, model_again):
    catalog_index(catalog)
    keeper = agent_with_token(name="keeper", catalogs=[catalog], is_curator=True)[1]
    before = get_embedder()

    body = bearer(keeper).post("/api/v1/status/reset").json()

    assert body["indexes_dropped"] >= 1 and cached_indexes() == 0
    assert get_embedder() is not before, "the model was loaded again"
    assert AuditEntry.objects.get(action=Action.RUNTIME_RESET).actor_name == "keeper"


def api_session(user) -> APIClient:
    client = APIClient()  # no CSRF checks: what is refused here is the role
    client.force_login(user)
    return client


def test_only_curators_reset(catalog):
    reader = agent_with_token(name="reader", catalogs=[catalog])[1]
    refused = {"reviewer": api_session(person("rita", "reviewer")), "no role": api_session(person("nobody")),
               "staff": api_session(person("stan", is_staff=True)), "agent": bearer(reader)}

    for who, client in refused.items():
        response = client.post("/api/v1/status/reset")
        assert response.status_code == 403, who
        assert response.json()["error"]["code"] == "forbidden"
    assert Client().post("/api/v1/status/reset").status_code == 401
    assert not AuditEntry.objects.filter(action=Action.RUNTIME_RESET).exists()


def test_another_process_applies_a_reset_when_it_next_looks(settings, catalog, monkeypatch):
    """This process plays the other one: it has looked once (noting where the log
    stands), holds a detection index, and a reset is answered elsewhere (the audit entry
    is all that process leaves)."""
    settings.LECTERN_RUNTIME_POLL_SECONDS = 60
    monkeypatch.setattr(runtime, "_applied", None)
    monkeypatch.setattr(runtime, "_checked", float("-inf"))
    runtime.runtime_follow()  # its first look: notes the newest reset, drops nothing
    catalog_index(catalog)
    assert cached_indexes() == 1 and runtime.applied_reset() == 0

    entry = audit_append(AuditEvent(Action.RUNTIME_RESET, Actor.of(person("cora", "curator"))))
    with CaptureQueriesContext(connection) as within:
        runtime.runtime_follow()  # within the interval: no look at all
    assert len(within) == 0 and cached_indexes() == 1

    monkeypatch.setattr(runtime, "_checked", float("-inf"))  # the interval has passed
    with CaptureQueriesContext(connection) as looked:
        runtime.runtime_follow()

    assert len(looked) == 1 and cached_indexes() == 0 and runtime.applied_reset() == entry.seq
    catalog_index(catalog)
    monkeypatch.setattr(runtime, "_checked", float("-inf"))
    runtime.runtime_follow()  # nothing newer: the cache stays
    assert cached_indexes() == 1


def test_a_process_first_looking_applies_only_a_reset_made_after_it_started(settings, catalog, monkeypatch):
    settings.LECTERN_RUNTIME_POLL_SECONDS = 60
    audit_append(AuditEvent(Action.RUNTIME_RESET, Actor.of(person("cora", "curator"))))
    for started, dropped in ((time.time() + 3600, False), (time.time() - 3600, True)):
        monkeypatch.setattr(runtime, "STARTED_AT", started)  # the process started after, then before, it
        monkeypatch.setattr(runtime, "_applied", None)
        monkeypatch.setattr(runtime, "_checked", float("-inf"))
        catalog_index(catalog)

        runtime.runtime_follow()

        assert (cached_indexes() == 0) is dropped
        assert runtime.applied_reset() == AuditEntry.objects.get(action=Action.RUNTIME_RESET).seq


def test_a_web_request_and_a_worker_task_follow_resets(settings, catalog, monkeypatch):
    settings.LECTERN_RUNTIME_POLL_SECONDS = 60
    looks = []
    monkeypatch.setattr(runtime, "runtime_follow", lambda: looks.append("look"))
    from django_q.signals import pre_execute

    import config.middleware

    monkeypatch.setattr(config.middleware, "runtime_follow", runtime.runtime_follow)
    Client().get("/api/v1/health")
    pre_execute.send(sender="django_q", func=print, task={})

    assert len(looks) == 2


def test_following_is_off_at_zero_and_never_queries(settings, monkeypatch):
    settings.LECTERN_RUNTIME_POLL_SECONDS = 0
    monkeypatch.setattr(runtime, "_checked", float("-inf"))

    with CaptureQueriesContext(connection) as queries:
        runtime.runtime_follow()

    assert len(queries) == 0


# --- the page ------------------------------------------------------------------------------


def test_the_status_page_offers_the_reset_to_curators_only(catalog):
    reviewer = session(person("rita", "reviewer")).get("/status/")
    curator = session(person("cora", "curator")).get("/status/")

    assert reviewer.status_code == curator.status_code == 200
    assert b"Reload model and clear caches" in curator.content
    assert b"Reload model and clear caches" not in reviewer.content
    for text in (b"Embedding model", b"all-MiniLM-L6-v2-int8", b"Postgres", b"Worker and queue",
                 b"Scans and schedules", b"Index and table sizes", b"Vector indexes (HNSW, one per catalog)"):
        assert text in curator.content


def test_the_page_and_the_api_say_so_when_the_app_connects_as_a_role_that_can_disable_the_audit_triggers(
        as_owner):
    # given the app connected as the tables' owner (one DATABASE_URL for the app and migrate)
    rita = session(person("rita", "reviewer"))

    page = rita.get("/status/")
    database = rita.get("/api/v1/status").json()["database"]

    assert (database["role"], database["role_can_disable_triggers"]) == ("lectern_owner", True)
    assert b"This role can disable the audit log's triggers" in page.content


def test_the_page_warns_of_nothing_under_the_app_role(catalog):
    page = session(person("rita", "reviewer")).get("/status/")

    assert b"lectern_app" in page.content and b"disable the audit log" not in page.content


def test_the_page_reset_answers_htmx_with_the_panel_and_a_plain_post_with_a_redirect(catalog, model_again):
    cora = session(person("cora", "curator"))

    swapped = cora.post("/status/reset", headers={"HX-Request": "true"})
    plain = cora.post("/status/reset")

    assert swapped.status_code == 200 and b'id="status-panel"' in swapped.content
    assert b"<html" not in swapped.content and b"the model all-MiniLM-L6-v2-int8 loaded again" in swapped.content
    assert plain.status_code == 302 and plain["Location"] == "/status/"
    assert AuditEntry.objects.filter(action=Action.RUNTIME_RESET).count() == 2
    refused = session(person("rita", "reviewer")).post("/status/reset")
    assert refused.status_code == 403
