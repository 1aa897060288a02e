"""Reading BEIR query and qrels files, and scoring runs against them; pure Python.

A file's problems are reported by line, the first few of them at once (a curator fixes
a file in one pass rather than one error per upload), naming the file they are in so a
form can show each beside its own field."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from retrieval.evaluation import metrics

QUERIES, QRELS = "queries", "qrels"
PROBLEMS_SHOWN = 5  # per file; past them, how many more lines are wrong
MAX_ID_CHARS = 200  # a query id as stored (retrieval.models.EvaluationQuery.query_id)


class EvaluationInputError(Exception):
    """Input that cannot be evaluated: `problems` maps the file ("queries", "qrels", or
    "" for both together) to its messages."""

    def __init__(self, message: str | None = None, *, problems: Mapping[str, list[str]] | None = None) -> None:
        self.problems = {key: list(value) for key, value in (problems or {"": [message or "invalid input"]}).items()}
        super().__init__("; ".join(line for lines in self.problems.values() for line in lines))


class _Problems:
    """The first PROBLEMS_SHOWN problems of one file, and a count of the rest."""

    def __init__(self, file: str) -> None:
        self.file, self.more = file, 0
        self.lines: list[str] = []

    def add(self, message: str) -> None:
        if len(self.lines) < PROBLEMS_SHOWN:
            self.lines.append(message)
        else:
            self.more += 1

    def raise_any(self) -> None:
        if self.lines:
            tail = [f"… and {self.more} more line{'s' if self.more != 1 else ''} like these"] if self.more else []
            raise EvaluationInputError(problems={self.file: self.lines + tail})


def read_queries(lines: Iterable[str]) -> dict[str, str]:
    """BEIR queries.jsonl: {"_id", "text"} per line (other keys, such as metadata, ignored)."""
    queries: dict[str, str] = {}
    first_seen: dict[str, int] = {}
    problems = _Problems(QUERIES)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.add(f"queries line {number}: not valid JSON ({exc.msg} at column {exc.colno})")
            continue
        if not (isinstance(row, dict) and isinstance(row.get("_id"), str | int) and isinstance(row.get("text"), str)):
            problems.add(f"queries line {number}: needs JSON with '_id' and 'text'")
            continue
        query_id, text = str(row["_id"]), row["text"]
        if not query_id.strip() or not text.strip():
            problems.add(f"queries line {number}: '_id' and 'text' must not be empty")
        elif len(query_id) > MAX_ID_CHARS:
            problems.add(f"queries line {number}: the query id is longer than {MAX_ID_CHARS} characters")
        elif query_id in first_seen:
            problems.add(f"queries line {number}: query id {query_id!r} is on line {first_seen[query_id]} too")
        else:
            first_seen[query_id] = number
            queries[query_id] = text
    problems.raise_any()
    return queries


def _qrels_rows(lines: Iterable[str], problems: _Problems) -> Iterator[tuple[int, str, str, int]]:
    """(line number, query id, document id, grade) of each judgement; a header and
    blank lines skipped, CRLF tolerated; bad lines added to `problems`."""
    for number, line in enumerate(lines, start=1):
        fields = line.rstrip("\r\n").split("\t")
        if not fields[0].strip():
            continue
        if number == 1 and fields[0] == "query-id":
            continue
        if len(fields) != 3:
            problems.add(f"qrels line {number}: expected 3 tab-separated fields (query-id, corpus-id, score), "
                         f"found {len(fields)}")
            continue
        try:
            grade = int(fields[2])
        except ValueError:
            problems.add(f"qrels line {number}: score {fields[2]!r} is not an integer")
            continue
        if not fields[1].strip():
            problems.add(f"qrels line {number}: the corpus-id is empty")
            continue
        yield number, fields[0], fields[1], grade


def read_qrels(lines: Iterable[str]) -> dict[str, dict[str, int]]:
    """BEIR qrels TSV (query-id, corpus-id, score), header optional, CRLF tolerated."""
    problems = _Problems(QRELS)
    qrels: dict[str, dict[str, int]] = {}
    for _, query_id, document_id, grade in _qrels_rows(lines, problems):
        qrels.setdefault(query_id, {})[document_id] = grade
    problems.raise_any()
    return qrels


def read_files(queries: Path, qrels: Path) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """A queries.jsonl and a qrels TSV read from disk; FileNotFoundError names a missing one."""
    with queries.open(encoding="utf-8") as q, qrels.open(encoding="utf-8", newline="") as r:
        return read_queries(q), read_qrels(r)


@dataclass(frozen=True)
class QuerySetData:
    """A test set as stored: the judged queries' texts and their judgements."""

    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    unjudged: int  # queries in the file without a judgement: not evaluated, not kept

    @property
    def judgements(self) -> int:
        return sum(len(documents) for documents in self.qrels.values())


