"""Reads of traces: the pages' list, filtered (a constant number of statements, whatever
the page holds), one trace, and a trace's story with its text as detection read it; and
the one trace a caller of the API may read."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from uuid import UUID

from django.db.models import Q, QuerySet, Subquery
from django.db.models.functions import Substr
from django.http import Http404

from catalog.auth import RequestUser, is_curator
from catalog.models import Agent
from retrieval.enrichment.formatting import injection_signer, strip_injection
from retrieval.models import Trace
from retrieval.traces.forms import PEOPLE
from retrieval.traces.story import Story, trace_story

EXCERPT_CHARS = 160


def traces_filtered(*, agent: str = "", source: str = "", withheld: str = "", surface: str = "",
                    since: date | None = None, until: date | None = None) -> QuerySet[Trace]:
    """Newest first. `agent`: an agent's name, or PEOPLE (traces of no agent); `source`:
    `catalog/slug` of a reference the trace surfaced (hinted, expanded, pinned, withheld
    or cut); `withheld`: "yes" or "no"; dates are UTC days, both ends included. The
    text is read only as its head, and the steps not at all."""
    traces = Trace.objects.defer("text", "steps").annotate(excerpt=Substr("text", 1, EXCERPT_CHARS + 1))
    if agent == PEOPLE:
        traces = traces.filter(agent__isnull=True)
    elif agent:  # its id first (one scalar subquery), so the agent's index orders the page
        traces = traces.filter(agent_id=Subquery(Agent.objects.filter(name=agent).values("pk")[:1]))
    if source:
        catalog, _, slug = source.partition("/")
        traces = traces.filter(hints__contains=[{"catalog": catalog, "source_id": slug}])
    if withheld:
        has = Q(hints__contains=[{"withheld": True}])
        traces = traces.filter(has if withheld == "yes" else ~has)
    if surface:
        traces = traces.filter(surface=surface)
    if since:
        traces = traces.filter(created_at__gte=_midnight(since))
    if until:
        traces = traces.filter(created_at__lt=_midnight(until + timedelta(days=1)))
    return traces.order_by("-created_at", "-id")


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


@dataclass
class TraceRow:
    """One line of the list: the trace and what it sent and withheld, by reference."""

    trace: Trace
    sent: list[str]
    withheld: list[str]

    @property
    def excerpt(self) -> str | None:
        text: str | None = getattr(self.trace, "excerpt", None)
        if text is None:
            return None
        return " ".join(text.split())[:EXCERPT_CHARS] + ("…" if len(text) > EXCERPT_CHARS else "")


def trace_rows(traces: list[Trace]) -> list[TraceRow]:
    return [TraceRow(trace, sent=[_ref(h) for h in trace.hints if not h.get("withheld")
                                  and h.get("injected") in ("expand", "pin", "hint", "search")],
                     withheld=[_ref(h) for h in trace.hints if h.get("withheld")]) for trace in traces]


def _ref(hint: dict[str, Any]) -> str:
    return str(hint.get("ref") or f"{hint.get('catalog')}/{hint.get('source_id')}")


def trace_get(trace_id: UUID) -> Trace:
    """The trace, or 404 (curators read every trace)."""
    trace = Trace.objects.select_related("agent").filter(pk=trace_id).first()
    if trace is None:
        raise Http404(f"No trace {trace_id}.")
    return trace


def trace_for_caller(caller: RequestUser, trace_id: UUID) -> Trace:
    """The trace, or 404: an agent reads only its own, a person theirs, a curator every one."""
    traces = Trace.objects.all()
    if isinstance(caller, Agent):
        traces = traces.filter(agent=caller)
    elif not is_curator(caller):  # a role, not staff status
        traces = traces.filter(caller=caller.get_username(), agent=None)
    trace = traces.filter(pk=trace_id).first()
    if trace is None:
        raise Http404(f"No trace {trace_id}.")
    return trace


def story_of(trace: Trace) -> Story:
    """A trace's story, with the text as detection read it (an earlier injection removed,
    as the pipeline removed it) when the trace kept its text."""
    read = trace.text
    if read is not None and trace.surface != Trace.Surface.CONVERSATION:  # a conversation's is kept stripped
        read = strip_injection(read, signer=injection_signer(agent=trace.agent, person=trace.caller))
    return trace_story(steps=trace.steps, hints=trace.hints, text_read=read, text_received=trace.text)
