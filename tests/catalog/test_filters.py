"""catalog.filters: the source list's and the run list's FilterSets narrow by a good
value and refuse a bad one with the form's own message (the pages answer 400 with it
beside the field: tests/test_filter_errors.py)."""

from __future__ import annotations

import pytest

from catalog.filters import RunFilter, SourceFilter
from catalog.models import IndexRun, ReferenceSource

pytestmark = pytest.mark.django_db


@pytest.fixture
def ops(make_catalog):
    catalog = make_catalog("ops")
    vault = ReferenceSource.objects.create(catalog=catalog, slug="vault", name="Vault keys",
                                           kind=ReferenceSource.Kind.INLINE)
    ledger = ReferenceSource.objects.create(catalog=catalog, slug="ledger", name="Ledger", description="the vault's",
                                            kind=ReferenceSource.Kind.UPLOAD)
    IndexRun.objects.create(catalog=catalog, source=vault, status=IndexRun.Status.SUCCEEDED)
    IndexRun.objects.create(catalog=catalog, source=ledger, status=IndexRun.Status.FAILED)
    return catalog


def slugs(filters):
    assert filters.is_valid(), filters.errors
    return sorted(filters.qs.values_list("slug", flat=True))


def test_sources_by_kind_and_by_text_in_slug_name_or_description(ops):
    assert slugs(SourceFilter({"kind": "upload"}, queryset=ops.sources.all())) == ["ledger"]
    assert slugs(SourceFilter({"q": " VAULT "}, queryset=ops.sources.all())) == ["ledger", "vault"]
    assert slugs(SourceFilter({"q": "", "kind": "", "status": ""}, queryset=ops.sources.all())) == ["ledger", "vault"]


def test_a_kind_that_is_not_one_is_refused():
    filters = SourceFilter({"kind": "scroll"}, queryset=ReferenceSource.objects.all())

    assert not filters.is_valid()
    assert filters.errors == {"kind": ["Select a valid choice. scroll is not one of the available choices."]}


def test_runs_by_source_slug_and_status(ops):
    runs = IndexRun.objects.filter(catalog=ops)

    def sources(data):
        filters = RunFilter(data, queryset=runs)
        assert filters.is_valid(), filters.errors
        return sorted(filters.qs.values_list("source__slug", flat=True))

    assert sources({"source": "vault"}) == ["vault"]
    assert sources({"status": "failed"}) == ["ledger"]
    assert sources({"source": "nope"}) == []  # the page says the catalog has no such source


def test_a_source_that_cannot_be_a_slug_is_refused():
    filters = RunFilter({"source": "bad slug!"}, queryset=IndexRun.objects.all())

    assert not filters.is_valid()
    assert "valid “slug”" in filters.errors["source"][0]
