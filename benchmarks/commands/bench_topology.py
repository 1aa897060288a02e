import json
import os
import re
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.connections import Load, Server, search_load
from benchmarks.topology import BASE_DIR, SAFETY_S, Cluster, RedisMissing, cluster, wait_for_replay

AGENT = "bench-topology"
VARIANTS = ("replica", "primary only")


class Command(BaseCommand):
    help = ("The topology under load: a primary, its streaming replica and Redis of their own "
            "(benchmarks/topology.py), "
            "the demo catalog, two `make serve` programs; --clients clients search (BM25, a new connection per "
            "request) for --seconds through both, with reads from the replica and without it, side by side, "
            "--repeat times. Reports errors, latency percentiles and the peak backends on each server. See "
            "docs/benchmarks.md, 'The topology under load'.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--clients", type=int, default=64)
        parser.add_argument("--seconds", type=float, default=60)
        parser.add_argument("--repeat", type=int, default=3)
        parser.add_argument("--web-workers", type=int, default=2)
        parser.add_argument("--web-threads", type=int, default=4)
        parser.add_argument("--json", type=Path, dest="json_path", help="write every round's figures here")

    def handle(self, *args: Any, clients: int, seconds: float, repeat: int, web_workers: int, web_threads: int,
               json_path: Path | None, **options: object) -> None:
        try:
            with cluster() as made:
                token = _demo(made)
                rounds = [self._round(made, token, variant, clients, seconds, web_workers, web_threads)
                          for _ in range(repeat) for variant in VARIANTS]
        except RedisMissing as exc:
            raise CommandError(str(exc)) from None
        self._report(rounds, clients, seconds, web_workers, web_threads)
        if json_path is not None:
            json_path.write_text(json.dumps(rounds, indent=2))

    def _round(self, made: Cluster, token: str, variant: str, clients: int, seconds: float, workers: int,
               threads: int) -> dict[str, Any]:
        """Two programs started for this round (so each round starts alike), loaded, stopped."""
        extra = {"LECTERN_WEB_WORKERS": str(workers), "LECTERN_WEB_THREADS": str(threads), "LECTERN_Q_WORKERS": "1"}
        if variant == "primary only":
            extra["DATABASE_REPLICA_URL"] = ""
        servers = [made.server(f"web-{n}", **extra) for n in range(2)]
        try:
            for server in servers:
                server.start(timeout=SAFETY_S)
            wait_for_replay(made)
            # every web process has served (its first requests set it up): not measured
            search_load(servers, token=token, catalog="demo", clients=2 * workers * threads, keepalive=False,
                        requests_per_client=5, counters={})
            load = search_load(servers, token=token, catalog="demo", clients=clients, keepalive=False,
                               seconds=seconds, counters=_counters(made, servers))
        finally:
            for server in servers:
                if server.process is not None:
                    server.stop()
        figures = _figures(variant, load)
        self.stdout.write(_line(figures))
        return figures

    def _report(self, rounds: list[dict[str, Any]], clients: int, seconds: float, workers: int,
                threads: int) -> None:
        bound = 2 * (workers * threads + 1 + 3)
        self.stdout.write(f"\n{clients} clients for {seconds:g}s through 2 programs of {workers} x {threads} threads "
                          f"and 1 task worker (bound: {bound} backends on the primary, "
                          f"{2 * workers * threads} on the replica); medians of {len(rounds) // len(VARIANTS)}:")
        for variant in VARIANTS:
            mine = [r for r in rounds if r["variant"] == variant]
            med = {key: statistics.median(r[key] for r in mine)
                   for key in ("requests", "errors", "per_s", "p50_ms", "p95_ms", "p99_ms", "peak_primary",
                               "peak_replica", "replica_share")}
            self.stdout.write(_line({"variant": variant, **med}))


def _demo(made: Cluster) -> str:
    """The demo catalog loaded into the cluster, and a token of an agent reading it."""
    env = {**os.environ, **made.env()}
    for command in (["load_demo"], ["create_agent", "--name", AGENT, "--catalogs", "demo"]):
        done = subprocess.run([sys.executable, "manage.py", *command], cwd=BASE_DIR, env=env, capture_output=True,
                              text=True, timeout=600)
        if done.returncode != 0:
            raise CommandError(f"manage.py {command[0]} failed:\n{done.stdout}{done.stderr}")
    token = re.search(r"\blct_\S+", done.stdout)
    if token is None:
        raise CommandError(f"create_agent printed no token:\n{done.stdout}")
    return token.group(0)


def _counters(made: Cluster, servers: list[Server]) -> dict[str, Callable[[], int]]:
    """The programs' backends on the primary and on the replica (their application_name)."""
    apps = [server.app for server in servers]

    def count(on: Path) -> Callable[[], int]:
        def counted() -> int:
            with made.superuser(on) as conn:
                row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = ANY(%s)",
                                   [apps]).fetchone()
            return int(row[0]) if row else 0
        return counted

    return {"primary": count(made.primary), "replica": count(made.replica)}


def _figures(variant: str, load: Load) -> dict[str, Any]:
    cuts = statistics.quantiles(load.latencies_ms, n=100) if len(load.latencies_ms) > 1 else [0.0] * 99
    answered = sum(load.read_from.values()) or 1
    return {"variant": variant, "requests": load.requests, "errors": len(load.failures),
            "first_errors": load.failures[:3], "per_s": load.requests / load.seconds,
            "p50_ms": cuts[49], "p95_ms": cuts[94], "p99_ms": cuts[98],
            "peak_primary": load.peaks.get("primary", 0), "peak_replica": load.peaks.get("replica", 0),
            "replica_share": load.read_from.get("replica", 0) / answered}


def _line(figures: dict[str, Any]) -> str:
    return (f"{figures['variant']:>12}: {figures['requests']:.0f} requests ({figures['per_s']:.1f}/s), "
            f"{figures['errors']:.0f} errors; p50 {figures['p50_ms']:.1f} ms, p95 {figures['p95_ms']:.1f} ms, "
            f"p99 {figures['p99_ms']:.1f} ms; peak backends: primary {figures['peak_primary']:.0f}, "
            f"replica {figures['peak_replica']:.0f}; read from the replica: {figures['replica_share']:.0%}")
