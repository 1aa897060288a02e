"""What the status page and GET /api/v1/status report: the model, the database and
its extensions, the task queue and its failures, the schedules (the last scan), the
catalogs' indexes, the tables' sizes on disk, and this process's view of resets.

It reads every layer (catalog's models and embedder, approvals' audit log, retrieval's
caches, django-q2's tables) and writes nothing. A constant number of statements,
whatever the catalogs hold: counts come from the catalogs' own statistics and from
grouped aggregates, sizes from Postgres's size functions, never from counting rows of
the large tables (pinned in tests/retrieval/test_status.py).

Who sees what (docs/subsystems/dashboard.md, "Status"): `basic` is the embeddings alone (seed
004's status: enough for an agent to choose a search mode); `full` is everything here,
for people with a role (who see every catalog); `catalogs`, for a curator agent, is the
embeddings, the answering process as its reset concerns it, and its own catalogs'
indexes and index runs: nothing of the server's database, files, disk, queue or
schedules (whose failures name any catalog's work), nor of another catalog.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Count, Max, Q, QuerySet
from django.utils import timezone
from django_q.models import OrmQ, Schedule, Task

from catalog.auth import CURATOR_GROUP, REVIEWER_GROUP, RequestUser, has_any_role, visible_catalogs
from catalog.embedder import DIMENSIONS, embedder_status, get_embedder
from catalog.models import Agent, Catalog, Document, IndexRun, ReferenceSource
from catalog.tasks import SCAN_SCHEDULE
from retrieval.enrichment.detection import cached_indexes
from retrieval.runtime import STARTED_AT, applied_reset, last_reset

RECENT_FAILURES = 5
FAILURE_TEXT_CHARS = 300
RECENT = timedelta(hours=24)

# The tables and indexes that hold the catalogs, as the page names them:
# (name, relation, what is measured). `table`: the rows (heap and TOAST, no index);
# `hnsw`: the table's HNSW indexes; `other_indexes`: its other indexes; `total`: a table
# with its indexes. A table partitioned by catalog (catalog_chunk, catalog_postings: a
# partition per catalog, each chunk partition with its own HNSW index) is measured
# over all its partitions; `relation` names the table, or for `hnsw` its indexes.
RELATIONS = (
    ("Chunks (text)", "catalog_chunk", "table"),
    ("Vector indexes (HNSW, one per catalog)", "catalog_chunk_c*_hnsw", "hnsw"),
    ("Chunk keys and other chunk indexes", "catalog_chunk", "other_indexes"),
    ("BM25 blocks (term-major, packed)", "catalog_termblock", "total"),
    ("Forward postings (per chunk)", "catalog_postings", "total"),
    ("Vocabulary (terms)", "catalog_term", "total"),
    ("Documents", "catalog_document", "total"),
    ("Uploaded files", "catalog_uploadedfile", "total"),
    ("Embedding cache", "catalog_embeddingcache", "total"),
    ("Enrichment traces", "retrieval_trace", "total"),
    ("Audit log", "approvals_auditentry", "total"),
    ("Task queue and results", "django_q_task", "total"),
)
# The table each measure reads: a `hnsw` relation names indexes, not a table.
_TABLE = {"catalog_chunk_c*_hnsw": "catalog_chunk"}
# Each is a sum over the table's partition tree (the table alone when it is not
# partitioned); NULL when the table is missing.
# (pg_partition_tree lists nothing for a table that is not partitioned: it is added.)
_TREE = ("FROM (SELECT relid FROM pg_partition_tree(to_regclass(%s)) UNION SELECT to_regclass(%s)) t "
         "WHERE t.relid IS NOT NULL")
_HNSW = ("(SELECT sum(pg_relation_size(i.indexrelid)) FROM pg_partition_tree(to_regclass(%s)) t "
         "JOIN pg_index i ON i.indrelid = t.relid JOIN pg_class c ON c.oid = i.indexrelid "
         "JOIN pg_am a ON a.oid = c.relam AND a.amname = 'hnsw')")
_SIZE_SQL = {
    "table": f"(SELECT sum(pg_table_size(t.relid)) {_TREE})",
    "hnsw": f"coalesce({_HNSW}, (SELECT 0 {_TREE} LIMIT 1))",
    "total": f"(SELECT sum(pg_total_relation_size(t.relid)) {_TREE})",
    "other_indexes": f"(SELECT sum(pg_indexes_size(t.relid)) {_TREE}) - coalesce({_HNSW}, 0)",
}
_EVERY = {Schedule.HOURLY: "hour", Schedule.DAILY: "day", Schedule.WEEKLY: "week",
          Schedule.MONTHLY: "month", Schedule.ONCE: "once", Schedule.CRON: "cron"}


def basic_status() -> dict[str, Any]:
    return {"view": "basic", "embeddings": embedder_status()}


def full_status() -> dict[str, Any]:
    now = timezone.now()
    database, storage, disk = _database()
    schedules = _schedules(now)
    scan = next((s for s in schedules if s["name"] == SCAN_SCHEDULE), None)
    return {
        "view": "full",
        "generated_at": now,
        "embeddings": embedder_status(),
        "model": _model(),
        "process": _process(),
        "last_reset": _reset(),
        "database": database,
        "queue": _queue(now),
        "index_runs": _index_runs(now),
        "schedules": schedules,
        "last_scan": None if scan is None else {
            **(scan["last"] or {"started": None, "stopped": None, "success": None, "result": None}),
            "every": scan["every"], "next_run": scan["next_run"], "overdue_s": scan["overdue_s"]},
        "catalogs": _catalogs(),
        "storage": storage,
        "disk": disk,
    }


def catalog_status(agent: Agent) -> dict[str, Any]:
    """A curator agent's view: the embeddings, this process (whether it applied the
    agent's reset; its cached detection indexes of the agent's catalogs only), and its
    own catalogs' indexes and index runs (what it may reindex and wait for); four
    statements, whatever there is."""
    now, catalogs = timezone.now(), visible_catalogs(agent)
    own = list(catalogs.values_list("pk", flat=True))
    return {"view": "catalogs", "generated_at": now, "embeddings": embedder_status(), "process": _process(own),
            "index_runs": _index_runs(now, catalogs), "catalogs": _catalogs(catalogs)}


def status_for(caller: RequestUser) -> dict[str, Any]:
    """Everything to people with a role (curators and reviewers); its own catalogs to a
    curator agent; the embeddings alone to other agents and to people with no role."""
    if isinstance(caller, Agent):
        return catalog_status(caller) if caller.is_curator else basic_status()
    return full_status() if has_any_role(caller, (CURATOR_GROUP, REVIEWER_GROUP)) else basic_status()


# --- the model and this process ------------------------------------------------------------

def _model() -> dict[str, Any]:
    embedder = get_embedder()
    return {"configured": settings.LECTERN_EMBEDDING_MODEL, "dimensions": DIMENSIONS,
            "max_tokens": embedder.max_tokens if embedder is not None else None,
            "threads": settings.LECTERN_EMBEDDING_THREADS, "batch": settings.LECTERN_EMBEDDING_BATCH}


def _process(catalog_ids: list[int] | None = None) -> dict[str, Any]:
    return {"pid": os.getpid(), "started_at": datetime.fromtimestamp(STARTED_AT, tz=UTC),
            "applied_reset": applied_reset(), "follows_resets_every_s": settings.LECTERN_RUNTIME_POLL_SECONDS,
            "cached_detection_indexes": cached_indexes(catalog_ids)}


def _reset() -> dict[str, Any] | None:
    record = last_reset()
    return None if record is None else {"seq": record.seq, "at": record.at, "by": record.by}


# --- the database: versions, sizes, disk ---------------------------------------------------

def _database() -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """One statement: version, size, data directory (when this role may read it), the
    role the app connects as and whether it could disable the audit log's triggers (a
    superuser, or the table's owner: docs/subsystems/governance.md, "Database roles"),
    extensions, and each of RELATIONS' size."""
    sizes = ", ".join(f"({index}, {_SIZE_SQL[kind]})" for index, (_, _, kind) in enumerate(RELATIONS))
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(f"""
            SELECT current_setting('server_version'), pg_database_size(current_database()), current_database(),
                   CASE WHEN (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
                          OR pg_has_role(current_user, 'pg_read_all_settings', 'MEMBER')
                        THEN current_setting('data_directory') END,
                   current_user,
                   (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
                     OR coalesce((SELECT pg_has_role(current_user, relowner, 'USAGE') FROM pg_class
                                  WHERE oid = to_regclass('approvals_auditentry')), false),
                   (SELECT coalesce(json_agg(json_build_object('name', extname, 'version', extversion)
                                             ORDER BY extname), '[]') FROM pg_extension),
                   (SELECT json_agg(json_build_array(i, s)) FROM (VALUES {sizes}) AS sizes(i, s))
            """, [table for _, relation, kind in RELATIONS
                  for table in [_TABLE.get(relation, relation)] * _SIZE_SQL[kind].count("%s")])
        version, size, name, data_directory, role, role_can_disable, extensions, measured = cursor.fetchone()
    ms = round((time.perf_counter() - started) * 1000, 2)
    if isinstance(extensions, str):
        extensions, measured = json.loads(extensions), json.loads(measured)
    database = {"version": version, "name": name, "size_bytes": size, "ms": ms, "extensions": extensions,
                "data_directory": data_directory, "role": role, "role_can_disable_triggers": role_can_disable}
    by_index = dict(measured)
    storage = [{"name": label, "relation": relation, "bytes": by_index.get(index)}
               for index, (label, relation, _) in enumerate(RELATIONS)]
    return database, storage, _disk(data_directory)


