"""Template filters of the curator's dashboard (pure but for `ago`, which reads the
clock). The reviewer's pages use `ago` too (approvals.templatetags.approvals_pages)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django import template
from django.utils import timezone
from django.utils.timesince import timesince

from catalog.indexing.runs import STAGES
from catalog.models import IndexRun

register = template.Library()


@register.filter
def ago(moment: datetime | None) -> str:
    """How long ago, in words: "just now" under a minute, else "3 hours ago"."""
    if moment is None:
        return ""
    if timezone.now() - moment < timedelta(minutes=1):
        return "just now"
    return f"{timesince(moment, depth=1)} ago"


@register.filter
def took(value: timedelta | float | None) -> str:
    """A run's or a stage's duration: "0.42 s", "12 s", "3 min 5 s"."""
    if value is None:
        return ""
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


@register.filter
def get_item(mapping: dict[Any, Any] | None, key: Any) -> Any:
    return (mapping or {}).get(key)


@register.filter
def run_took(run: IndexRun) -> str:
    """How long a run took (so far, while it runs); empty before it starts."""
    if run.started_at is None:
        return ""
    return took((run.finished_at or timezone.now()) - run.started_at)


TRIGGERS: dict[str, str] = {
    IndexRun.Trigger.SCHEDULE: "the scheduled scan", IndexRun.Trigger.API: "the API",
    IndexRun.Trigger.COMMAND: "a command", IndexRun.Trigger.UI: "a person",
    IndexRun.Trigger.RECOVERY: "recovery (its worker had stopped)"}


@register.filter
def asked_by(run: IndexRun) -> str:
    """What asked for a run, in words."""
    return TRIGGERS.get(run.trigger, run.trigger)


@register.filter
def stage_timings(run: IndexRun) -> list[tuple[str, float]]:
    """A run's seconds per stage in the order the stages run (jsonb keeps keys in its own
    order, shortest first)."""
    order = {stage: i for i, stage in enumerate(STAGES)}
    return sorted(run.timings.items(), key=lambda item: order.get(item[0], len(order)))
