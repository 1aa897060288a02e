"""Reading the audit log: entries by filter (`manage.py audit_export`; the web view's
filters are approvals.filters.AuditFilter, the action's rule shared: with_action),
written as CSV or JSON with every column, hashes included, so an export can be
checked against the chain elsewhere."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any, Protocol

from django.db.models import QuerySet

from catalog.audit.chain import timestamp
from catalog.models import AuditEntry

COLUMNS = ("seq", "at", "actor_kind", "actor_id", "actor_name", "action", "request_id", "policy_id", "source_id",
           "agent_id", "fingerprint", "payload", "prev_hash", "hash")


class Writable(Protocol):
    def write(self, text: str, /) -> object: ...


def audit_entries(*, action: str = "", actor: str = "", request_id: int | None = None, policy_id: int | None = None,
                  source_id: int | None = None, agent_id: int | None = None, since: datetime | None = None,
                  until: datetime | None = None) -> QuerySet[AuditEntry]:
    """Entries in chain order. `action`: exact, or a prefix ending in "." ("request.");
    `actor`: the actor's name; `since` inclusive, `until` exclusive."""
    entries = AuditEntry.objects.order_by("seq")
    if action:
        entries = with_action(entries, action)
    if actor:
        entries = entries.filter(actor_name=actor)
    for column, value in (("request_id", request_id), ("policy_id", policy_id), ("source_id", source_id),
                          ("agent_id", agent_id)):
        if value is not None:
            entries = entries.filter(**{column: value})
    if since is not None:
        entries = entries.filter(at__gte=since)
    if until is not None:
        entries = entries.filter(at__lt=until)
    return entries


def with_action(entries: QuerySet[AuditEntry], action: str) -> QuerySet[AuditEntry]:
    """`entries` of `action`: exact, or every action under a prefix ending in "." ("request.")."""
    return entries.filter(action__startswith=action) if action.endswith(".") else entries.filter(action=action)


def entry_row(entry: AuditEntry) -> dict[str, Any]:
    row = {column: getattr(entry, column) for column in COLUMNS}
    row["at"] = timestamp(entry.at)
    return row


def _rows(entries: Iterable[AuditEntry]) -> Iterator[dict[str, Any]]:
    for entry in entries.iterator(chunk_size=2000) if isinstance(entries, QuerySet) else entries:
        yield entry_row(entry)


class _Taken:
    """A Writable that keeps what csv writes until it is taken."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str, /) -> None:
        self.parts.append(text)

    def take(self) -> str:
        text, self.parts = "".join(self.parts), []
        return text


def audit_csv_chunks(entries: Iterable[AuditEntry]) -> Iterator[str]:
    """The CSV as it is read: the header, then one row per entry, the payload as compact
    JSON in its column (what a streamed download sends)."""
    out = _Taken()
    writer = csv.DictWriter(out, fieldnames=COLUMNS)
    writer.writeheader()
    yield out.take()
    for row in _rows(entries):
        row["payload"] = json.dumps(row["payload"], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        writer.writerow(row)
        yield out.take()


def audit_json_chunks(entries: Iterable[AuditEntry]) -> Iterator[str]:
    """A JSON array of entries as it is read: the opening bracket, one entry per chunk,
    the closing bracket."""
    yield "["
    count = 0
    for row in _rows(entries):
        yield ("," if count else "") + "\n" + json.dumps(row, ensure_ascii=False, sort_keys=True)
        count += 1
    yield "\n]\n" if count else "]\n"


def audit_write_csv(entries: Iterable[AuditEntry], out: Writable) -> int:
    """audit_csv_chunks written to `out`; returns the count of entries."""
    return _write(audit_csv_chunks(entries), out) - 1


def audit_write_json(entries: Iterable[AuditEntry], out: Writable) -> int:
    """audit_json_chunks written to `out`; returns the count of entries."""
    return _write(audit_json_chunks(entries), out) - 2


def _write(chunks: Iterator[str], out: Writable) -> int:
    """Write every chunk; how many there were."""
    written = 0
    for chunk in chunks:
        out.write(chunk)
        written += 1
    return written
