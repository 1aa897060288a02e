"""Tuning a catalog's ranking settings on a test set, judged held out.

ranking_tune() does, over a test set's judged queries:
  1. the grid: every setting tried (candidates(): BM25 k1 and b; for hybrid, RRF k and
     the vector weight, or convex with each normalisation and weight; the fusion depth;
     vector feedback or none; BM25 feedback or none; bm25 and vector alone), the current
     settings among them
  2. for each query, each component list read once through search's own functions
     (chunk_ranking: BM25 once per k1, b and feedback, the vector list once per feedback), as deep as the
     deepest setting reads; each setting's ranking then comes from those lists, shaped
     and fused by search's own component_lists and fused_ranking: nDCG@10 per query
     and setting, without a search per setting (the hybrid settings of one shape fused
     together by fusion.rrf_tops and convex_tops, which give rrf's and convex's own order)
  3. k-fold cross-validation over the queries (a fixed shuffle, FOLDS folds): for each
     fold, the setting with the best mean nDCG@10 on the other folds; its queries then
     searched for real (chunk_search, as an evaluation run searches) with that setting,
     and with the current settings: the held-out figures are search's own, every query
     scored by a setting chosen without it
  4. the setting to apply: the best on every query (its figure is in-sample, and said
     so); the held-out gain per metric, and the queries that won and lost
Reads only; what it reports is a TuningReport. The runs (retrieval.evaluation.tuning_runs)
store it; applying one is refused unless its held-out nDCG@10 gain is positive.
"""

from __future__ import annotations

import itertools
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from catalog.models import Catalog, Document
from catalog.ranking import RankingSettings
from retrieval.evaluation.beir import METRICS, QueryScore, score_query
from retrieval.evaluation.ranking import TOP_K, rank_query
from retrieval.search import fusion
from retrieval.search.rows import Row
from retrieval.search.selectors import (
    FUSED_MODES,
    SearchOptions,
    SettledOptions,
    chunk_ranking,
    component_lists,
    convex_weights,
    fused_ranking,
    keyed_rankings,
    ranking_depth,
)

FOLDS = 5
SEED = 20261127  # the folds' shuffle: the same test set folds the same way every run
PRIMARY = "ndcg_at_10"
K1S = (0.6, 0.9, 1.2, 1.5, 2.0)
BS = (0.3, 0.5, 0.75, 0.9)
RRF_KS = (5, 10, 20, 40, 60, 100)
RRF_VECTOR_WEIGHTS = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0)  # the BM25 weight 1
CONVEX_VECTOR_SHARES = (0.3, 0.5, 0.7)  # of weights summing to 1
DEPTHS = (100, 200)
FEEDBACK = ((0, 0.5), (3, 0.5))  # vector feedback: off, or the best 3 chunks at weight 0.5
# BM25 feedback (RM3): off, or from the best 10 chunks; its terms and weight are the
# current settings' (by default Anserini's RM3's: 10 terms, half the query's weight)
BM25_FEEDBACK = (0, 10)
TUNED_MODES = ("bm25", "vector", "hybrid")
SHOWN_QUERIES = 10  # won and lost, each


Feedback = Sequence[tuple[int, float]]  # vector feedback: (chunks, weight), (0, weight) for off


def candidates(current: RankingSettings, feedback: Feedback = FEEDBACK) -> list[RankingSettings]:
    """Every setting a run tries, the current first (a tie keeps it), each once. The
    enrichment settings are the current ones throughout: no test set judges them.
    `feedback`: the vector feedback values tried (`manage.py tune --vector-feedback`
    widens them; a wider grid costs time in proportion)."""
    grid = [current]
    for k1, b, expansion in itertools.product(K1S, BS, BM25_FEEDBACK):
        bm25 = current.with_values({"k1": k1, "b": b, "bm25_feedback": expansion})
        grid.append(bm25.with_values({"mode": "bm25"}))
        for depth, (chunks, weight) in itertools.product(DEPTHS, feedback):
            hybrid = bm25.with_values({"mode": "hybrid", "fusion_depth": depth, "vector_feedback": chunks,
                                       "feedback_weight": weight})
            grid += [hybrid.with_values({"fusion": "rrf", "rrf_k": k, "bm25_weight": 1.0, "vector_weight": weight})
                     for k, weight in itertools.product(RRF_KS, RRF_VECTOR_WEIGHTS)]
            grid += [hybrid.with_values({"fusion": "convex", "normalization": norm, "bm25_weight": round(1 - share, 2),
                                         "vector_weight": share})
                     for norm, share in itertools.product(("minmax", "zscore"), CONVEX_VECTOR_SHARES)]
    grid += [current.with_values({"mode": "vector", "vector_feedback": chunks, "feedback_weight": weight})
             for chunks, weight in feedback]
    return list(dict.fromkeys(grid))


def folds_of(query_ids: list[str], folds: int = FOLDS) -> list[list[str]]:
    order = sorted(query_ids)
    random.Random(SEED).shuffle(order)
    return [order[i::folds] for i in range(folds)]


