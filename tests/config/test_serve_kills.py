"""The production server's processes under hard kills, in real processes on the test
database.

`kill -9` of the supervisor (config.serve, what `make serve` and `make run` run) takes
gunicorn, its workers and the whole django-q2 cluster with it, and the port is free for
the next start; killing the process that started the supervisor (make) stops it too. A
start on a port another process listens on exits at once, naming that process, having
started nothing. (The cluster alone: tests/config/test_qcluster.py.)

A process is gone when its /proc entry is, or when it is a zombie nobody reaps (this
machine's init may not); every wait is on such a condition, bounded by a safety net.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest

from benchmarks.connections import Server, backends, free_port, wait_until
from tests.config.servers import descendants, gone, kill_survivors
from tests.config.test_serve import production_env

BASE_DIR = Path(__file__).resolve().parents[2]
SAFETY_S = 60


def port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn binds
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_kill_9_of_the_supervisor_takes_every_child_with_it(transactional_db, tmp_path):
    server = Server("serve", env=production_env(tmp_path), log=tmp_path / "serve.log").start(timeout=180)
    children: list[int] = []
    try:
        wait_until(lambda: re.search(r"Q Cluster .+ running\.", server.output(tail=None)), SAFETY_S,
                   "the worker to run", server)
        children = descendants(server.child.pid)
        assert len(children) >= 7, children  # gunicorn, its worker; qcluster, sentinel, worker, monitor, pusher

        os.killpg(server.child.pid, signal.SIGKILL)  # the process group `make serve` runs in
        server.child.wait()

        wait_until(lambda: all(gone(pid) for pid in children), SAFETY_S, "the children to die with the supervisor")
        assert port_is_free(server.port)  # the next `make serve` can bind it
        wait_until(lambda: backends(server.app) == 0, SAFETY_S, "the children's database sessions to end")
    finally:
        kill_survivors([server.child.pid, *children])


def test_killing_what_started_the_supervisor_stops_it_and_its_children(transactional_db, tmp_path):
    port = free_port()
    env = {**os.environ, **production_env(tmp_path), "LECTERN_BIND": f"127.0.0.1:{port}"}
    log = tmp_path / "serve.log"
    # `make run`'s command line, started by a parent standing for make
    make = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; subprocess.run(sys.argv[1:])",
                             sys.executable, "-m", "config.serve", "--dev", f"127.0.0.1:{port}", "--stop-with-parent"],
                            cwd=BASE_DIR, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    processes: list[int] = []
    try:
        wait_until(lambda: re.search(r"Q Cluster .+ running\.", log.read_text()) and not port_is_free(port),
                   SAFETY_S * 3, "runserver and the worker to run")
        supervisor = psutil.Process(make.pid).children()[0].pid
        processes = [supervisor, *descendants(supervisor)]

        make.kill()
        make.wait()

        wait_until(lambda: all(gone(pid) for pid in processes), SAFETY_S, "the supervisor and its children to stop")
        assert port_is_free(port)
        assert "serve: stopping (the process that started this one exited)" in log.read_text()
    finally:
        kill_survivors([make.pid, *processes])


def test_a_start_on_a_held_port_names_the_holder_and_starts_nothing(transactional_db, tmp_path):
    app = f"lectern-held-{uuid.uuid4().hex[:8]}"
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        env = {**os.environ, **production_env(tmp_path), "LECTERN_BIND": f"127.0.0.1:{port}", "PGAPPNAME": app}

        done = subprocess.run([sys.executable, "-m", "config.serve"], cwd=BASE_DIR, env=env, capture_output=True,
                              text=True, timeout=SAFETY_S)

    assert done.returncode == 1
    assert done.stdout == "" and len(done.stderr.splitlines()) == 1, done.stdout + done.stderr
    line = done.stderr.strip()
    assert f"127.0.0.1:{port}" in line and f"pid {os.getpid()}" in line, line
    assert " ".join(psutil.Process().cmdline()) in line  # the holder's command line, from /proc
    assert not (tmp_path / "static").exists()  # collectstatic did not run
    assert backends(app) == 0


@pytest.mark.parametrize("address", ["no-such-host.invalid:8000", "127.0.0.1:http"])
def test_a_start_on_an_address_it_cannot_listen_on_says_so_in_one_line(address):
    done = subprocess.run([sys.executable, "-m", "config.serve", "--dev", address], cwd=BASE_DIR,
                          capture_output=True, text=True, timeout=SAFETY_S)

    assert done.returncode == 1
    assert done.stdout == "" and len(done.stderr.splitlines()) == 1, done.stdout + done.stderr
    assert done.stderr.startswith(f"serve: cannot listen on {address}: "), done.stderr


def test_a_port_alone_is_one_on_loopback_as_make_run_passes_it():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]

        done = subprocess.run([sys.executable, "-m", "config.serve", "--dev", str(port)], cwd=BASE_DIR,
                              capture_output=True, text=True, timeout=SAFETY_S)

    assert done.returncode == 1
    assert done.stderr == f"serve: {port} is in use: pid {os.getpid()} listens on it " \
                          f"({' '.join(psutil.Process().cmdline())}); stop it, or serve elsewhere " \
                          f"(LECTERN_BIND, or make run HOST=...)\n", done.stderr
