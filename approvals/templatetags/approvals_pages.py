"""Template filters of the reviewer's pages (pure but for `ago`, which reads the clock)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django import template

from catalog.templatetags.catalog_pages import ago as ago

register = template.Library()

_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


@dataclass(frozen=True)
class DiffLine:
    kind: str  # file | hunk | add | del | context | note
    text: str


def diff_lines(diff: str) -> list[DiffLine]:
    """A unified diff (approvals.diffs) as lines tagged for colour: file headers, hunk
    headers, added, removed and context lines, and notes (no newline at end, text not
    kept, diff cut). Inside a hunk its header's line counts say where it ends, so a
    removed line that reads "-- x" is not taken for a file header. The text is left as
    it is: the template escapes it."""
    lines, old_left, new_left = [], 0, 0
    for line in diff.splitlines():
        if old_left > 0 or new_left > 0:
            kind = {"-": "del", "+": "add", " ": "context", "\\": "note"}.get(line[:1], "context")
            old_left -= kind in ("del", "context")
            new_left -= kind in ("add", "context")
        elif line.startswith("\\"):
            kind = "note"
        elif (hunk := _HUNK.match(line)) is not None:
            kind = "hunk"
            old_left, new_left = (int(count) if count is not None else 1 for count in hunk.groups())
        elif line.startswith(("--- ", "+++ ")):
            kind = "file"
        else:
            kind = "note"
        lines.append(DiffLine(kind, line))
    return lines


register.filter("diff_lines", diff_lines)


def duration(value: timedelta | None) -> str:
    """A policy's lifetime as people say it: "90 days", "12 hours", "1 day 6 hours"."""
    if value is None:
        return "forever"
    minutes = int(value.total_seconds() // 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    parts = [f"{n} {unit}{'s' if n != 1 else ''}" for n, unit in ((days, "day"), (hours, "hour"),
                                                                  (minutes, "minute")) if n]
    return " ".join(parts) or "under a minute"


register.filter("duration", duration)


register.filter("ago", ago)  # the dashboard's, shared


def payload_value(value: Any) -> str:
    """An audit payload's value as JSON writes it (true, null, ["ops"]); text as it is."""
    if isinstance(value, str):
        return value
    if value is None:
        return "—"
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


register.filter("payload_value", payload_value)


def get_item(mapping: dict[Any, Any], key: Any) -> Any:
    return mapping.get(key)


register.filter("get_item", get_item)
