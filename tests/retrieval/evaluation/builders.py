"""Test sets for the evaluation tests, as a curator would upload them."""

from __future__ import annotations

import json

from catalog.models import Catalog
from retrieval.evaluation.query_sets import query_set_create
from retrieval.models import EvaluationSet

# Judged against the `indexed_catalog` fixture's handbook (tests/conftest.py).
OPS_QUERIES = {
    "q1": "circuit breaker failing dependency",
    "q2": "cache time to live",
    "q3": "retry transient failures with backoff",
    "q4": "log secrets",
    "q5": "vault keys rotation",  # judged against a source only an approval lets through
    "q6": "unjudged question",
}
OPS_QRELS = [("q1", "circuit-breaker.md", 2), ("q2", "caching.md", 1), ("q3", "retries.md", 1),
             ("q4", "logging.md", 1), ("q5", "rotation.md", 1), ("q5", "nowhere.md", 1)]


def queries_jsonl(queries: dict[str, str]) -> str:
    return "".join(json.dumps({"_id": query_id, "text": text}) + "\n" for query_id, text in queries.items())


def qrels_tsv(rows: list[tuple[str, str, int]]) -> str:
    return "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in rows)


def ops_set(name: str = "ops-questions", catalog: Catalog | None = None) -> EvaluationSet:
    """The ops questions, uploaded for `catalog` (default: the `indexed_catalog` fixture's `ops`)."""
    return query_set_create(catalog=catalog or Catalog.objects.get(slug="ops"), name=name,
                            queries=queries_jsonl(OPS_QUERIES), qrels=qrels_tsv(OPS_QRELS), by="cora")
