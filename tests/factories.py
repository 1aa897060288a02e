"""Builders shared by the tests: catalog content written through the product's own write path."""

from __future__ import annotations

from catalog.models import Catalog, IndexRun, ReferenceSource
from catalog.reindex import source_import
from catalog.services import DocumentInput


def import_documents(*, catalog: Catalog, slug: str, documents: list[DocumentInput]) -> ReferenceSource:
    """Make `documents` the content of upload source `slug`, indexed by a real run."""
    run = source_import(catalog=catalog, slug=slug, documents=documents, trigger=IndexRun.Trigger.COMMAND)
    assert run.status == IndexRun.Status.SUCCEEDED, run.error
    return run.source
