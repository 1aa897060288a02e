"""The agent pages' forms: they read and validate input; catalog.agents writes."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from django import forms
from django.db.models import QuerySet

from catalog.agents import PROFILE_FIELDS, preselected_outside
from catalog.models import Agent, Catalog, ReferenceSource

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
SEARCH_MAX_CHARS = 100


class CatalogChoices(forms.ModelMultipleChoiceField[Catalog]):
    def label_from_instance(self, obj: Catalog) -> str:
        return f"{obj.name} ({obj.slug})"


class AgentForm(forms.ModelForm[Agent]):
    """Scope, pins and profile; `name` only when creating. Pinned references are any
    sources by id here, and clean() says which lie outside the chosen catalogs (the
    page lists only those inside; catalog.agents checks again). The model's checks
    (ranges, a name taken) run as a ModelForm's do, on the instance given: the page
    gives it a copy of the agent it shows, and catalog.agents writes."""

    catalogs = CatalogChoices(queryset=Catalog.objects.live().order_by("slug"), widget=forms.CheckboxSelectMultiple,
                              error_messages={"required": "Choose at least one catalog: an agent without one "
                                                          "can read nothing."})
    preselected = forms.ModelMultipleChoiceField(queryset=ReferenceSource.objects.select_related("catalog"),
                                                 required=False, label="Pinned references")

    class Meta:
        model = Agent
        fields = ["name", "catalogs", "is_curator", "strategy", "preselected", "token_budget", "default_top_k",
                  "semantic_threshold", "semantic_margin", "max_hints", "rag_relevance_threshold", "rag_max_results"]
        labels = {"is_curator": "Curator", "token_budget": "Token budget", "default_top_k": "Results per search",
                  "semantic_threshold": "Semantic threshold", "semantic_margin": "Semantic margin",
                  "max_hints": "Most hints per text", "rag_relevance_threshold": "Relevance threshold",
                  "rag_max_results": "Most injected per message"}
        help_texts = {
            "name": "Letters, digits, '.', '_' and '-'. It names the agent in the audit log and to "
                    "manage.py create_agent; it cannot be changed later.",
            "is_curator": "May reindex and edit its catalogs' sources, and reset the model and caches.",
            "token_budget": "Tokens its startup instructions may use (100 to 1,000,000).",
            "default_top_k": "Hits a search returns when the agent asks for no number (1 to 100).",
            "semantic_threshold": "Lowest similarity (0 to 1) between a text and a reference for a hint "
                                  "by meaning.",
            "semantic_margin": "A hint by meaning must also score within this much (0 to 1) of the best match.",
            "max_hints": "References hinted per enriched prompt or tool result (1 to 50).",
            "rag_relevance_threshold": "Lowest relevance (0 to 1) of a memory or passage added to a "
                                       "conversation's newest user message.",
            "rag_max_results": "Memories and passages added to that message at most (0 to 20).",
        }
        error_messages = {"name": {"unique": "An agent of this name exists already: choose another name."}}
        widgets = {
            "strategy": forms.RadioSelect,
            "semantic_threshold": forms.NumberInput(attrs={"step": "0.01", "min": "0", "max": "1"}),
            "semantic_margin": forms.NumberInput(attrs={"step": "0.01", "min": "0", "max": "1"}),
            "rag_relevance_threshold": forms.NumberInput(attrs={"step": "0.01", "min": "0", "max": "1"}),
        }

    def __init__(self, *args: Any, creating: bool, **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)
        self.creating = creating
        if not creating:
            del self.fields["name"]
        else:
            self.fields["name"].widget.attrs.update({"autocomplete": "off", "spellcheck": "false"})
        # The model's choices carry explanations; the page shows them beside each option.
        strategy = cast(forms.ChoiceField, self.fields["strategy"])
        strategy.choices = [(value, value) for value in Agent.Strategy.values]
        strategy.label = "Strategy"

    def clean_name(self) -> str:
        name = cast(str, self.cleaned_data["name"]).strip()
        if not NAME.match(name):
            raise forms.ValidationError("Use letters, digits, '.', '_' and '-', starting with a letter or digit.")
        return name

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        catalogs, pins = data.get("catalogs"), data.get("preselected")
        if catalogs is not None and pins:
            outside = preselected_outside(catalogs, pins)
            if outside:
                self.add_error("preselected", f"Pinned references must be in the agent's catalogs: "
                                              f"{', '.join(outside)} {'is' if len(outside) == 1 else 'are'} not. "
                                              "Check its catalog above, or unpin it.")
        return data

    def profile(self) -> dict[str, Any]:
        """The PROFILE_FIELDS of cleaned_data, as catalog.agents takes them."""
        return {name: self.cleaned_data[name] for name in PROFILE_FIELDS}


@dataclass
class PinGroup:
    """Pin choices of one catalog, as the page lists them (or the pins outside every
    chosen catalog: `catalog` None)."""

    catalog: Catalog | None
    sources: list[tuple[ReferenceSource, bool]] = field(default_factory=list)  # (source, pinned)


def pin_groups(catalog_ids: Iterable[int], pinned_ids: Iterable[int]) -> list[PinGroup]:
    """The sources of the chosen catalogs, grouped by catalog, each marked pinned or not,
    and a last group of pinned sources outside those catalogs (the form refuses them;
    listed so that the refusal points at something on the page). One statement."""
    catalog_ids, pinned = set(catalog_ids), set(pinned_ids)
    if not catalog_ids and not pinned:
        return []
    from django.db.models import Q

    sources = (ReferenceSource.objects.filter(Q(catalog_id__in=catalog_ids) | Q(pk__in=pinned))
               .select_related("catalog").only("id", "slug", "name", "mode", "catalog__id", "catalog__slug",
                                               "catalog__name").order_by("catalog__slug", "slug"))
    groups: dict[int, PinGroup] = {}
    outside = PinGroup(catalog=None)
    for source in sources:
        if source.catalog_id in catalog_ids:
            groups.setdefault(source.catalog_id, PinGroup(catalog=source.catalog)).sources.append(
                (source, source.pk in pinned))
        else:
            outside.sources.append((source, True))
    return [*groups.values(), *([outside] if outside.sources else [])]


def ids_of(values: Iterable[Any]) -> list[int]:
    """Ids from a form's raw values (strings, model instances), ignoring what is not one."""
    found = []
    for value in values:
        pk = getattr(value, "pk", value)
        try:
            found.append(int(pk))
        except (TypeError, ValueError):
            continue
    return found


class AgentFilterForm(forms.Form):
    q = forms.CharField(max_length=SEARCH_MAX_CHARS, required=False, strip=True, label="Name contains")
    state = forms.ChoiceField(choices=[("", "any state"), ("active", "active"), ("revoked", "revoked")],
                              required=False)
    catalog = forms.ModelChoiceField(queryset=Catalog.objects.live().order_by("slug"), to_field_name="slug",
                                     required=False, empty_label="any catalog")

    def agents(self, base: QuerySet[Agent]) -> QuerySet[Agent]:
        """`base` narrowed by the filters (after is_valid)."""
        data = self.cleaned_data
        if data["q"]:
            base = base.filter(name__icontains=data["q"])
        if data["state"]:
            base = base.filter(is_active=data["state"] == "active")
        if data["catalog"] is not None:
            base = base.filter(catalogs=data["catalog"])
        return base
