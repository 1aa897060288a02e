"""The whole topology in real processes (issue 21): a primary and its streaming replica,
Redis as the task broker, and two `make serve` programs, each a web process (gunicorn)
and a worker (a django-q2 cluster), behind a load balancer the test plays
(tests/topology.py).

An agent stores memories, searches and enriches through both web processes while a
curator's edits reindex a source through both. One reindex is held at its switch (the
test holds the catalog row its transaction must lock), and then the worker running it
and the other program's web process are killed with SIGKILL. Nothing acknowledged is
lost: every memory stored, every file put, indexed once; the run the killed worker held
fails as interrupted and the next run indexes what it had not, and the new content is
found through the replica once it has replayed it. Every wait is on a condition (a
backend waiting on the lock, the replica's replay position, the runs' states), bounded by
a safety net.
"""

from __future__ import annotations

import os
import re
import signal
import threading
from typing import Any, cast

import psutil

from benchmarks.connections import Server, wait_until
from tests.topology import READ_FROM, SAFETY_S, TestCluster, Traffic, api, cluster, wait_for_replay
from tests.topology_children import CATALOG, NOTES

FILES = f"/api/v1/catalogs/{CATALOG}/sources/{NOTES}/files"


def put_file(servers: list[Server], token: str, turn: int, path: str, text: str) -> None:
    """A curator's edit through one web process, acknowledged (202) with its run."""
    status, _, body = api(servers[turn % len(servers)], "PUT", FILES, token, {"path": path, "text": text})
    assert status == 202, body


