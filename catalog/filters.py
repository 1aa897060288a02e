"""The filters of catalog's list pages as django-filter FilterSets (decision 0048): a
plain field filter is declared, not written out; the name search is a method. Each
FilterSet's form is what the page renders (templates/partials/filter_field.html), so a
bad value is refused beside its field, as every list page does."""

from __future__ import annotations

import django_filters
from django import forms
from django.db.models import Q, QuerySet

from catalog.forms import SEARCH_MAX_CHARS
from catalog.models import IndexRun, ReferenceSource


class SlugFilter(django_filters.CharFilter):
    """Exact match on a slug, refused (as a form refuses it) when it cannot be one."""

    field_class = forms.SlugField


class SourceFilter(django_filters.FilterSet):
    """A catalog's sources (catalog.selectors.sources_overview): by kind and status, and by a
    text in the slug, name or description."""

    q = django_filters.CharFilter(method="name_contains", max_length=SEARCH_MAX_CHARS, label="Name contains")
    kind = django_filters.ChoiceFilter(choices=ReferenceSource.Kind.choices, empty_label="any kind", label="Kind")
    status = django_filters.ChoiceFilter(choices=ReferenceSource.Status.choices, empty_label="any status",
                                         label="Status")

    def name_contains(self, sources: QuerySet[ReferenceSource], name: str, text: str) -> QuerySet[ReferenceSource]:
        return sources.filter(Q(slug__icontains=text) | Q(name__icontains=text) | Q(description__icontains=text))


class RunFilter(django_filters.FilterSet):
    """A catalog's index runs (catalog.selectors.runs_of): by the source's slug and status.
    A slug the catalog has no source for matches nothing (the page says so)."""

    source = SlugFilter(field_name="source__slug", max_length=100, label="Source")
    status = django_filters.ChoiceFilter(choices=IndexRun.Status.choices, empty_label="any status", label="Status")
