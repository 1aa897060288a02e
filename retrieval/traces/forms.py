"""The traces list's filters (GET): who called, which reference it surfaced, whether
anything was withheld, prompt or tool result, and a date range (UTC days). They read and
validate; selectors.py filters."""

from __future__ import annotations

from datetime import date
from typing import Any

from django import forms
from django.db.models import Exists, OuterRef

from catalog.models import Agent, ReferenceSource
from catalog.widgets import FastSelect
from retrieval.models import Trace

PEOPLE = "people"
WITHHELD = [("", "either"), ("yes", "something withheld"), ("no", "nothing withheld")]


class DateInput(forms.DateInput):
    input_type = "date"


class TraceFilterForm(forms.Form):
    agent = forms.ChoiceField(required=False, widget=FastSelect, label="Caller")
    source = forms.ChoiceField(required=False, widget=FastSelect, label="Reference")
    withheld = forms.ChoiceField(choices=WITHHELD, required=False, widget=FastSelect, label="Withheld")
    surface = forms.ChoiceField(choices=[("", "any"), *Trace.Surface.choices], required=False,
                                widget=FastSelect, label="Text")
    since = forms.DateField(required=False, widget=DateInput, label="From")
    until = forms.DateField(required=False, widget=DateInput, label="To")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)
        # Only agents that have traces (an EXISTS per agent, on the trace_agent_recent index).
        agents = Agent.objects.filter(Exists(Trace.objects.filter(agent=OuterRef("pk")))).order_by("name") \
            .values_list("name", flat=True)
        self.fields["agent"].choices = [("", "any caller"), (PEOPLE, "people (no agent)"),  # type: ignore[attr-defined]
                                        *((name, name) for name in agents)]
        sources = ReferenceSource.objects.order_by("catalog__slug", "slug").values_list("catalog__slug", "slug")
        self.fields["source"].choices = [("", "any reference"),  # type: ignore[attr-defined]
                                         *((f"{c}/{s}", f"{c}/{s}") for c, s in sources)]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        since, until = data.get("since"), data.get("until")
        if isinstance(since, date) and isinstance(until, date) and until < since:
            self.add_error("until", "The end of the range comes before its start.")
        return data
