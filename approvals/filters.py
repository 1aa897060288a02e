"""The audit log's filters as a django-filter FilterSet (decision 0048): the actor and
the ids are plain exact filters, declared; the action (exact, or every action under a
prefix ending in ".") and the whole days in UTC are methods. Its form is what the page
renders (templates/partials/filter_field.html). `manage.py audit_export` takes the same
filters as options, through catalog.audit.export.audit_entries."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any

import django_filters
from django import forms
from django.db.models import QuerySet
from django.utils import timezone

from catalog.audit.export import with_action
from catalog.audit.log import Action
from catalog.models import AuditEntry


class IdFilter(django_filters.Filter):
    """Exact match on a numeric id: a whole number from 1, refused as a form refuses one."""

    field_class = forms.IntegerField


def _actions() -> list[tuple[str, str]]:
    prefixes = sorted({action.value.split(".")[0] + "." for action in Action})
    return [*((p, f"{p}*") for p in prefixes), *((a.value, a.value) for a in Action)]


class AuditFilterForm(forms.Form):
    """The checks across fields; dates are whole days in UTC, both ends included."""

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            self.add_error("until", "The range starts after it ends.")
        return data


class AuditFilter(django_filters.FilterSet):
    action = django_filters.ChoiceFilter(choices=_actions, empty_label="any action", method="action_is",
                                         label="Action")
    actor = django_filters.CharFilter(field_name="actor_name", max_length=150, label="Actor",
                                      help_text="a user, agent or task name")
    # named like FilterSet.request, which the stubs declare (the metaclass takes declared
    # filters off the class, so there is no clash at run time)
    request = IdFilter(field_name="request_id", min_value=1, label="Request id")  # type: ignore[assignment]
    policy = IdFilter(field_name="policy_id", min_value=1, label="Policy id")
    source = IdFilter(field_name="source_id", min_value=1, label="Source id")
    agent = IdFilter(field_name="agent_id", min_value=1, label="Agent id")
    since = django_filters.DateFilter(method="from_day", label="From",
                                      widget=forms.DateInput(attrs={"type": "date"}))
    until = django_filters.DateFilter(method="to_day", label="To", widget=forms.DateInput(attrs={"type": "date"}))

    class Meta:
        form = AuditFilterForm

    def action_is(self, entries: QuerySet[AuditEntry], name: str, action: str) -> QuerySet[AuditEntry]:
        return with_action(entries, action)

    def from_day(self, entries: QuerySet[AuditEntry], name: str, day: date) -> QuerySet[AuditEntry]:
        return entries.filter(at__gte=_midnight(day))

    def to_day(self, entries: QuerySet[AuditEntry], name: str, day: date) -> QuerySet[AuditEntry]:
        return entries.filter(at__lt=_midnight(day) + timedelta(days=1))


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=timezone.get_current_timezone())
