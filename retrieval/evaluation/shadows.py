"""Chunking runs: a chunk size and overlap tried on a shadow catalog before they go live.

shadow_execute() is the worker's half of a tuning run of kind `chunking`:
  1. a hidden catalog (`Catalog.shadow_of` the live one: no listing, agent or search
     request sees it, catalog.auth) with the proposed chunking and the live ranking
     settings, into which the stored text of every document a person's search may
     read is imported through the one write path (source_import: cut, embedded,
     indexed). A source that needs an approval is not copied: no governed content is
     ever duplicated, and an evaluation ranks without it anyway
  2. every judged query of the test set ranked on the live catalog and on the shadow,
     as an evaluation ranks (rank_query: a person's search, the catalog's mode)
  3. the report: each metric on both and the gain, the queries that won and lost. A
     shadow that did not do better is dropped at once; a better one waits for a curator
The comparison is of one alternative on every query: nothing is chosen on them, so no
cross-validation is needed. Applying (tuning_runs.tuning_apply) sets the chunking on the
live catalog, whose sources are then re-cut in full by their own runs (each switching
atomically, the old cut served until then): the shadow's vectors are reused from the
embedding cache, so going live embeds nothing again. Then the shadow is dropped.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from django.utils.text import slugify

from approvals.selectors.gate import withheld_sources
from catalog.indexing.removal import catalog_delete
from catalog.indexing.runs import source_import
from catalog.models import Catalog, Document, IndexRun
from catalog.sources.documents import DocumentInput
from retrieval.evaluation.beir import METRICS, QueryScore, score_query
from retrieval.evaluation.ranking import rank_query
from retrieval.models import TuningRun

SHOWN_QUERIES = 10
Progress = Callable[[str, int, int], None]


def shadow_create(*, catalog: Catalog, run: TuningRun) -> Catalog:
    """The run's empty shadow of `catalog`: its proposed chunking, the live ranking."""
    slug = slugify(f"{catalog.slug[:40]}-shadow-{run.pk}")
    return Catalog.objects.create(
        slug=slug, name=f"{catalog.name} (shadow of tuning run {run.pk})", shadow_of=catalog,
        chunk_size=run.proposal["chunk_size"], chunk_overlap=run.proposal["chunk_overlap"],
        embedding_model=catalog.embedding_model, ranking=catalog.ranking)


def shadow_fill(*, shadow: Catalog, live: Catalog, progress: Progress) -> int:
    """Import into `shadow` the stored text of every document of `live` outside the
    sources the gate withholds from a person; how many documents."""
    withheld = set(withheld_sources(agent=None, catalog_ids=[live.pk]))
    sources = [s for s in live.sources.order_by("slug") if s.pk not in withheld]
    copied = 0
    for done, source in enumerate(sources):
        progress("shadow", done, len(sources))
        documents = [DocumentInput(path, title, text, len(text.encode()))
                     for path, title, text in Document.objects.filter(source=source).order_by("path")
                     .values_list("path", "title", "text")]
        if not documents:
            continue
        built = source_import(catalog=shadow, slug=source.slug, documents=documents, trigger=IndexRun.Trigger.COMMAND)
        if built.status != IndexRun.Status.SUCCEEDED:
            raise RuntimeError(f"the shadow's copy of {source.slug} did not index: {built.error}")
        copied += len(documents)
    return copied


def shadow_compare(*, live: Catalog, shadow: Catalog, queries: dict[str, str], qrels: dict[str, dict[str, int]],
                   progress: Progress) -> dict[str, Any]:
    """Every judged query ranked on both, as an evaluation ranks: the report."""
    ids = sorted(query_id for query_id in queries if query_id in qrels)
    mode = live.ranking_settings.mode
    before: dict[str, QueryScore] = {}
    after: dict[str, QueryScore] = {}
    for done, query_id in enumerate(ids):
        progress("compare", done, len(ids))
        before[query_id] = score_query(query_id, rank_query(catalog=live, mode=mode, text=queries[query_id])[0],
                                       qrels[query_id])
        after[query_id] = score_query(query_id, rank_query(catalog=shadow, mode=mode, text=queries[query_id])[0],
                                      qrels[query_id])
    metrics = {}
    for metric in METRICS:
        old = statistics.fmean(getattr(before[q], metric) for q in ids) if ids else 0.0
        new = statistics.fmean(getattr(after[q], metric) for q in ids) if ids else 0.0
        metrics[metric] = {"current": round(old, 4), "tuned": round(new, 4), "gain": round(new - old, 4)}
    deltas = sorted(((after[q].ndcg_at_10 - before[q].ndcg_at_10, q) for q in ids), key=lambda p: (-p[0], p[1]))

    def shown(pairs: list[tuple[float, str]]) -> list[dict[str, Any]]:
        return [{"query_id": q, "text": queries[q][:200], "current": round(before[q].ndcg_at_10, 4),
                 "tuned": round(after[q].ndcg_at_10, 4)} for _, q in pairs]

    return {"metrics": metrics, "won": shown([p for p in deltas if p[0] > 0][:SHOWN_QUERIES]),
            "lost": shown([p for p in reversed(deltas) if p[0] < 0][:SHOWN_QUERIES]),
            "counts": {"won": sum(d > 0 for d, _ in deltas), "lost": sum(d < 0 for d, _ in deltas),
                       "tied": sum(d == 0 for d, _ in deltas)}, "mode": mode}


def shadow_execute(*, run: TuningRun, progress: Progress) -> dict[str, Any]:
    """Build, fill and evaluate the run's shadow (see the module docstring); the report.
    A shadow that did no better, or any failure on the way, drops it."""
    live = run.catalog
    started = time.perf_counter()
    shadow = shadow_create(catalog=live, run=run)
    TuningRun.objects.filter(pk=run.pk).update(shadow=shadow)
    try:
        documents = shadow_fill(shadow=shadow, live=live, progress=progress)
        built = time.perf_counter() - started
        shadow.refresh_from_db()
        report = shadow_compare(live=live, shadow=shadow, queries=run.query_set.queries, qrels=run.query_set.qrels,
                                progress=progress)
    except BaseException:
        shadow_drop(run=run)
        raise
    report.update(documents=documents, proposal=run.proposal,
                  current={"chunk_size": live.chunk_size, "chunk_overlap": live.chunk_overlap},
                  seconds={"shadow": round(built, 1), "compare": round(time.perf_counter() - started - built, 1)})
    if report["metrics"]["ndcg_at_10"]["gain"] <= 0:
        shadow_drop(run=run)
        report["dropped"] = "it did no better than the live catalog"
    return report


def shadow_drop(*, run: TuningRun) -> None:
    """Delete the run's shadow, if it still has one."""
    shadow = Catalog.objects.filter(pk=TuningRun.objects.filter(pk=run.pk).values("shadow")[:1]).first()
    if shadow is not None and shadow.shadow_of_id is not None:
        catalog_delete(catalog=shadow, by=None)
    TuningRun.objects.filter(pk=run.pk).update(shadow=None)
