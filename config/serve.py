"""`make serve`: Lectern in production. Collects static files, then runs gunicorn
(config/gunicorn.conf.py) and a django-q2 cluster side by side, stopping together.
`make run` is the same with Django's development server (--dev ADDRESS) in place of
collectstatic and gunicorn.

Ctrl-C or TERM stops both: each gets TERM, gunicorn finishes the requests in flight
(graceful_timeout), the cluster its tasks; whatever still runs after STOP_SECONDS is
killed (a reindex killed midway leaves the previous generation served, and the next
run resumes it). Either one exiting on its own stops the other and makes this exit 1,
so a service manager sees one unit fail and restarts it whole instead of leaving a web
server without its worker.

Neither outlives this process: each gets SIGKILL when it exits, even by `kill -9`
(config.parent_death; the cluster's processes and gunicorn's workers follow their own
parents). With --stop-with-parent (make passes it) this process stops, as on TERM, when
the one that started it exits. An address already listened on stops the start before
anything runs, naming the process that holds it (config.ports).

Usage: python -m config.serve [--dev ADDRESS] [--stop-with-parent]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from config.database import ensure_database, server_database
from config.parent_death import child_dies_with_this_process, die_with_parent
from config.ports import address_holder, lectern_bind

BASE_DIR = Path(__file__).resolve().parent.parent
STOP_SECONDS = 60  # for both to stop before they are killed
POLL_SECONDS = 0.2


def server_commands(python: str = sys.executable) -> dict[str, list[str]]:
    return {"web": [python, "-m", "gunicorn", "-c", "config/gunicorn.conf.py"],
            "worker": [python, "manage.py", "qcluster"]}


def dev_commands(address: str, python: str = sys.executable) -> dict[str, list[str]]:
    return {"web": [python, "manage.py", "runserver", "--noreload", address],
            "worker": [python, "manage.py", "qcluster"]}


def stop(children: dict[str, subprocess.Popen[bytes]]) -> None:
    for child in children.values():
        if child.poll() is None:
            child.terminate()
    deadline = time.monotonic() + STOP_SECONDS
    for name, child in children.items():
        try:
            child.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            print(f"serve: {name} still running after {STOP_SECONDS}s; killing it", file=sys.stderr)
            os.killpg(child.pid, signal.SIGKILL)  # with the processes it started
            child.wait()


def supervise(commands: dict[str, list[str]]) -> int:
    """Run the commands until a signal (0) or until one exits on its own (1)."""
    signals: list[int] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda received, frame: signals.append(received))
    parent = os.getppid()
    # Each in a process group of its own: a terminal's Ctrl-C reaches only this process,
    # which stops them in order, and a stuck one is killed with its children.
    children = {name: subprocess.Popen(command, cwd=BASE_DIR, process_group=0,
                                       preexec_fn=child_dies_with_this_process(signal.SIGKILL))
                for name, command in commands.items()}
    exited = None
    while not signals and exited is None:
        time.sleep(POLL_SECONDS)
        exited = next((name for name, child in children.items() if child.poll() is not None), None)
    if exited is not None:
        print(f"serve: {exited} exited with {children[exited].returncode}; stopping the rest", file=sys.stderr)
    elif os.getppid() != parent:
        print("serve: stopping (the process that started this one exited)", file=sys.stderr)
    stop(children)
    return 1 if exited is not None else 0


def main(argv: list[str] | None = None) -> int:
    options = _parser().parse_args(argv)
    if options.stop_with_parent:
        die_with_parent(signal.SIGTERM, os.getppid())
    if not options.dev:
        try:
            server_database()  # DEBUG is off: DATABASE_URL, never the embedded server
        except SystemExit as exc:
            print(f"serve: {exc}", file=sys.stderr)
            return 1
    address = options.dev or lectern_bind()
    if (problem := _address_problem(address, dev=bool(options.dev))) is not None:
        print(f"serve: {problem}", file=sys.stderr)
        return 1
    if options.dev:
        # The embedded Postgres, started once here (a failure is one line), not by both children at once.
        ensure_database()
        return supervise(dev_commands(address))
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--no-input", "-v", "0"], cwd=BASE_DIR,
                   check=True)
    return supervise(server_commands())


def _address_problem(address: str, *, dev: bool) -> str | None:
    """Why the server cannot listen on `address`, in one line (None: it can): someone
    listens there, or the address does not resolve to this machine or is no address."""
    try:
        holder = address_holder(address, dev=dev)
    except (OSError, ValueError) as exc:
        return f"cannot listen on {address}: {exc}; serve elsewhere (LECTERN_BIND, or make run HOST=...)"
    if holder is not None:
        return f"{holder}; stop it, or serve elsewhere (LECTERN_BIND, or make run HOST=...)"
    return None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m config.serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dev", metavar="ADDRESS", help="Django's development server on ADDRESS, no collectstatic")
    parser.add_argument("--stop-with-parent", action="store_true",
                        help="stop (as on TERM) when the process that started this one exits (make)")
    return parser


if __name__ == "__main__":
    sys.exit(main())
