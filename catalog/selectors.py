"""What the curator's dashboard reads (catalog.views): catalogs and sources with their
counts, a source's documents and chunks, index runs (active, recent, history) and the
scheduled scan. Each list is one query whatever its length (counts and the latest run
come as subqueries, tags by one prefetch), and every list a page shows is paginated by
the view, so a page's queries stay bounded however large the catalog grows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from catalog.indexing.runs import ACTIVE
from catalog.models import Catalog, Chunk, Document, IndexRun, ReferenceSource, UploadedFile
from catalog.tasks import SCAN_SCHEDULE

# The live panel shows this many active runs; past them it says how many more.
ACTIVE_SHOWN = 20


class _Count(Subquery):
    """COUNT(*) of a subquery's rows (0 when none): several counts on one list without
    the joins of Count() multiplying each other."""

    template = "(SELECT count(*) FROM (%(subquery)s) _counted)"
    output_field = IntegerField()


def _count(rows: QuerySet[Any]) -> _Count:
    return _Count(rows.order_by().values("pk"))


def catalogs_overview(catalogs: QuerySet[Catalog]) -> QuerySet[Catalog]:
    """Catalogs with their sources, documents, runs in progress and sources in error."""
    sources = ReferenceSource.objects.filter(catalog=OuterRef("pk"))
    return catalogs.annotate(
        source_count=_count(sources), document_count=_count(Document.objects.filter(catalog=OuterRef("pk"))),
        active_runs=_count(IndexRun.objects.filter(catalog=OuterRef("pk"), status__in=ACTIVE)),
        failed_sources=_count(sources.filter(status=ReferenceSource.Status.ERROR)),
        last_indexed=Subquery(ReferenceSource.objects.filter(catalog=OuterRef("pk"), indexed_at__isnull=False)
                              .order_by("-indexed_at").values("indexed_at")[:1]),
    ).order_by("slug")


def _latest_run(field: str) -> Subquery:
    return Subquery(IndexRun.objects.filter(source=OuterRef("pk")).order_by("-pk").values(field)[:1])


def sources_overview(catalog: Catalog, *, tag: str = "") -> QuerySet[ReferenceSource]:
    """A catalog's sources with their documents and the latest run's state
    (with_chunk_totals adds chunks and tokens to the page shown); the page's filters are
    catalog.filters.SourceFilter's."""
    sources = catalog.sources.all()
    if tag:
        sources = sources.filter(tags__key=tag)
    return sources.annotate(
        document_count=_count(Document.objects.filter(source=OuterRef("pk"))),
        run_status=_latest_run("status"), run_progress=_latest_run("progress"),
    ).prefetch_related("tags").order_by("slug")


def with_chunk_totals(sources: list[ReferenceSource]) -> list[ReferenceSource]:
    """`sources` (a page of them), each given `chunk_count` and `token_count`: one pass
    over their chunks, grouped, rather than a count and a sum per source."""
    # naming the catalogs reads their partitions only (catalog.models.Chunk)
    chunks = Chunk.objects.filter(catalog_id__in={s.catalog_id for s in sources}, source__in=sources)
    totals = {source_id: (n, tokens or 0) for source_id, n, tokens
              in chunks.order_by().values("source_id").annotate(n=Count("pk"), tokens=Sum("token_count"))
              .values_list("source_id", "n", "tokens")}
    for source in sources:
        source.chunk_count, source.token_count = totals.get(source.pk, (0, 0))  # type: ignore[attr-defined]
    return sources


def source_facts(source: ReferenceSource) -> dict[str, int]:
    """A source's documents, chunks and embedding-model tokens (one query)."""
    documents = Document.objects.filter(source=source).count()
    chunks = Chunk.objects.filter(catalog_id=source.catalog_id, source=source).aggregate(
        n=Count("pk"), tokens=Coalesce(Sum("token_count"), 0))
    return {"documents": documents, "chunks": chunks["n"], "tokens": chunks["tokens"]}


