"""Reading BEIR query and qrels files, and scoring runs against them; pure Python."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from retrieval.evaluation import metrics


class EvaluationInputError(Exception):
    pass


def read_queries(lines: Iterable[str]) -> dict[str, str]:
    """BEIR queries.jsonl: {"_id", "text"} per line."""
    queries = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            queries[str(row["_id"])] = str(row["text"])
        except (json.JSONDecodeError, KeyError, TypeError):
            raise EvaluationInputError(f"queries line {number}: needs JSON with '_id' and 'text'") from None
    return queries


def read_qrels(lines: Iterable[str]) -> dict[str, dict[str, int]]:
    """BEIR qrels TSV (query-id, corpus-id, score), header optional, CRLF tolerated."""
    qrels: dict[str, dict[str, int]] = {}
    for number, line in enumerate(lines, start=1):
        fields = line.rstrip("\r\n").split("\t")
        if not fields[0].strip():
            continue
        if number == 1 and fields[0] == "query-id":
            continue
        if len(fields) != 3:
            raise EvaluationInputError(f"qrels line {number}: expected 3 tab-separated fields")
        try:
            grade = int(fields[2])
        except ValueError:
            raise EvaluationInputError(f"qrels line {number}: score {fields[2]!r} is not an integer") from None
        qrels.setdefault(fields[0], {})[fields[1]] = grade
    return qrels


@dataclass
class ModeReport:
    mode: str
    queries: int
    ndcg_at_10: float
    recall_at_100: float
    mrr_at_10: float
    p50_ms: float
    p95_ms: float

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def without_self_hits(query_id: str, ranked: Sequence[str]) -> list[str]:
    """BEIR ignores a retrieved document whose id equals the query id."""
    return [doc for doc in ranked if doc != query_id]


def score_run(mode: str, runs: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]],
              latencies_ms: Sequence[float]) -> ModeReport:
    """Mean metrics over the queries in `runs` (each a ranked list of document ids)."""
    n = len(runs)
    if n == 0:
        raise EvaluationInputError("no query has both a text and qrels")
    ndcg = recall = mrr = 0.0
    for query_id, ranked in runs.items():
        ranked = without_self_hits(query_id, ranked)
        judged = qrels[query_id]
        ndcg += metrics.ndcg_at(ranked, judged, 10)
        recall += metrics.recall_at(ranked, judged, 100)
        mrr += metrics.mrr_at(ranked, judged, 10)
    return ModeReport(mode, n, ndcg / n, recall / n, mrr / n,
                      metrics.percentile(latencies_ms, 50), metrics.percentile(latencies_ms, 95))
