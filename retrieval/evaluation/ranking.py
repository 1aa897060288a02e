"""One query ranked for evaluation: documents by their best chunk, as search ranks them
for a signed-in person (agent None), timed. `manage.py evaluate` and the worker's runs
both rank through here.

A person's search leaves out every source the approval gate governs and raises no
approval request, so an evaluation reads no governed content and asks no reviewer
for anything; its figures are those of the content a person's search sees."""

from __future__ import annotations

import time

from catalog.models import Catalog
from catalog.ranking import RankingSettings
from retrieval.search.selectors import SearchOptions, chunk_search
from retrieval.search.vector import SearchUnavailable

TOP_K = 100  # documents per query: Recall@100 reads this deep


class ModeUnavailable(Exception):
    """A mode that cannot be evaluated as asked (no embedding model): its figures would
    be another mode's."""


def rank_query(*, catalog: Catalog, mode: str, text: str, top_k: int = TOP_K,
               ranking: RankingSettings | None = None) -> tuple[list[str], float]:
    """(document ids best first, milliseconds the search took). `ranking`: settings to
    rank with instead of the catalog's (a tuning run's, unsaved), `mode` among them."""
    started = time.perf_counter()
    options = SearchOptions(mode=mode, top_k=top_k, dedup=True) if ranking is None \
        else SearchOptions.of(ranking.with_values({"mode": mode}), top_k=top_k, dedup=True)
    try:
        result = chunk_search(catalog=catalog, query=text, options=options)
    except SearchUnavailable as exc:
        raise ModeUnavailable(f"{mode}: {exc}") from None
    took = (time.perf_counter() - started) * 1000
    if result.degraded:  # hybrid and bm25_tiebreak fall back to bm25 without a model
        raise ModeUnavailable(f"{mode}: search answered {result.degraded}, so these would be bm25's figures")
    return [hit.document_id for hit in result.hits], took