def _disk(data_directory: str | None) -> list[dict[str, Any]]:
    """The filesystems holding the database's files (when they are on this machine) and
    Lectern's own var/ folder (uploads of decision files, collected static files), once
    each."""
    places = []
    if data_directory and Path(data_directory).is_dir():
        places.append(("the database's files", Path(data_directory)))
    places.append(("Lectern's var/ folder", Path(settings.BASE_DIR) / "var"))
    seen: set[int] = set()
    found: list[dict[str, Any]] = []
    for what, path in places:
        try:
            device = path.stat().st_dev
            usage = shutil.disk_usage(path)
        except OSError:
            continue
        if device in seen:
            found[-1]["what"] += f" and {what}"
            continue
        seen.add(device)
        found.append({"what": what, "path": str(path), "total_bytes": usage.total, "used_bytes": usage.used,
                      "free_bytes": usage.free})
    return found


# --- the task queue, index runs and schedules ----------------------------------------------

def _queue(now: datetime) -> dict[str, Any]:
    """django-q2's ORM broker: a task waits while its lock is in the past (lock <= now,
    as the broker's queue_size counts) and is being run while a worker holds it; failed
    tasks stay in django_q_task until someone deletes them (the admin's "Failed tasks")."""
    queued = OrmQ.objects.aggregate(waiting=Count("id", filter=Q(lock__lte=now)),
                                    in_progress=Count("id", filter=Q(lock__gt=now)))
    failed = Task.objects.filter(success=False).aggregate(
        total=Count("id"), recent=Count("id", filter=Q(stopped__gte=now - RECENT)))
    recent = Task.objects.filter(success=False).order_by("-stopped").only(
        "id", "name", "func", "stopped", "result")[:RECENT_FAILURES]
    return {"waiting": queued["waiting"], "in_progress": queued["in_progress"], "failed": failed["total"],
            "failed_24h": failed["recent"],
            "recent_failures": [{"id": task.id, "name": task.name, "func": task.func, "stopped": task.stopped,
                                 "error": _error_line(task.result)} for task in recent]}


