"""manage.py audit_export: the audit log, or the entries a filter picks, as CSV or JSON
on stdout (every column, hashes included)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_datetime

from catalog.audit.export import audit_entries, audit_write_csv, audit_write_json


def _moment(value: str) -> datetime:
    moment = parse_datetime(value)
    if moment is None or moment.tzinfo is None:
        raise CommandError(f"not an ISO 8601 date and time with a zone: {value!r}")
    return moment


class Command(BaseCommand):
    help = "Write audit entries as CSV or JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", choices=["csv", "json"], default="json")
        parser.add_argument("--action", default="", help='an action, or a prefix ending in "." (request.)')
        parser.add_argument("--actor", default="", help="the actor's name")
        parser.add_argument("--request", type=int, dest="request_id")
        parser.add_argument("--source", type=int, dest="source_id", help="a source's id")
        parser.add_argument("--agent", type=int, dest="agent_id", help="an agent's id")
        parser.add_argument("--since", type=_moment, help="from this moment (ISO 8601 with a zone)")
        parser.add_argument("--until", type=_moment, help="before this moment")

    def handle(self, *args: Any, format: str, **options: Any) -> None:
        entries = audit_entries(action=options["action"], actor=options["actor"], request_id=options["request_id"],
                                source_id=options["source_id"], agent_id=options["agent_id"],
                                since=options["since"], until=options["until"])
        self.stdout.ending = ""  # the writers end their own lines
        (audit_write_csv if format == "csv" else audit_write_json)(entries, self.stdout)
