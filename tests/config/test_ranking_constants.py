"""The ranking's parameters are constants of the modules that rank, not settings: the
environment cannot change them, so every ranking, and every figure measured with them
(docs/benchmarks.md), holds wherever Lectern runs. A child process is started with each
of the old environment variables set to another value, and reads the defaults."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]

# module, constant, value: what every ranking is computed with
CONSTANTS = [
    ("retrieval.search.bm25", "K1", 1.2),
    ("retrieval.search.bm25", "B", 0.75),
    ("retrieval.search.fusion", "RRF_K", 60),
    ("retrieval.search.selectors", "FUSION_DEPTH", 100),
    ("retrieval.search.vector", "HNSW_EF_SEARCH", 100),
    ("retrieval.search.vector", "VECTOR_EXACT_MAX", 1000),
    ("retrieval.memory.selectors", "MEMORY_HALF_LIFE_DAYS", 30.0),
    ("retrieval.memory.selectors", "MEMORY_RECENCY_WEIGHT", 0.5),
    ("retrieval.memory.selectors", "MEMORY_EXACT_MAX", 5000),
    ("retrieval.enrichment.pipeline", "ENRICH_EMBED_TOKENS", 128),
    ("retrieval.enrichment.pipeline", "ENRICH_TOOL_EMBED_TOKENS", 48),
]
# the environment variables (and settings) these once were
FORMER_NAMES = ["LECTERN_BM25_K1", "LECTERN_BM25_B", "LECTERN_RRF_K", "LECTERN_FUSION_DEPTH",
                "LECTERN_HNSW_EF_SEARCH", "LECTERN_VECTOR_EXACT_MAX", "LECTERN_MEMORY_HALF_LIFE_DAYS",
                "LECTERN_MEMORY_RECENCY_WEIGHT", "LECTERN_MEMORY_EXACT_MAX", "LECTERN_ENRICH_EMBED_TOKENS",
                "LECTERN_ENRICH_TOOL_EMBED_TOKENS"]

READ_CONSTANTS = f"""
import importlib, json
import django
django.setup()
from django.conf import settings
constants = {[(module, name) for module, name, _ in CONSTANTS]!r}
print(json.dumps({{
    "constants": [getattr(importlib.import_module(module), name) for module, name in constants],
    "settings": [name for name in {FORMER_NAMES!r} if hasattr(settings, name)],
}}))
"""


def test_the_environment_does_not_change_the_ranking_constants(tmp_path):
    # Given every former variable set to another value, one the settings once accepted
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    env.update(DJANGO_SETTINGS_MODULE="config.settings", LECTERN_PGDATA=str(tmp_path / "pgdata"),
               SECRET_KEY=secrets.token_urlsafe(50))
    env.update({name: "9" for name in FORMER_NAMES})
    env.update(LECTERN_BM25_K1="2.0", LECTERN_BM25_B="0.1", LECTERN_FUSION_DEPTH="7")

    # When a process sets Django up and reads the constants
    done = subprocess.run([sys.executable, "-c", READ_CONSTANTS], cwd=BASE_DIR, env=env, capture_output=True,
                          text=True, timeout=120)

    # Then it reads the defaults, and the settings hold none of the former names
    assert done.returncode == 0, done.stderr
    read = json.loads(done.stdout.strip().splitlines()[-1])
    assert read["constants"] == [value for _, _, value in CONSTANTS]
    assert read["settings"] == []


def test_no_product_code_names_the_former_variables():
    # Given the product's code (tests name them here only)
    sources = [path for package in ("config", "retrieval", "approvals", "catalog", "benchmarks")
               for path in (BASE_DIR / package).rglob("*.py")]
    assert BASE_DIR / "config" / "settings.py" in sources

    # Then none of it reads, sets or names them
    named = {f"{path.relative_to(BASE_DIR)}: {name}" for path in sources for name in FORMER_NAMES
             if name in path.read_text()}
    assert named == set()
