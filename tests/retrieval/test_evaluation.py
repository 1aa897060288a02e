"""Evaluation: BEIR file parsing, metric aggregation and the evaluate command."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from retrieval.evaluation.beir import EvaluationInputError, read_qrels, read_queries, score_run, without_self_hits
from tests.conftest import DATASETS


def test_qrels_with_crlf_header_and_grades_parse():
    lines = ["query-id\tcorpus-id\tscore\r\n", "q1\td1\t2\r\n", "q1\td2\t1\r\n", "q2\td3\t0\r\n", "\r\n"]

    assert read_qrels(lines) == {"q1": {"d1": 2, "d2": 1}, "q2": {"d3": 0}}


def test_bad_qrels_line_names_its_number():
    with pytest.raises(EvaluationInputError, match="line 2"):
        read_qrels(["q1\td1\t1\n", "q1\td2\n"])
    with pytest.raises(EvaluationInputError, match="line 1"):
        read_qrels(["q1\td1\tmaybe\n"])


def test_queries_parse_and_bad_line_is_named():
    assert read_queries(['{"_id": "q1", "text": "a b"}\n', "\n"]) == {"q1": "a b"}
    with pytest.raises(EvaluationInputError, match="line 1"):
        read_queries(['{"id": "q1"}'])


def test_a_hit_with_the_query_id_is_ignored():
    assert without_self_hits("q1", ["q1", "d1", "q1", "d2"]) == ["d1", "d2"]


def test_score_run_averages_over_queries_with_graded_gains():
    qrels = {"q1": {"d1": 2, "d2": 1}, "q2": {"d9": 1}}
    runs = {"q1": ["d2", "d1"], "q2": ["q2", "d8", "d9"]}  # q2's self-hit is dropped

    report = score_run("bm25", runs, qrels, [10.0, 30.0])

    # q1: DCG = 1/log2(2) + 2/log2(3); IDCG = 2 + 1/log2(3). q2: d9 at rank 2 -> 1/log2(3).
    import math
    ndcg_q1 = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    ndcg_q2 = (1 / math.log2(3)) / 1
    assert report.ndcg_at_10 == pytest.approx((ndcg_q1 + ndcg_q2) / 2)
    assert report.recall_at_100 == pytest.approx(1.0)
    assert report.mrr_at_10 == pytest.approx((1 + 0.5) / 2)
    assert (report.p50_ms, report.p95_ms) == (10.0, 30.0)


def test_evaluate_command_scores_a_real_catalog(indexed_catalog, tmp_path, capsys):
    queries = tmp_path / "queries.jsonl"
    queries.write_text("\n".join(json.dumps(q) for q in [
        {"_id": "q1", "text": "circuit breaker failing dependency"},
        {"_id": "q2", "text": "cache time to live"},
    ]))
    qrels = tmp_path / "test.tsv"
    qrels.write_bytes(b"query-id\tcorpus-id\tscore\r\nq1\tcircuit-breaker.md\t2\r\nq2\tcaching.md\t1\r\n")
    out = tmp_path / "report.json"

    call_command("evaluate", catalog="ops", queries=str(queries), qrels=str(qrels), modes="bm25,vector,hybrid",
                 json_out=str(out))

    report = {m["mode"]: m for m in json.loads(out.read_text())["modes"]}
    assert set(report) == {"bm25", "vector", "hybrid"}
    for mode in report.values():
        assert mode["queries"] == 2
        assert mode["ndcg_at_10"] == pytest.approx(1.0)
        assert mode["mrr_at_10"] == pytest.approx(1.0)
    assert "nDCG@10" in capsys.readouterr().out


def test_evaluate_command_refuses_bad_input_with_one_line(indexed_catalog, tmp_path):
    qrels = tmp_path / "test.tsv"
    qrels.write_text("q1\tcircuit-breaker.md\t1\n")
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"_id": "q1", "text": "x"}\n')

    with pytest.raises(CommandError, match="unknown modes"):
        call_command("evaluate", catalog="ops", queries=str(queries), qrels=str(qrels), modes="bm25,sparse")
    with pytest.raises(CommandError, match="no catalog"):
        call_command("evaluate", catalog="nope", queries=str(queries), qrels=str(qrels))


@pytest.mark.parametrize("command", ["evaluate", "tune"])
def test_a_command_refuses_a_test_set_file_it_cannot_read_with_one_line(indexed_catalog, tmp_path, command):
    (tmp_path / "q.jsonl").write_text("not json\n")
    (tmp_path / "test.tsv").write_text("q1\tcircuit-breaker.md\t1\n")
    files = {"queries": str(tmp_path / "q.jsonl"), "qrels": str(tmp_path / "test.tsv")}

    with pytest.raises(CommandError, match="no such file: .*missing.jsonl"):
        call_command(command, catalog="ops", **{**files, "queries": str(tmp_path / "missing.jsonl")})
    with pytest.raises(CommandError, match="queries line 1: not valid JSON"):
        call_command(command, catalog="ops", **files)


@pytest.mark.dataset
def test_nfcorpus_test_qrels_parse_as_published():
    qrels_path = DATASETS / "nfcorpus" / "qrels" / "test.tsv"
    if not qrels_path.exists():
        pytest.skip("../shared/datasets/nfcorpus is not present")
    with qrels_path.open(encoding="utf-8", newline="") as handle:
        qrels = read_qrels(handle)
    with (DATASETS / "nfcorpus" / "queries.jsonl").open(encoding="utf-8") as handle:
        queries = read_queries(handle)

    assert len(qrels) == 323
    assert sum(len(docs) for docs in qrels.values()) == 12334
    assert set(qrels) <= set(queries)


def test_tune_tries_the_vector_feedback_values_it_is_given_and_refuses_bad_ones_with_one_line(indexed_catalog,
                                                                                              tmp_path):
    from retrieval.evaluation.tuning import FEEDBACK, candidates

    (tmp_path / "q.jsonl").write_text('{"_id": "q1", "text": "retry backoff"}\n'
                                      '{"_id": "q2", "text": "circuit breaker failures"}\n')
    (tmp_path / "test.tsv").write_text("q1\tretry-backoff.md\t1\nq2\tcircuit-breaker.md\t1\n")
    files = {"queries": str(tmp_path / "q.jsonl"), "qrels": str(tmp_path / "test.tsv")}
    for bad in ("3", "3:x", "50:0.5", "3:5", "0:0.5"):
        with pytest.raises(CommandError, match="--vector-feedback"):
            call_command("tune", catalog="ops", vector_feedback=bad, **files)

    out = tmp_path / "tune.json"
    call_command("tune", catalog="ops", vector_feedback="5:1,10:0.3", json=str(out), stdout=io.StringIO(), **files)

    wider = [(0, FEEDBACK[0][1]), (5, 1.0), (10, 0.3)]
    assert json.loads(out.read_text())["candidates"] == len(candidates(indexed_catalog.ranking_settings, wider))
    assert len(candidates(indexed_catalog.ranking_settings, wider)) > len(candidates(indexed_catalog.ranking_settings))
