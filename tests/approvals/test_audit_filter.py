"""approvals.filters.AuditFilter: the audit log page's filters narrow by a good value
and refuse a bad one with the form's own message (the page answers 400 with it beside
the field: tests/test_filter_errors.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.filters import AuditFilter
from catalog.audit.log import Action, Actor, AuditEvent, audit_append
from catalog.models import AuditEntry

pytestmark = pytest.mark.django_db


def actions(data):
    filters = AuditFilter(data, queryset=AuditEntry.objects.order_by("seq"))
    assert filters.is_valid(), filters.errors
    return list(filters.qs.values_list("action", flat=True))


def test_by_action_prefix_actor_id_and_whole_days():
    mark = AuditEntry.objects.count()
    audit_append(AuditEvent(Action.REQUEST_RAISED, Actor.channel("rita"), request_id=7))
    audit_append(AuditEvent(Action.REQUEST_REVOKED, Actor.channel("sam"), request_id=8))
    today = timezone.now().date()
    new = {"since": today.isoformat(), "until": today.isoformat()}

    assert actions({"action": "request.", **new})[mark:] == ["request.raised", "request.revoked"]
    assert actions({"actor": "sam", "request": "8"}) == ["request.revoked"]
    assert actions({"request": "7", **new}) == ["request.raised"]
    assert actions({"until": (today - timedelta(days=1)).isoformat(), "request": "7"}) == []


@pytest.mark.parametrize(("data", "field", "message"), [
    ({"action": "request.teleported"}, "action", "Select a valid choice."),
    ({"request": "abc"}, "request", "Enter a whole number."),
    ({"source": "0"}, "source", "Ensure this value is greater than or equal to 1."),
    ({"since": "2026-05-02", "until": "2026-05-01"}, "until", "The range starts after it ends."),
])
def test_a_bad_value_is_refused_beside_its_field(data, field, message):
    filters = AuditFilter(data, queryset=AuditEntry.objects.all())

    assert not filters.is_valid()
    assert list(filters.errors) == [field] and filters.errors[field][0].startswith(message)
