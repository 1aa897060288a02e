"""Fixtures for the curator's dashboard: a catalog `ops` holding an upload source that
mentions and links to an inline one, a glob source under a source root of the test's
own, all indexed by the real write path; named people per role and signed-in clients."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from django.test import Client

from catalog.indexing.runs import source_index_now
from catalog.models import Catalog, IndexRun, ReferenceSource
from catalog.sources.documents import DocumentInput
from tests.factories import import_documents

HANDBOOK = """# Operations handbook

Page the on-call engineer when the error rate doubles. Follow @runbook for the steps.
See [the runbook](runbook.md) and [the vendor page](https://example.com/vendor).
"""
RUNBOOK = "# Runbook\n\nRestart the worker, then check the queue depth.\n"
GUIDE = "# Deploy guide\n\nDeploy on weekdays only. Roll back with the previous image.\n"


def document(path: str, text: str) -> DocumentInput:
    return DocumentInput(path, path.removesuffix(".md").title(), text, len(text.encode()))


@dataclass
class Ops:
    catalog: Catalog
    handbook: ReferenceSource  # upload
    runbook: ReferenceSource  # inline
    guide: ReferenceSource  # glob
    root: Path


@pytest.fixture
def root(tmp_path, settings) -> Path:
    """The only source root: glob sources read from here."""
    folder = tmp_path / "sources"
    (folder / "guides").mkdir(parents=True)
    (folder / "guides" / "deploy.md").write_text(GUIDE, encoding="utf-8")
    settings.LECTERN_SOURCE_ROOTS = [folder]
    return folder


def build_ops(root: Path) -> Ops:
    catalog = Catalog.objects.create(slug="ops", name="Operations", description="How we run things.")
    handbook = import_documents(catalog=catalog, slug="handbook", documents=[document("handbook.md", HANDBOOK)])
    runbook = ReferenceSource.objects.create(catalog=catalog, slug="runbook", name="Runbook",
                                             kind=ReferenceSource.Kind.INLINE, content=RUNBOOK)
    source_index_now(source=runbook, trigger=IndexRun.Trigger.COMMAND)
    guide = ReferenceSource.objects.create(catalog=catalog, slug="guide", name="Deploy guide",
                                           kind=ReferenceSource.Kind.GLOB, location="guides/*.md")
    source_index_now(source=guide, trigger=IndexRun.Trigger.COMMAND)
    for source in (handbook, runbook, guide):
        source.refresh_from_db()
    return Ops(catalog, handbook, runbook, guide, root)


@pytest.fixture
def ops(db, root) -> Ops:
    return build_ops(root)


@pytest.fixture
def curator(client_for, cora) -> Client:
    return client_for(cora)


@pytest.fixture
def reviewer(client_for, rita) -> Client:
    return client_for(rita)
