"""What every benchmark shares: its error, its log, the NFCorpus test queries and the
machine a timing was taken on."""

from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Callable
from pathlib import Path

from django.contrib.auth.models import Group, User
from django.db import connection

from catalog.models import Catalog
from retrieval.evaluation.beir import read_files

Log = Callable[[str], None]


class BenchmarkError(Exception):
    """A benchmark that cannot run as asked (missing base catalog, data files, ...)."""


DATASET_FILES = ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv")


def dataset_check(dataset: Path) -> Path:
    """`dataset` if it is a BEIR folder holding what the benchmarks read, checked before
    anything is built (a missing file would otherwise surface after a long build)."""
    missing = [name for name in DATASET_FILES if not (dataset / name).is_file()]
    if missing:
        raise BenchmarkError(f"{dataset} is not a BEIR dataset folder: no {', '.join(missing)} "
                             f"(NFCorpus: ../shared/datasets/nfcorpus, as `make bench` gives it)")
    return dataset


def nfcorpus_test_judged(dataset: Path) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """Every query's text, and the judgements of qrels/test.tsv (query -> document -> grade)."""
    try:
        return read_files(dataset / "queries.jsonl", dataset / "qrels" / "test.tsv")
    except FileNotFoundError as exc:
        raise BenchmarkError(f"no such file: {exc.filename}") from None


def nfcorpus_test_queries(dataset: Path) -> list[str]:
    """The texts of the queries judged in qrels/test.tsv, in qrels order."""
    texts, judged = nfcorpus_test_judged(dataset)
    return [texts[query_id] for query_id in judged if query_id in texts]


def indexed_catalog(slug: str) -> Catalog:
    """The live catalog `slug`, refused unless it has chunks (a benchmark that searches it)."""
    catalog = Catalog.objects.live().filter(slug=slug).first()
    if catalog is None or not catalog.chunk_count:
        raise BenchmarkError(f"no indexed catalog {slug!r}: `make nfcorpus` imports NFCorpus")
    return catalog


def machine_info() -> dict[str, str | int | float]:
    """What a timing needs beside it: cores, memory, CPU model, Postgres version."""
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except FileNotFoundError:
        lscpu = ""
    model = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines()
                  if line.startswith("Model name")), platform.processor())
    flags = next((line.split(":", 1)[1].split() for line in lscpu.splitlines() if line.startswith("Flags")), [])
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        postgres = cursor.fetchone()[0]
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"nproc": len(os.sched_getaffinity(0)), "memory_gib": round(memory, 1), "cpu": model,
            "avx512": any(f.startswith("avx512") for f in flags), "postgres": postgres}


def bench_person(username: str, *roles: str) -> User:
    """The person a benchmark acts as (made once), holding `roles` (catalog.auth's
    group names)."""
    user, _ = User.objects.get_or_create(username=username)
    user.groups.add(*(Group.objects.get_or_create(name=role)[0] for role in roles))
    return user
