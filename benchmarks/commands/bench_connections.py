from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.connections import Server, ServerFailed, backends, search_load, wait_until
from catalog.agents import agent_token_rotate
from catalog.models import Catalog

AGENT = "bench-connections"


class Command(BaseCommand):
    help = ("Database connections under load: start a server (Lectern's runserver, Django's stock one, or what "
            "`make serve` runs) on a free loopback port, search from --clients clients at once for --seconds, and "
            "count the server's backends in pg_stat_activity during the load and after it. See docs/benchmarks.md.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--server", choices=["runserver", "stock-runserver", "serve"], default="runserver")
        parser.add_argument("--clients", type=int, default=16)
        parser.add_argument("--seconds", type=float, default=20)
        parser.add_argument("--keepalive", action="store_true",
                            help="reuse each client's HTTP connection (default: a new one per request)")
        parser.add_argument("--catalog", default="demo")
        parser.add_argument("--settle", type=float, default=5,
                            help="seconds after the load to wait for the backends to go")

    def handle(self, *args: Any, server: str, clients: int, seconds: float, keepalive: bool, catalog: str,
               settle: float, **options: object) -> None:
        found = Catalog.objects.filter(slug=catalog).first()
        if found is None:
            raise CommandError(f"no catalog {catalog!r} (make demo loads 'demo')")
        _, token = agent_token_rotate(name=AGENT, catalogs=[found], is_active=True)
        running = Server(server, env={"DEBUG": "1"} if "runserver" in server else {})
        try:
            running.start()
            load = search_load(running, token=token, catalog=catalog, clients=clients, keepalive=keepalive,
                               seconds=seconds)
            after = backends(running.app)
            try:
                wait_until(lambda: backends(running.app) == 0, settle, "the backends to close")
            except ServerFailed:
                pass
            settled = backends(running.app)
        finally:
            running.stop()
        self.stdout.write(
            f"{server}: {clients} clients ({'keep-alive' if keepalive else 'a connection per request'}), "
            f"{load.requests} requests in {load.seconds:.1f}s, {len(load.failures)} failed; backends: "
            f"peak {load.peak_backends}, {after} when the clients stopped, {settled} after {settle:g}s more")