def _error_line(result: object) -> str:
    """django-q2 stores a failure as "message : traceback": its last line names the
    exception and says what it was."""
    lines = [line for line in str(result or "").splitlines() if line.strip()]
    text = lines[-1] if lines else ""
    return text if len(text) <= FAILURE_TEXT_CHARS else text[: FAILURE_TEXT_CHARS - 1] + "…"


def _index_runs(now: datetime, catalogs: QuerySet[Catalog] | None = None) -> dict[str, Any]:
    """The index runs of `catalogs` (a subquery), or of every catalog."""
    runs = IndexRun.objects.all() if catalogs is None else IndexRun.objects.filter(catalog__in=catalogs)
    return runs.aggregate(
        queued=Count("id", filter=Q(status=IndexRun.Status.QUEUED)),
        running=Count("id", filter=Q(status=IndexRun.Status.RUNNING)),
        failed_24h=Count("id", filter=Q(status=IndexRun.Status.FAILED, finished_at__gte=now - RECENT)),
        last_finished_at=Max("finished_at"))


def _schedules(now: datetime) -> list[dict[str, Any]]:
    """Every schedule, with its last task (success or not) by function: two statements."""
    schedules = list(Schedule.objects.order_by("name").only("name", "func", "schedule_type", "minutes", "next_run",
                                                             "repeats"))
    funcs = {schedule.func for schedule in schedules}
    last = {task.func: task for task in Task.objects.filter(func__in=funcs).order_by("func", "-started")
            .distinct("func").only("func", "started", "stopped", "success", "result")}
    found = []
    for schedule in schedules:
        task = last.get(schedule.func)
        overdue = (now - schedule.next_run).total_seconds() if schedule.next_run else 0.0
        found.append({
            "name": schedule.name or schedule.func, "func": schedule.func, "every": _every(schedule),
            "next_run": schedule.next_run, "overdue_s": round(overdue) if overdue > 0 else 0,
            "last": None if task is None else {
                "started": task.started, "stopped": task.stopped, "success": task.success,
                "result": _error_line(task.result) if not task.success else _short(task.result)},
        })
    return found