@dataclass
class TuningReport:
    current: RankingSettings
    chosen: RankingSettings  # the best on every query: what applying sets
    candidates: int
    folds: list[dict[str, Any]]  # each: its pick's changes from the current, queries, held-out nDCG@10 both ways
    metrics: dict[str, dict[str, float]]  # metric -> current, tuned (held out), gain
    in_sample: float  # the chosen setting's mean nDCG@10 over every query (not held out)
    won: list[dict[str, Any]] = field(default_factory=list)
    lost: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # won, lost, tied
    seconds: dict[str, float] = field(default_factory=dict)  # per stage

    @property
    def gain(self) -> float:
        return self.metrics[PRIMARY]["gain"]

    def as_dict(self) -> dict[str, Any]:
        return {"current": asdict(self.current), "chosen": asdict(self.chosen), "candidates": self.candidates,
                "folds": self.folds, "metrics": self.metrics, "in_sample": self.in_sample, "won": self.won,
                "lost": self.lost, "counts": self.counts, "seconds": self.seconds}


Progress = Callable[[str, int, int], None]  # stage, done, total


def ranking_tune(*, catalog: Catalog, queries: dict[str, str], qrels: dict[str, dict[str, int]],
                 progress: Progress | None = None, folds: int = FOLDS, feedback: Feedback = FEEDBACK) -> TuningReport:
    """Tune `catalog`'s ranking on the judged `queries` (see the module docstring)."""
    report = progress or (lambda stage, done, total: None)
    seconds: dict[str, float] = {}
    current = catalog.ranking_settings
    grid = candidates(current, feedback)
    ids = sorted(query_id for query_id in queries if query_id in qrels)

    started = time.perf_counter()
    table = _grid_scores(catalog, {query_id: queries[query_id] for query_id in ids}, qrels, grid, report)
    seconds["grid"] = time.perf_counter() - started

    started = time.perf_counter()
    picks, held_out = [], {}
    fold_ids = folds_of(ids, folds)
    for fold in fold_ids:
        held = set(fold)
        pick = _best(grid, table, [i for i, query_id in enumerate(ids) if query_id not in held])
        picks.append(pick)
        held_out.update({query_id: pick for query_id in fold})
    tuned_scores, current_scores = {}, {}
    for done, query_id in enumerate(ids):
        report("held out", done, len(ids))
        text, judged = queries[query_id], qrels[query_id]
        tuned_scores[query_id] = _search_score(catalog, query_id, text, judged, held_out[query_id])
        current_scores[query_id] = _search_score(catalog, query_id, text, judged, current)
    seconds["held_out"] = time.perf_counter() - started

    chosen = _best(grid, table, list(range(len(ids))))
    metrics = {}
    for metric in METRICS:
        before = statistics.fmean(getattr(current_scores[q], metric) for q in ids) if ids else 0.0
        after = statistics.fmean(getattr(tuned_scores[q], metric) for q in ids) if ids else 0.0
        metrics[metric] = {"current": round(before, 4), "tuned": round(after, 4), "gain": round(after - before, 4)}
    fold_reports = [{"changes": current.changes(pick), "queries": len(fold),
                     "current": _mean(current_scores, fold), "tuned": _mean(tuned_scores, fold)}
                    for pick, fold in zip(picks, fold_ids, strict=True)]
    deltas = sorted(((tuned_scores[q].ndcg_at_10 - current_scores[q].ndcg_at_10, q) for q in ids),
                    key=lambda pair: (-pair[0], pair[1]))

    def shown(pairs: list[tuple[float, str]]) -> list[dict[str, Any]]:
        return [{"query_id": q, "text": queries[q][:200], "current": round(current_scores[q].ndcg_at_10, 4),
                 "tuned": round(tuned_scores[q].ndcg_at_10, 4)} for _, q in pairs]

    return TuningReport(
        current=current, chosen=chosen, candidates=len(grid), folds=fold_reports, metrics=metrics,
        in_sample=round(statistics.fmean(table[grid.index(chosen)]) if ids else 0.0, 4),
        won=shown([pair for pair in deltas if pair[0] > 0][:SHOWN_QUERIES]),
        lost=shown([pair for pair in reversed(deltas) if pair[0] < 0][:SHOWN_QUERIES]),
        counts={"won": sum(d > 0 for d, _ in deltas), "lost": sum(d < 0 for d, _ in deltas),
                "tied": sum(d == 0 for d, _ in deltas)},
        seconds={name: round(value, 1) for name, value in seconds.items()})


def _mean(scores: dict[str, QueryScore], ids: list[str]) -> float:
    return round(statistics.fmean(scores[q].ndcg_at_10 for q in ids), 4) if ids else 0.0


