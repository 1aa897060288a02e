"""Storing a trace in one statement (retrieval.traces.services.insert_trace). A module of its
own: the test needs autocommit, which a module-scoped demo transaction would hide."""

from __future__ import annotations

import pytest
from django.db import connection

from retrieval.models import Trace
from retrieval.traces.services import insert_trace
from tests.factories import agent_with_token


@pytest.mark.django_db(transaction=True)
def test_a_trace_stored_in_one_statement_reads_back_whole():
    agent, _ = agent_with_token(name="tracer")
    trace = Trace(agent=agent, caller="tracer", surface="tool_result", text="ünïcode 'quotes' %s {}",
                  steps=[{"pass": "tag", "ms": 0.5, "tags": {"circuit breaker": ["demo/circuit-breaker"]}}],
                  hints=[{"source_id": "circuit-breaker", "score": None}], degraded="lexical-only", took_ms=1.25)

    assert connection.get_autocommit()  # the asynchronous-commit path
    insert_trace(trace)

    stored = Trace.objects.get(pk=trace.pk)
    assert [(f.name, getattr(stored, f.attname)) for f in Trace._meta.concrete_fields] == [
        (f.name, getattr(trace, f.attname)) for f in Trace._meta.concrete_fields]
    assert not trace._state.adding
