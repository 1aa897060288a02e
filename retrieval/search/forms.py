"""The playground's form: what to run (a search query, a prompt, a tool result), over
which catalog, as whom, and how to search. It reads and validates; runs.py runs.

The same fields come by POST (the form, any text up to the limit) and by GET (a run's
link): `share_query` writes the link's query string, only the fields its kind uses, and
refuses to when it would be longer than a link should be (SHARE_MAX)."""

from __future__ import annotations

from typing import Any, cast
from urllib.parse import urlencode

from django import forms
from django.conf import settings

from catalog.models import Agent, Catalog
from catalog.ranking import MODES
from catalog.widgets import FastSelect
from retrieval.models import Trace

SEARCH = "search"
KINDS = [(SEARCH, "Search query"), (Trace.Surface.PROMPT, "Prompt"), (Trace.Surface.TOOL_RESULT, "Tool result")]
SURFACES = {Trace.Surface.PROMPT.value, Trace.Surface.TOOL_RESULT.value}
# A text the page takes (a long tool result fits); the API takes LECTERN_MAX_ENRICH_CHARS.
TEXT_MAX = min(20_000, settings.LECTERN_MAX_ENRICH_CHARS)
# The longest link (path and query) a run is shared by: well under what servers take in
# a request line (gunicorn: 4,094 bytes) and what chat tools and e-mail keep whole.
SHARE_MAX = 3000
TOP_K_MAX = 100
MODE_HELP = {"bm25": "words only (BM25)", "vector": "meaning only (embeddings)",
             "hybrid": "both, fused as the catalog fuses them", "bm25_tiebreak": "words, meaning breaking ties"}


class AgentChoice(forms.ModelChoiceField[Agent]):
    def label_from_instance(self, obj: Agent) -> str:
        return f"the agent {obj.name}"


class CatalogChoice(forms.ModelChoiceField[Catalog]):
    def label_from_instance(self, obj: Catalog) -> str:
        return f"{obj.name} ({obj.slug})"


class PlaygroundForm(forms.Form):
    kind = forms.ChoiceField(choices=KINDS, initial=SEARCH, widget=forms.RadioSelect, label="Run")
    agent = AgentChoice(queryset=Agent.objects.none(), to_field_name="name", required=False, widget=FastSelect,
                        empty_label="a person (you)", label="As",
                        help_text="An agent gets its own catalogs, thresholds and approvals; a person gets what "
                                  "the approval gate lets people see: nothing that needs an approval.")
    catalog = CatalogChoice(queryset=Catalog.objects.none(), to_field_name="slug", required=False,
                            widget=FastSelect, empty_label="every catalog of the caller", label="Catalog",
                            help_text="A search reads one catalog; a prompt or a tool result every catalog of the "
                                      "caller, unless you choose one.")
    text = forms.CharField(max_length=TEXT_MAX, strip=False, label="Text",
                           widget=forms.Textarea(attrs={"rows": 5, "spellcheck": "false"}))
    mode = forms.ChoiceField(choices=[("", "the catalog's (its ranking settings)"),
                                      *((m, f"{m}: {MODE_HELP[m]}") for m in MODES)],
                             initial="", required=False, widget=FastSelect, label="Search mode")
    top_k = forms.IntegerField(min_value=1, max_value=TOP_K_MAX, required=False, label="Hits",
                               help_text="Empty: the agent's own default (10 for a person).")
    dedup = forms.BooleanField(required=False, label="One hit per document")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)
        # Whole rows: the one chosen is the caller's profile and the catalog searched,
        # whose fields a narrower read would load one query each.
        cast(AgentChoice, self.fields["agent"]).queryset = Agent.objects.filter(is_active=True).order_by("name")
        cast(CatalogChoice, self.fields["catalog"]).queryset = Catalog.objects.live().order_by("slug")
        self.fields["text"].widget.attrs["maxlength"] = str(TEXT_MAX)

    @property
    def searching(self) -> bool:
        return self.cleaned_data.get("kind") == SEARCH

    def clean_text(self) -> str:
        text = cast(str, self.cleaned_data["text"])
        if not text.strip():
            raise forms.ValidationError("Type a query, a prompt or a tool result to run.")
        return text.strip() if self.data.get("kind") == SEARCH else text

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        agent, catalog = data.get("agent"), data.get("catalog")
        if data.get("kind") == SEARCH and "catalog" not in self.errors and catalog is None:
            self.add_error("catalog", "Choose the catalog to search.")
        if agent is not None and catalog is not None and not agent.catalogs.filter(pk=catalog.pk).exists():
            readable = ", ".join(agent.catalogs.order_by("slug").values_list("slug", flat=True)) or "none"
            self.add_error("catalog", f"{agent.name} may not read this catalog (its catalogs: {readable}): "
                                      "its own call would answer 404. Choose one of its catalogs, or every one.")
        return data

    def hits(self) -> int:
        """The hits asked for, else the caller's default (as the search API does)."""
        agent = self.cleaned_data.get("agent")
        return cast(int, self.cleaned_data.get("top_k") or (agent.default_top_k if agent else 10))

    def share_query(self) -> str | None:
        """The query string of this run's link (after is_valid), or None when the link
        would be longer than SHARE_MAX."""
        data = self.cleaned_data
        params: dict[str, Any] = {"kind": data["kind"], "text": data["text"]}
        if data.get("agent"):
            params["agent"] = data["agent"].name
        if data.get("catalog"):
            params["catalog"] = data["catalog"].slug
        if self.searching:
            if data.get("mode"):
                params["mode"] = data["mode"]
            if data.get("top_k"):
                params["top_k"] = data["top_k"]
            if data.get("dedup"):
                params["dedup"] = "on"
        query = urlencode(params)
        return query if len(query) <= SHARE_MAX - 20 else None  # the path and "?" fit in what is left
