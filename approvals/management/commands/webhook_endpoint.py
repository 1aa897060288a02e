"""manage.py webhook_endpoint: a catalog's webhook endpoints. `create` and `rotate`
print the secret, this once (it is stored sealed and never shown again); `list` shows
each endpoint with its secret's hint; `enable` / `disable` / `delete` change one. Every
change is audited, as done by --by (a curator) or, without it, by the command."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals.channels.models import EventType, WebhookEndpoint
from approvals.channels.webhooks.endpoints import (
    endpoint_create,
    endpoint_delete,
    endpoint_rotate_secret,
    endpoint_update,
)
from catalog.errors import ApplicationError
from catalog.models import Catalog


class Command(BaseCommand):
    help = "Create (printing its secret once), list, rotate, enable, disable or delete webhook endpoints."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["create", "list", "rotate", "enable", "disable", "delete"])
        parser.add_argument("--catalog", help="the catalog's slug (create, list)")
        parser.add_argument("--url", help="where events are POSTed (create)")
        parser.add_argument("--events", default="", help=f"comma-separated, default all: {', '.join(EventType.values)}")
        parser.add_argument("--no-decisions", action="store_true",
                            help="decisions signed with this endpoint's secret are refused")
        parser.add_argument("--description", default="")
        parser.add_argument("--id", type=int, dest="endpoint_id", help="the endpoint (rotate, enable, disable, delete)")
        parser.add_argument("--by", default="", help="the curator doing it, for the audit log")

    def handle(self, *args: Any, action: str, by: str, **options: Any) -> None:
        person = User.objects.filter(username=by).first() if by else None
        if by and person is None:
            raise CommandError(f"no user {by!r}")
        try:
            getattr(self, f"_{action}")(person, **options)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from None

    def _catalog(self, slug: str | None) -> Catalog:
        catalog = Catalog.objects.filter(slug=slug or "").first()
        if catalog is None:
            raise CommandError(f"no catalog {slug!r} (--catalog)")
        return catalog

    def _id(self, endpoint_id: int | None) -> int:
        if endpoint_id is None:
            raise CommandError("--id names the endpoint")
        return endpoint_id

    def _create(self, by: User | None, *, catalog: str | None, url: str | None, events: str, no_decisions: bool,
                description: str, **options: Any) -> None:
        if not url:
            raise CommandError("--url is required")
        kinds = [e.strip() for e in events.split(",") if e.strip()] or None
        issued = endpoint_create(catalog=self._catalog(catalog), url=url, by=by, event_types=kinds,
                                 description=description, accepts_decisions=not no_decisions)
        self.stderr.write(f"webhook endpoint {issued.endpoint.pk} created; its secret (shown only now):")
        self.stdout.write(issued.secret)

    def _list(self, by: User | None, *, catalog: str | None, **options: Any) -> None:
        endpoints = WebhookEndpoint.objects.select_related("catalog").order_by("pk")
        if catalog:
            endpoints = endpoints.filter(catalog=self._catalog(catalog))
        for e in endpoints:
            self.stdout.write(f"{e.pk}\t{e.catalog.slug}\t{'active' if e.active else 'inactive'}\t"
                              f"{'decisions' if e.accepts_decisions else 'events only'}\t{e.secret_hint}\t{e.url}\t"
                              f"{','.join(e.event_types)}")

    def _rotate(self, by: User | None, *, endpoint_id: int | None, **options: Any) -> None:
        issued = endpoint_rotate_secret(endpoint_id=self._id(endpoint_id), by=by)
        self.stderr.write(f"webhook endpoint {issued.endpoint.pk}: new secret (shown only now; the old one no "
                          "longer signs or verifies):")
        self.stdout.write(issued.secret)

    def _enable(self, by: User | None, *, endpoint_id: int | None, **options: Any) -> None:
        endpoint_update(endpoint_id=self._id(endpoint_id), by=by, active=True)

    def _disable(self, by: User | None, *, endpoint_id: int | None, **options: Any) -> None:
        endpoint_update(endpoint_id=self._id(endpoint_id), by=by, active=False)

    def _delete(self, by: User | None, *, endpoint_id: int | None, **options: Any) -> None:
        endpoint_delete(endpoint_id=self._id(endpoint_id), by=by)
