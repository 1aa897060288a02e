"""`python -m benchmarks <command>`: the commands run from a checkout with the product's
settings, and read their data only from the paths they are given."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from benchmarks.commands import command_load, command_names
from catalog.models import Catalog
from tests.config.servers import child_env

BASE_DIR = Path(__file__).resolve().parents[2]
COMMANDS = ["bench", "bench_connections", "bench_conversation", "bench_conversation_recall", "bench_detect",
            "bench_enrich", "bench_feedback", "bench_files", "bench_formats", "bench_gate", "bench_git", "bench_pages",
            "bench_query", "bench_reindex", "bench_restart", "bench_topology", "bench_web"]


def benchmarks(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=BASE_DIR, env={**os.environ, **child_env()},
                          capture_output=True, text=True, timeout=120)


def test_every_command_is_listed_and_an_unknown_one_is_refused(db):
    listing = benchmarks()
    unknown = benchmarks("bench_nothing")

    assert command_names() == COMMANDS
    assert listing.returncode == 0 and all(f"  {name} " in listing.stdout for name in COMMANDS)
    assert unknown.returncode == 2 and "Unknown command: 'bench_nothing'" in unknown.stderr


def test_the_listing_starts_no_postgres(tmp_path):
    pgdata = tmp_path / "pgdata"  # where a start would put a server
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}

    listing = subprocess.run([sys.executable, "-m", "benchmarks"], cwd=BASE_DIR, capture_output=True, text=True,
                             env={**env, "DJANGO_SETTINGS_MODULE": "config.settings", "LECTERN_PGDATA": str(pgdata)},
                             timeout=120)

    assert listing.returncode == 0 and "bench_query" in listing.stdout, listing.stderr
    assert not pgdata.exists()


def test_a_command_runs_end_to_end_and_writes_its_json(db, tmp_path):
    out = tmp_path / "detect.json"

    result = benchmarks("bench_detect", "--tags", "50", "--text-bytes", "512", "--repeat", "3",
                        "--baseline-repeat", "1", "--json", str(out))

    assert result.returncode == 0, result.stderr
    assert "TagMatcher.find" in result.stdout
    assert json.loads(out.read_text())["detect"]["tags"] == 50


@pytest.mark.parametrize("name", ["bench", "bench_enrich", "bench_restart"])
def test_the_dataset_is_a_path_given_never_a_default(db, name):
    with pytest.raises(CommandError, match="required: --dataset"):
        call_command(command_load(name))


@pytest.mark.parametrize("name", ["bench", "bench_enrich", "bench_restart"])
def test_a_folder_without_the_dataset_files_is_refused_before_anything_is_built(db, tmp_path, name):
    (tmp_path / "corpus.jsonl").write_text("")

    with pytest.raises(CommandError, match=r"not a BEIR dataset folder: no queries.jsonl, qrels/test.tsv"):
        call_command(command_load(name), "--dataset", str(tmp_path))

    assert not Catalog.objects.filter(slug__startswith="bench-").exists()


def test_the_long_query_benchmark_needs_its_corpus_given(indexed_catalog, tmp_path):
    with pytest.raises(CommandError, match="required: --corpus"):
        call_command(command_load("bench_query"), "--catalog", indexed_catalog.slug)
    with pytest.raises(CommandError, match="no such file"):
        call_command(command_load("bench_query"), "--catalog", indexed_catalog.slug,
                     "--corpus", str(tmp_path / "corpus.jsonl"))


def test_the_feedback_benchmark_times_each_setting_on_the_catalog(indexed_catalog, tmp_path):
    (tmp_path / "qrels").mkdir()
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "retry backoff"}\n'
                                            '{"_id": "q2", "text": "cache invalidation"}\n')
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tretries.md\t1\nq2\tcaching.md\t1\n")
    out = tmp_path / "feedback.json"
    call_command(command_load("bench_feedback"), "--catalog", indexed_catalog.slug, "--dataset", str(tmp_path),
                 "--rounds", "1", "--json", str(out), stdout=io.StringIO())

    results = json.loads(out.read_text())["feedback"]
    assert {(r["mode"], r["feedback"]) for r in results} == {
        ("bm25", "none"), ("bm25", "bm25"), ("hybrid", "none"), ("hybrid", "bm25"), ("hybrid", "vector"),
        ("hybrid", "both")}
    assert all(r["queries"] == 2 and r["p95_ms"] >= r["p50_ms"] > 0 for r in results)
    with pytest.raises(CommandError, match="no such file|not a BEIR"):
        call_command(command_load("bench_feedback"), "--catalog", indexed_catalog.slug,
                     "--dataset", str(tmp_path / "nowhere"))
