"""`manage.py qcluster`: django-q2's cluster, started and stopped so that none of its
processes outlives another and a stop never hangs.

django-q2's own command stops the cluster inside its SIGTERM handler: Cluster.stop()
sets the stop event, then joins the sentinel. Setting a multiprocessing Event waits
until every process asleep on it has woken; the sentinel sleeps on that event between
its guard cycles, and one killed there (TERM to the cluster's process group, `pkill -f
qcluster`, a service manager's control group, the OOM killer) never wakes: the main
process blocks forever beside its defunct sentinel. The handler runs in signal context
too, where the event's lock may already be held (django-q2 issue #346, "Cluster.
sig_handler deadlocks the cluster"). Here the handler only records the signal; the main
loop stops the cluster, setting the event from a helper thread that may block for good
without holding anything up, and waits for the sentinel to exit, whichever way it does.

Every process of the cluster (the sentinel; its workers, monitor and pusher) gets
SIGKILL when its parent exits (config.parent_death), so `kill -9` of the main process
leaves nothing running. The sentinel exiting on its own makes this exit 1, so that a
service manager (or config.serve) restarts the cluster whole.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from multiprocessing import util as mp_util
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event
from typing import Any, cast

from django.conf import settings
from django.core.management.base import CommandError
from django_q.cluster import Cluster
from django_q.conf import logger
from django_q.management.commands.qcluster import Command as DjangoQCommand

from config.parent_death import die_with_parent

POLL_SECONDS = 0.5


class _ForkedProcesses:
    """Kept alive for the after-fork hook: multiprocessing keeps its hooks by weak reference."""


_FORKS = _ForkedProcesses()


def _dies_with_parent(_: object) -> None:
    parent = multiprocessing.parent_process()
    die_with_parent(signal.SIGKILL, parent.pid if parent and parent.pid else os.getppid())


class Command(DjangoQCommand):
    def handle(self, *args: Any, **options: Any) -> None:
        settings.SECRET_KEY  # noqa: B018 (as django-q2's: refuse to start without one, it signs tasks)
        if options.get("cluster_name"):
            os.environ["Q_CLUSTER_NAME"] = options["cluster_name"]
        mp_util.register_after_fork(_FORKS, _dies_with_parent)
        cluster = Cluster()  # installs django-q2's handlers, replaced here
        received: list[int] = []
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda signum, frame: received.append(signum))
        cluster.start()  # returns once the sentinel runs
        sentinel = cast(BaseProcess, cluster.sentinel)
        if not options.get("run_once"):
            _wait(sentinel, received)
        if received or options.get("run_once"):
            _stop(cluster, sentinel)
            return
        sentinel.join()
        raise CommandError(f"the cluster's sentinel exited on its own (exit code {sentinel.exitcode})")


def _wait(sentinel: BaseProcess, received: list[int]) -> None:
    """Until a signal, or until the sentinel exits on its own."""
    while not received and sentinel.is_alive():
        sentinel.join(POLL_SECONDS)


def _stop(cluster: Cluster, sentinel: BaseProcess) -> None:
    """Ask the sentinel to stop its workers (they finish their task), and wait until it
    has exited, asked or killed."""
    if sentinel.is_alive():
        logger.info("Q Cluster %s stopping.", cluster.name)
        stop_event = cast(Event, cluster.stop_event)
        threading.Thread(target=stop_event.set, name="qcluster-stop", daemon=True).start()
    sentinel.join()
    logger.info("Q Cluster %s has stopped.", cluster.name)