def read_query_set(query_lines: Iterable[str], qrels_lines: Iterable[str], *, max_queries: int) -> QuerySetData:
    """Both files of a test set, checked against each other: every query the qrels judge
    must be in the queries file (its first line naming an unknown id is reported), and
    at most `max_queries` queries may be judged. Queries without judgements are counted
    and dropped, as BEIR evaluates only judged ones."""
    queries = read_queries(query_lines)
    problems = _Problems(QRELS)
    qrels: dict[str, dict[str, int]] = {}
    unknown: set[str] = set()
    for number, query_id, document_id, grade in _qrels_rows(qrels_lines, problems):
        if query_id not in queries:
            if query_id not in unknown:
                unknown.add(query_id)
                problems.add(f"qrels line {number}: query id {query_id!r} is not in the queries file")
            continue
        qrels.setdefault(query_id, {})[document_id] = grade
    problems.raise_any()
    if not qrels:
        raise EvaluationInputError(problems={QRELS: ["qrels: no judgement in the file"]})
    if len(qrels) > max_queries:
        raise EvaluationInputError(problems={QRELS: [
            f"qrels: {len(qrels)} queries are judged; at most {max_queries} are evaluated in one set"]})
    judged = {query_id: text for query_id, text in queries.items() if query_id in qrels}
    return QuerySetData(judged, qrels, len(queries) - len(judged))


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


@dataclass(frozen=True)
class QueryScore:
    """One query's metrics in one mode."""

    ndcg_at_10: float
    recall_at_100: float
    mrr_at_10: float

    def as_dict(self) -> dict[str, float]:
        return dict(self.__dict__)


METRICS = ("ndcg_at_10", "recall_at_100", "mrr_at_10")


def without_self_hits(query_id: str, ranked: Sequence[str]) -> list[str]:
    """BEIR ignores a retrieved document whose id equals the query id."""
    return [doc for doc in ranked if doc != query_id]


def score_query(query_id: str, ranked: Sequence[str], judged: Mapping[str, int]) -> QueryScore:
    ranked = without_self_hits(query_id, ranked)
    return QueryScore(metrics.ndcg_at(ranked, judged, 10), metrics.recall_at(ranked, judged, 100),
                      metrics.mrr_at(ranked, judged, 10))


def score_run(mode: str, runs: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]],
              latencies_ms: Sequence[float]) -> ModeReport:
    """Mean metrics over the queries in `runs` (each a ranked list of document ids)."""
    return summarise(mode, {query_id: score_query(query_id, ranked, qrels[query_id])
                            for query_id, ranked in runs.items()}, latencies_ms)


def summarise(mode: str, scores: Mapping[str, QueryScore], latencies_ms: Sequence[float]) -> ModeReport:
    """A mode's report from its queries' scores: their means, and latency percentiles."""
    n = len(scores)
    if n == 0:
        raise EvaluationInputError("no query has both a text and qrels")
    return ModeReport(mode, n, sum(s.ndcg_at_10 for s in scores.values()) / n,
                      sum(s.recall_at_100 for s in scores.values()) / n,
                      sum(s.mrr_at_10 for s in scores.values()) / n,
                      metrics.percentile(latencies_ms, 50), metrics.percentile(latencies_ms, 95))
