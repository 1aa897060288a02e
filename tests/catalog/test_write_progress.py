"""A run that writes more chunks than one progress report's worth reports its progress
without touching the connection its COPY holds: a run through the worker's path (its
progress written to the run row) finishes, however many chunks it writes."""

from __future__ import annotations

import pytest

from catalog.indexing import writes
from catalog.indexing.runs import index_run_create, index_run_execute
from catalog.models import Chunk, IndexRun, ReferenceSource

pytestmark = pytest.mark.django_db


def test_a_run_writing_many_progress_reports_of_chunks_finishes(make_catalog, monkeypatch):
    monkeypatch.setattr(writes, "PROGRESS_ROWS", 2)  # a report every 2 rows, as every 10,000 in a large run
    catalog = make_catalog("big", chunk_size=100, chunk_overlap=0)
    text = "\n\n".join(f"Paragraph {i} about quokkas and their islands, long enough to fill a chunk." for i in range(9))
    source = ReferenceSource.objects.create(catalog=catalog, slug="notes", name="Notes", kind="inline", content=text)
    run = index_run_create(source=source, trigger=IndexRun.Trigger.COMMAND)

    index_run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == IndexRun.Status.SUCCEEDED, run.error
    assert Chunk.objects.filter(source=source).count() >= 9
