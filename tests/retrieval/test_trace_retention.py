"""Trace retention: traces older than LECTERN_TRACE_RETENTION_DAYS are deleted in
batches by the hourly schedule or `manage.py purge_traces`; 0 keeps them forever; with
LECTERN_TRACE_STORE_TEXT off a trace never holds the text. Ages are set explicitly
(created_at is written on insert, so it is moved afterwards), never waited for."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_q.models import Schedule
from rest_framework.test import APIClient

from catalog.models import Agent, ReferenceSource
from retrieval.models import Selection, Trace
from retrieval.tasks import PURGE_SCHEDULE, ensure_purge_schedule, purge_traces
from retrieval.traces.services import trace_retention_cutoff, traces_purge
from tests.factories import agent_with_token

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def trace_made_at(created_at: datetime, text: str = "a prompt", agent: Agent | None = None) -> Trace:
    trace = Trace.objects.create(agent=agent, caller="tracer", surface="prompt", text=text)
    Trace.objects.filter(pk=trace.pk).update(created_at=created_at)
    return trace


def remaining() -> set[str | None]:
    return set(Trace.objects.values_list("text", flat=True))


def test_a_trace_just_outside_the_window_goes_and_one_just_inside_stays(settings):
    settings.LECTERN_TRACE_RETENTION_DAYS = 30
    edge = NOW - timedelta(days=30)
    trace_made_at(edge - timedelta(seconds=1), "outside")
    trace_made_at(edge, "on the edge")
    trace_made_at(edge + timedelta(seconds=1), "inside")
    trace_made_at(NOW, "new")

    cutoff = trace_retention_cutoff(now=NOW)
    assert cutoff is not None
    deleted = traces_purge(before=cutoff)

    assert cutoff == edge
    assert deleted == 1
    assert remaining() == {"on the edge", "inside", "new"}


def test_the_purge_goes_batch_by_batch_and_selections_keep_their_grant(indexed_catalog):
    agent, _ = agent_with_token(name="granted")
    old = [trace_made_at(NOW - timedelta(days=40, minutes=i), f"old {i}", agent) for i in range(5)]
    source = ReferenceSource.objects.get(catalog=indexed_catalog)
    selection = Selection.objects.create(agent=agent, source=source, via="mention", trace=old[0])
    trace_made_at(NOW, "new")

    with CaptureQueriesContext(connection) as queries:
        deleted = traces_purge(before=NOW - timedelta(days=30), batch_size=2)

    assert deleted == 5
    assert remaining() == {"new"}
    deletes = [q["sql"] for q in queries.captured_queries if q["sql"].startswith('DELETE FROM "retrieval_trace"')]
    assert len(deletes) == 3  # 2 + 2 + 1
    assert not any('"retrieval_trace"."text"' in q["sql"] for q in queries.captured_queries)  # texts never loaded
    selection.refresh_from_db()
    assert (selection.trace, selection.source) == (None, source)


def test_the_scheduled_task_applies_the_setting(settings):
    settings.LECTERN_TRACE_RETENTION_DAYS = 7
    now = timezone.now()
    trace_made_at(now - timedelta(days=8), "last week")
    trace_made_at(now - timedelta(days=6), "this week")

    assert purge_traces() == 1
    assert remaining() == {"this week"}


def test_retention_zero_keeps_traces_forever_and_drops_the_schedule(settings):
    settings.LECTERN_TRACE_RETENTION_DAYS = 0
    trace_made_at(NOW - timedelta(days=3650), "ancient")

    assert trace_retention_cutoff(now=NOW) is None
    assert purge_traces() == 0
    assert remaining() == {"ancient"}
    ensure_purge_schedule()
    assert not Schedule.objects.filter(name=PURGE_SCHEDULE).exists()


def test_migrate_schedules_an_hourly_purge(settings):
    schedule = Schedule.objects.get(name=PURGE_SCHEDULE)  # made by post_migrate when the test database was built
    assert (schedule.func, schedule.schedule_type, schedule.repeats) == (
        "retrieval.tasks.purge_traces", Schedule.HOURLY, -1)

    settings.LECTERN_TRACE_RETENTION_DAYS = 0
    ensure_purge_schedule()
    settings.LECTERN_TRACE_RETENTION_DAYS = 30
    ensure_purge_schedule()
    assert Schedule.objects.filter(name=PURGE_SCHEDULE, func="retrieval.tasks.purge_traces").count() == 1


def test_the_purge_command_uses_the_setting_or_days(settings):
    settings.LECTERN_TRACE_RETENTION_DAYS = 30
    now = timezone.now()
    trace_made_at(now - timedelta(days=31), "month old")
    trace_made_at(now - timedelta(days=10), "ten days old")
    trace_made_at(now, "new")

    out = StringIO()
    call_command("purge_traces", stdout=out)
    assert out.getvalue().startswith("Deleted 1 traces made before ") and "(kept 30 days)" in out.getvalue()
    assert remaining() == {"ten days old", "new"}

    out = StringIO()
    call_command("purge_traces", "--days", "7", "--batch-size", "1", stdout=out)
    assert out.getvalue().startswith("Deleted 1 traces") and remaining() == {"new"}


def test_the_purge_command_with_retention_off_deletes_nothing(settings):
    settings.LECTERN_TRACE_RETENTION_DAYS = 0
    trace_made_at(NOW - timedelta(days=3650), "ancient")

    out = StringIO()
    call_command("purge_traces", stdout=out)

    assert "kept forever" in out.getvalue()
    assert remaining() == {"ancient"}


def test_with_store_text_off_a_trace_keeps_its_steps_but_not_the_text(settings, indexed_catalog, agent_token):
    settings.LECTERN_TRACE_STORE_TEXT = False
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent_token('quiet', [indexed_catalog])}")

    response = client.post("/api/v1/enrich", {"text": "my secret plan for the circuit breaker", "surface": "prompt"},
                           format="json")

    assert response.status_code == 200
    trace = Trace.objects.get(pk=response.json()["trace_id"])
    assert trace.text is None
    assert [step["pass"] for step in trace.steps][:1] == ["mention"]
    body = client.get(f"/api/v1/traces/{trace.pk}").json()
    assert body["text"] is None and body["steps"] == trace.steps
    assert "secret plan" not in str(trace.steps) + str(trace.hints)