def _best(grid: list[RankingSettings], table: list[list[float]], rows: list[int]) -> RankingSettings:
    """The setting with the best mean nDCG@10 over the queries at `rows`; the first of
    equals (the current one when it is among them)."""
    if not rows:
        return grid[0]
    means = [sum(scores[i] for i in rows) for scores in table]
    return grid[max(range(len(grid)), key=lambda i: (means[i], -i))]


def _search_score(catalog: Catalog, query_id: str, text: str, judged: dict[str, int],
                  settings: RankingSettings) -> QueryScore:
    ranked, _ = rank_query(catalog=catalog, mode=settings.mode, text=text, ranking=settings)
    return score_query(query_id, ranked, judged)


def _grid_scores(catalog: Catalog, queries: dict[str, str], qrels: dict[str, dict[str, int]],
                 grid: list[RankingSettings], report: Progress) -> list[list[float]]:
    """nDCG@10 of each setting (rows, in grid order) on each query (columns, in
    `queries`' order), ranked from lists read once per query and BM25 parameters."""
    paths = dict(Document.objects.filter(catalog=catalog).values_list("pk", "path"))
    runs = [SearchOptions.of(settings, top_k=TOP_K, dedup=True).settled(settings) for settings in grid]
    deepest = max(ranking_depth(run) for run in runs)
    bm25_settings = sorted({_bm25_read(run) for run in runs})
    vector_settings = sorted({(run.vector_feedback, run.feedback_weight) for run in runs
                              if run.mode in ("vector", "hybrid")})
    table = [[0.0] * len(queries) for _ in grid]
    for column, (query_id, text) in enumerate(queries.items()):
        report("grid", column, len(queries))
        vectors = {(chunks, weight): _read(catalog, text, "vector", deepest, vector_feedback=chunks,
                                           feedback_weight=weight) for chunks, weight in vector_settings}
        lexical = {read: _read(catalog, text, "bm25", deepest, **dict(read)) for read in bm25_settings}
        shaped: dict[tuple[Any, ...], dict[str, list[Row]]] = {}  # component lists, per read and shape
        by_fusion: dict[tuple[Any, ...], list[int]] = {}  # the hybrid settings of a shape and fusion: fused together
        for i, run in enumerate(runs):
            if run.mode == "bm25_tiebreak":  # ties broken by its own hits' similarity: searched for real
                ranked, _ = rank_query(catalog=catalog, mode=run.mode, text=text, ranking=grid[i])
                table[i][column] = score_query(query_id, ranked, qrels[query_id]).ndcg_at_10
                continue
            lexical_read, vector_read = _bm25_read(run), (run.vector_feedback, run.feedback_weight)
            reads = (lexical_read, vector_read) if run.mode == "hybrid" else \
                (lexical_read, None) if run.mode == "bm25" else (None, vector_read)
            shape = (reads, ranking_depth(run), run.mode in FUSED_MODES, run.dedup)
            if shape not in shaped:
                read = {} if reads[0] is None else {"bm25": lexical[reads[0]]}
                if reads[1] is not None:
                    read["vector"] = vectors[reads[1]]
                shaped[shape] = component_lists(read, run)
            if run.mode == "hybrid":
                by_fusion.setdefault((shape, run.fusion, run.normalization), []).append(i)
                continue
            fused = fused_ranking(shaped[shape], run)[: run.top_k]
            table[i][column] = score_query(query_id, [paths[key] for key, _ in fused], qrels[query_id]).ndcg_at_10
        for (shape, fused_by, normalization), members in by_fusion.items():
            first = runs[members[0]]  # the shape holds dedup; every run of a grid ranks top_k
            rankings = keyed_rankings(shaped[shape], first.dedup)
            tops = fusion.rrf_tops(rankings, [(runs[i].rrf_k, runs[i].weights) for i in members], first.top_k) \
                if fused_by == "rrf" else \
                fusion.convex_tops(rankings, [convex_weights(runs[i]) for i in members], normalization, first.top_k)
            for i, top in zip(members, tops, strict=True):
                table[i][column] = score_query(query_id, [paths[key] for key in top], qrels[query_id]).ndcg_at_10
    return table


def _bm25_read(run: SettledOptions) -> tuple[tuple[str, Any], ...]:
    """The settings a BM25 list is read with, as _read's keywords (feedback's two
    parameters only where it is on: off, they change nothing read)."""
    feedback = ((("bm25_feedback_terms", run.bm25_feedback_terms), ("bm25_feedback_weight", run.bm25_feedback_weight))
                if run.bm25_feedback else ())
    return (("k1", run.k1), ("b", run.b), ("bm25_feedback", run.bm25_feedback), *feedback)


def _read(catalog: Catalog, text: str, mode: str, depth: int, **settings: Any) -> list[Row]:
    """One component's chunks for `text`, `depth` deep and undeduplicated, read by
    chunk_ranking itself (as a person's search reads them: no governed source) with
    `settings` (SearchOptions' own)."""
    ranking = chunk_ranking(catalog=catalog, query=text, options=SearchOptions(
        mode=mode, top_k=depth, dedup=False, **settings))
    return ranking.lists.get(mode, [])