def source_documents(source: ReferenceSource) -> QuerySet[Document]:
    """Its documents by path, with their chunks and tokens (text left in the database)."""
    chunks = Chunk.objects.filter(catalog_id=source.catalog_id)
    tokens = chunks.filter(document=OuterRef("pk")).order_by().values("document").annotate(
        t=Sum("token_count")).values("t")
    return Document.objects.filter(source=source).defer("text").annotate(
        chunk_count=_count(chunks.filter(document=OuterRef("pk"))),
        token_count=Coalesce(Subquery(tokens, output_field=IntegerField()), 0)).order_by("path")


def source_chunks(source: ReferenceSource, *, document: Document | None = None) -> QuerySet[Chunk]:
    """Its chunks in document order (embeddings left in the database)."""
    chunks = Chunk.objects.filter(catalog_id=source.catalog_id)
    chunks = chunks.filter(source=source) if document is None else chunks.filter(document=document)
    return chunks.select_related("document").only(
        "key", "ordinal", "byte_offset", "content", "heading", "token_count", "locator", "document__path",
        "document__title").order_by("document__path", "ordinal")


def source_uploads(source: ReferenceSource) -> QuerySet[UploadedFile]:
    """An upload source's files, each with whether the index holds it as it is now."""
    indexed = Document.objects.filter(source=source, path=OuterRef("path"), content_sha256=OuterRef("sha256"))
    return UploadedFile.objects.filter(source=source).defer("text").annotate(
        indexed_id=Subquery(indexed.values("pk")[:1])).order_by("path")


def chunk_end(chunk: Chunk) -> int:
    """The byte just past the chunk in its document's UTF-8 text."""
    return chunk.byte_offset + len(chunk.content.encode("utf-8"))


# --- index runs -------------------------------------------------------------------------


def runs_of(*, catalog: Catalog, source: ReferenceSource | None = None, status: str = "") -> QuerySet[IndexRun]:
    runs = IndexRun.objects.filter(catalog=catalog)
    if source is not None:
        runs = runs.filter(source=source)
    if status:
        runs = runs.filter(status=status)
    return runs.select_related("source", "catalog").order_by("-pk")


@dataclass(frozen=True)
class Activity:
    """What the live panel shows: runs queued or running (the first ACTIVE_SHOWN, oldest
    first: the order a worker takes them), how many in all, and the latest finished."""

    active: list[IndexRun]
    active_total: int
    finished: list[IndexRun]

    @property
    def busy(self) -> bool:
        return self.active_total > 0


def activity(*, catalog: Catalog, source: ReferenceSource | None = None, finished: int = 3) -> Activity:
    runs = runs_of(catalog=catalog, source=source)
    active = list(runs.filter(status__in=ACTIVE).order_by("pk")[:ACTIVE_SHOWN + 1])
    total = len(active) if len(active) <= ACTIVE_SHOWN else runs.filter(status__in=ACTIVE).count()
    done = list(runs.exclude(status__in=ACTIVE)[:finished])
    return Activity(active=active[:ACTIVE_SHOWN], active_total=total, finished=done)


# --- the scheduled scan -------------------------------------------------------------------


@dataclass(frozen=True)
class ScanStatus:
    """The django-q2 schedule that scans every source for changes, and its last run."""

    scheduled: bool
    every_minutes: int | None = None
    next_run: datetime | None = None
    last_started: datetime | None = None
    last_stopped: datetime | None = None
    last_success: bool | None = None
    last_result: Any = None

    @property
    def overdue(self) -> bool:
        """The scan should have run a while ago: no worker is taking the schedule."""
        return self.next_run is not None and timezone.now() - self.next_run > timedelta(minutes=2)


def scan_status() -> ScanStatus:
    from django_q.models import Schedule, Task

    schedule = Schedule.objects.filter(name=SCAN_SCHEDULE).first()
    if schedule is None:
        return ScanStatus(scheduled=False)
    last = Task.objects.filter(id=schedule.task).first() if schedule.task else None
    return ScanStatus(scheduled=True, every_minutes=schedule.minutes, next_run=schedule.next_run,
                      last_started=last.started if last else None, last_stopped=last.stopped if last else None,
                      last_success=last.success if last else None, last_result=last.result if last else None)
