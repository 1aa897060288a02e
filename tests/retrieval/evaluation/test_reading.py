"""A test set's two files read and checked against each other (pure): every problem
named by file and line, the first few at once; queries without judgements dropped."""

from __future__ import annotations

import json

import pytest

from retrieval.evaluation.beir import EvaluationInputError, read_queries, read_query_set

QUERIES = [json.dumps({"_id": f"q{i}", "text": f"question {i}", "metadata": {}}) + "\n" for i in range(1, 5)]
QRELS = ["query-id\tcorpus-id\tscore\n", "q1\td1\t1\n", "q1\td2\t2\n", "q3\td3\t1\n"]


def test_a_set_keeps_only_its_judged_queries():
    data = read_query_set(QUERIES, QRELS, max_queries=10)

    assert data.queries == {"q1": "question 1", "q3": "question 3"}
    assert data.qrels == {"q1": {"d1": 1, "d2": 2}, "q3": {"d3": 1}}
    assert (data.unjudged, data.judgements) == (2, 3)


def test_bad_json_lines_are_named_with_what_is_wrong():
    lines = ['{"_id": "q1", "text": "fine"}\n', '{"_id": "q2", "text": }\n', '["q3"]\n', '{"_id": "q1", "text": "x"}\n',
             '{"_id": "", "text": "empty id"}\n']

    with pytest.raises(EvaluationInputError) as refused:
        read_queries(lines)

    assert refused.value.problems == {"queries": [
        "queries line 2: not valid JSON (Expecting value at column 23)",
        "queries line 3: needs JSON with '_id' and 'text'",
        "queries line 4: query id 'q1' is on line 1 too",
        "queries line 5: '_id' and 'text' must not be empty",
    ]}


def test_past_five_problems_the_rest_are_counted():
    with pytest.raises(EvaluationInputError) as refused:
        read_queries(["not json\n"] * 8)

    assert len(refused.value.problems["queries"]) == 6
    assert refused.value.problems["queries"][-1] == "… and 3 more lines like these"


def test_a_judged_query_missing_from_the_queries_is_named_once_by_its_first_line():
    qrels = ["q1\td1\t1\n", "q9\td1\t1\n", "q9\td2\t1\n", "q1\td2\tyes\n", "q1\td3\n"]

    with pytest.raises(EvaluationInputError) as refused:
        read_query_set(QUERIES, qrels, max_queries=10)

    assert refused.value.problems == {"qrels": [
        "qrels line 2: query id 'q9' is not in the queries file",
        "qrels line 4: score 'yes' is not an integer",
        "qrels line 5: expected 3 tab-separated fields (query-id, corpus-id, score), found 2",
    ]}


def test_limits_and_empty_files_are_refused():
    with pytest.raises(EvaluationInputError, match="2 queries are judged; at most 1"):
        read_query_set(QUERIES, QRELS, max_queries=1)
    with pytest.raises(EvaluationInputError, match="no judgement"):
        read_query_set(QUERIES, ["query-id\tcorpus-id\tscore\n"], max_queries=10)
    with pytest.raises(EvaluationInputError, match="longer than 200"):
        read_queries([json.dumps({"_id": "q" * 201, "text": "long id"})])