def rows(cluster: TestCluster, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
    with cluster.superuser(cluster.primary) as conn:
        conn.execute("SET search_path TO public")
        return conn.execute(sql, params).fetchall()


def notes_runs(cluster: TestCluster) -> list[tuple[Any, ...]]:
    return rows(cluster, "SELECT r.id, r.status, r.error, r.counts FROM catalog_indexrun r "
                         "JOIN catalog_referencesource s ON s.id = r.source_id WHERE s.slug = %s ORDER BY r.id",
                [NOTES])


def settled(cluster: TestCluster) -> bool:
    return all(status in ("succeeded", "failed") for _, status, _, _ in notes_runs(cluster))


def switch_waiter(cluster: TestCluster, servers: list[Server]) -> tuple[Server, int] | None:
    """The program whose worker's backend waits for a lock on the catalog row, and that
    backend's pid."""
    found = rows(cluster, "SELECT application_name, pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                          "AND query LIKE %s", ["%catalog_catalog%"])
    by_app = {server.app: server for server in servers}
    return next(((by_app[app], pid) for app, pid in found if app in by_app), None)


def worker_pid(server: Server, run_id: int) -> int:
    """The django-q2 worker process running reindex-run-`run_id` in `server`: the worker
    named on the line that reports it, and the pid its start line gave."""
    log = server.output(tail=None)
    name = re.search(rf"(Process-\w+) processing reindex-run-{run_id}\b", log)
    assert name is not None, log
    started = re.search(rf"{name.group(1)} ready for work at (\d+)", log)
    assert started is not None, log
    return int(started.group(1))


def kill_web(server: Server) -> None:
    """SIGKILL to the program's web process: gunicorn's master and its workers (their
    own process group)."""
    master = next(child for child in psutil.Process(server.child.pid).children()
                  if "gunicorn" in " ".join(child.cmdline()))
    os.killpg(master.pid, signal.SIGKILL)


def test_a_killed_web_process_and_worker_lose_nothing_and_do_nothing_twice():
    with cluster() as made:
        token = made.call("seed")["token"]
        servers = [made.web("web-a"), made.web("web-b")]
        traffic, stop = Traffic(servers, token), threading.Event()
        loader = threading.Thread(target=traffic.run, args=(stop,), daemon=True)
        try:
            for server in servers:
                server.start(timeout=180)
            wait_until(lambda: all(re.search(r"Q Cluster .+ running\.", s.output(tail=None)) for s in servers),
                       SAFETY_S, "the workers to run")
            loader.start()

            # given reindexes through both web processes, done by whichever worker takes them
            for turn in range(4):
                put_file(servers, token, turn, f"guide-{turn}.md", f"Guide {turn}: runbook page {turn}.")
            wait_until(lambda: settled(made), SAFETY_S, "the edits' runs to finish")

            # when a reindex is held at its switch, and its worker and the other web process are killed
            with made.superuser(made.primary) as barrier:
                barrier.execute("BEGIN")
                # the lock a switch takes (catalog.indexing.writes); an edit's foreign-key checks pass it
                barrier.execute("SELECT 1 FROM catalog_catalog WHERE slug = %s FOR NO KEY UPDATE", [CATALOG])
                put_file(servers, token, 0, "held.md", "The held page: written while its run was held.")
                waiting = wait_until(lambda: switch_waiter(made, servers), SAFETY_S, "a worker to wait at the switch")
                holder, backend = cast(tuple[Server, int], waiting)
                held_run = next(run for run, status, _, _ in notes_runs(made) if status == "running")
                os.kill(worker_pid(holder, held_run), signal.SIGKILL)
                other = next(server for server in servers if server is not holder)
                kill_web(other)
                wait_until(lambda: not rows(made, "SELECT 1 FROM pg_stat_activity WHERE pid = %s", [backend]),
                           SAFETY_S, "the killed worker's backend to end")
                barrier.execute("ROLLBACK")

            # and the curator edits again, through the web process left
            put_file([holder], token, 0, "after.md", "The after page: the zanzibar runbook.")
            wait_until(lambda: settled(made), SAFETY_S, "the runs to finish")
            wait_until(lambda: other.port in traffic.down, SAFETY_S, "the traffic to meet the killed web process")
            # the new content, through the replica once it has replayed it
            wait_for_replay(made)
            status, headers, found = api(holder, "POST", "/api/v1/search", token,
                                         {"catalog": CATALOG, "query": "zanzibar runbook", "mode": "bm25"})
        finally:
            stop.set()
            if loader.ident is not None:
                loader.join(timeout=SAFETY_S)
            for server in servers:
                if server.process is not None and server.process.poll() is None:
                    server.stop()

        # then the other program stopped: its web process died, so it stopped its worker and exited 1
        assert other.child.returncode == 1
        assert "serve: web exited" in other.output(tail=None)

        # nothing acknowledged is lost: every memory stored once, every file put indexed
        assert traffic.errors == []
        assert traffic.stored, "no memory was stored"
        kept = dict(rows(made, "SELECT content, count(*) FROM retrieval_memoryentry WHERE user_id = 'traffic' "
                               "GROUP BY content"))
        assert {content: kept.get(content) for content in traffic.stored} == {c: 1 for c in traffic.stored}
        paths = [path for (path,) in rows(made, "SELECT d.path FROM catalog_document d JOIN catalog_referencesource s "
                                                "ON s.id = d.source_id WHERE s.slug = %s ORDER BY d.path", [NOTES])]
        assert paths == ["after.md", "guide-0.md", "guide-1.md", "guide-2.md", "guide-3.md", "held.md", "intro.md"]

        # nothing done twice: the held run failed as interrupted, the runs that succeeded
        # added each file once, and no chunk is stored twice
        runs = notes_runs(made)
        failed = [(run, error) for run, status, error, _ in runs if status == "failed"]
        assert failed == [(held_run, "interrupted: its worker stopped")]
        assert sum(counts.get("documents_added", 0) for _, status, _, counts in runs if status == "succeeded") == 7
        assert rows(made, "SELECT key FROM catalog_chunk GROUP BY key HAVING count(*) > 1") == []
        # the workers' tasks went through Redis (the database's queue stayed empty), each
        # run's result kept (the seed's first run was a command's, in its own process)
        assert rows(made, "SELECT count(*) FROM django_q_ormq") == [(0,)]
        done = {name for (name,) in rows(made, "SELECT name FROM django_q_task WHERE success")}
        assert {f"reindex-run-{run}" for run, status, _, _ in runs[1:] if status == "succeeded"} <= done

        # and the reindex was found through the replica
        assert (status, headers[READ_FROM]) == (200, "replica")
        assert [hit["document_id"] for hit in found["results"]][:1] == ["after.md"]
