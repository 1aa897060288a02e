"""Recovery with Redis as the task broker (REDIS_URL): Redis forgets a task once a
cluster takes it, so a queued run whose task a dead cluster took would wait forever
(the scan leaves sources with a queued run alone). Recovery reads Redis's list and
enqueues again a queued run whose task is not in it, once. A worker in a child process
configured only by the environment, against Debian's redis-server on a socket of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.connections import wait_until
from benchmarks.topology import RedisMissing, redis_server
from catalog.indexing.runs import TASK_NAME
from catalog.models import IndexRun, ReferenceSource
from tests.config.servers import child_env, private_dir

BASE_DIR = Path(__file__).resolve().parents[2]
RECOVER = ("import django, json; django.setup(); from catalog.indexing.runs import pending_task_names, runs_recover; "
           "recovered = [run.pk for run in runs_recover()]; "
           "print(json.dumps({'recovered': recovered, 'pending': sorted(pending_task_names())}))")


@pytest.fixture
def redis_url():
    try:
        program = redis_server()
    except RedisMissing as exc:
        pytest.skip(str(exc))
    with private_dir("redis") as root:
        socket = root / "redis.sock"
        server = subprocess.Popen([program, "--port", "0", "--unixsocket", str(socket), "--save", "",
                                   "--appendonly", "no"], stdout=subprocess.DEVNULL)
        try:
            wait_until(socket.exists, 60, "redis-server to listen")
            yield f"unix://{socket}"
        finally:
            server.terminate()
            server.wait(timeout=60)


def recover(redis_url: str) -> dict[str, list]:
    """What a worker does as it starts: runs_recover(), then what Redis's queue holds."""
    done = subprocess.run([sys.executable, "-c", RECOVER], cwd=BASE_DIR, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **child_env(REDIS_URL=redis_url)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_queued_run_whose_task_redis_no_longer_holds_is_enqueued_again_once(transactional_db, make_catalog,
                                                                             redis_url):
    # given a queued run whose task a cluster took from Redis and died with
    catalog = make_catalog("kb")
    source = ReferenceSource.objects.create(catalog=catalog, slug="notes", name="Notes", kind="inline",
                                            content="Retry with backoff.")
    lost = IndexRun.objects.create(catalog=catalog, source=source, trigger="api")

    # when a worker starts, its task is in Redis's queue again
    first = recover(redis_url)
    assert first == {"recovered": [lost.pk], "pending": [TASK_NAME.format(lost.pk)]}

    # and the next worker to start finds it there and enqueues nothing more
    assert recover(redis_url) == {"recovered": [], "pending": [TASK_NAME.format(lost.pk)]}