def _every(schedule: Schedule) -> str:
    if schedule.schedule_type == Schedule.MINUTES:
        minutes = schedule.minutes or 1
        return "minute" if minutes == 1 else f"{minutes} minutes"
    return _EVERY.get(schedule.schedule_type) or str(schedule.get_schedule_type_display()).lower()


def _short(result: object) -> str:
    text = "" if result is None else str(result)
    return text if len(text) <= FAILURE_TEXT_CHARS else text[: FAILURE_TEXT_CHARS - 1] + "…"


# --- the catalogs --------------------------------------------------------------------------

def _catalogs(scope: QuerySet[Catalog] | None = None) -> list[dict[str, Any]]:
    """Each catalog's (of `scope`, else every one) sources (and how many are not ready),
    documents, chunks and terms: the chunk and term counts are the catalog's own
    statistics, kept exact by every write; documents are counted in one grouped
    statement."""
    not_ready = ~Q(sources__status__in=[ReferenceSource.Status.READY, ReferenceSource.Status.LEXICAL_ONLY])
    catalogs = (Catalog.objects.live() if scope is None else Catalog.objects.filter(pk__in=scope)).annotate(
        source_total=Count("sources"), sources_not_ready=Count("sources", filter=not_ready),
        sources_lexical_only=Count("sources", filter=Q(sources__status=ReferenceSource.Status.LEXICAL_ONLY)),
        last_indexed_at=Max("sources__indexed_at"),
    ).order_by("slug").values("pk", "slug", "name", "chunk_count", "term_count", "source_total", "sources_not_ready",
                              "sources_lexical_only", "last_indexed_at")
    documents = Document.objects.all() if scope is None else Document.objects.filter(catalog__in=scope)
    counted = dict(documents.order_by().values("catalog_id").annotate(n=Count("id")).values_list("catalog_id", "n"))
    return [{"slug": c["slug"], "name": c["name"], "sources": c["source_total"],
             "sources_not_ready": c["sources_not_ready"], "sources_lexical_only": c["sources_lexical_only"],
             "documents": counted.get(c["pk"], 0), "chunks": c["chunk_count"], "terms": c["term_count"],
             "last_indexed_at": c["last_indexed_at"]} for c in catalogs]
