"""`manage.py qcluster` (config/management/commands/qcluster.py) in real processes on the
test database: TERM to every one of its processes (as a process group, `pkill -f
qcluster` or a service manager's control group sends it) stops it, even when its
sentinel dies while being stopped; `kill -9` of its main process takes the sentinel and
its workers with it.

A process is gone when its /proc entry is, or when it is a zombie nobody reaps (this
machine's init may not); every wait is on a condition, bounded by a safety net.
"""

from __future__ import annotations

import os
import platform
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from benchmarks.connections import wait_until
from tests.config.servers import child_env, descendants, gone, kill_survivors

BASE_DIR = Path(__file__).resolve().parents[2]
SAFETY_S = 60


@contextmanager
def cluster(log: Path) -> Iterator[tuple[subprocess.Popen[bytes], list[int]]]:
    """`manage.py qcluster` in a process group of its own, running, and its processes;
    whatever of them is left is killed after."""
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=BASE_DIR, stdout=out,
                                   stderr=subprocess.STDOUT, process_group=0,
                                   env={**os.environ, **child_env(SECRET_KEY="x" * 50, LECTERN_Q_WORKERS="1")})
    children: list[int] = []
    try:
        wait_until(lambda: re.search(r"Q Cluster .+ running\.", log.read_text()) or process.poll() is not None,
                   SAFETY_S, "the cluster to run")
        assert process.poll() is None, log.read_text()
        children = descendants(process.pid)
        yield process, children
    finally:
        kill_survivors([process.pid, *children])
        process.wait()


def test_term_to_every_process_of_the_cluster_stops_it(transactional_db, tmp_path):
    with cluster(tmp_path / "qcluster.log") as (process, children):
        assert len(children) == 4, children  # sentinel, worker, monitor, pusher

        os.killpg(process.pid, signal.SIGTERM)

        assert process.wait(timeout=SAFETY_S) == 0, (tmp_path / "qcluster.log").read_text()
        wait_until(lambda: all(gone(pid) for pid in children), SAFETY_S, "the cluster's processes to exit")


FUTEX = {"x86_64": 202, "aarch64": 98}[platform.machine()]  # the syscall's number


def stopped_asleep_on_its_stop_event(sentinel: int) -> bool:
    """SIGSTOP the sentinel; True if it is stopped inside a futex wait (between two guard
    cycles it sleeps on the cluster's stop event: nearly all the time), else resumed."""
    os.kill(sentinel, signal.SIGSTOP)
    wait_until(lambda: Path(f"/proc/{sentinel}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T", SAFETY_S,
               "the sentinel to stop")
    if int(Path(f"/proc/{sentinel}/syscall").read_text().split()[0]) == FUTEX:
        return True
    os.kill(sentinel, signal.SIGCONT)
    return False


def test_a_stop_ends_when_the_sentinel_dies_while_being_stopped(transactional_db, tmp_path):
    """The interleaving a TERM to every process of the cluster may bring, made certain:
    the main process begins to stop the cluster, then its sentinel dies asleep."""
    log = tmp_path / "qcluster.log"
    with cluster(log) as (process, children):
        sentinel = psutil.Process(process.pid).children()[0].pid
        wait_until(lambda: stopped_asleep_on_its_stop_event(sentinel), SAFETY_S, "the sentinel held asleep")

        process.send_signal(signal.SIGTERM)
        wait_until(lambda: re.search(r"Q Cluster .+ stopping\.", log.read_text()), SAFETY_S, "the stop to begin")
        for pid in children:
            os.kill(pid, signal.SIGTERM)
        os.kill(sentinel, signal.SIGCONT)  # a stopped process takes its TERM once resumed: it dies where it slept

        assert process.wait(timeout=SAFETY_S) == 0, log.read_text()
        wait_until(lambda: all(gone(pid) for pid in children), SAFETY_S, "the cluster's processes to exit")


def test_kill_9_of_the_cluster_takes_its_processes_with_it(transactional_db, tmp_path):
    with cluster(tmp_path / "qcluster.log") as (process, children):
        process.kill()
        process.wait()

        wait_until(lambda: all(gone(pid) for pid in children), SAFETY_S, "the sentinel and its workers to die")
