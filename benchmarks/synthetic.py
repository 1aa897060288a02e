"""The synthetic catalog `bench-<N>` that `python -m benchmarks bench --search` times.

It is grown from a real base catalog (NFCorpus): each synthetic chunk copies a random
real chunk, drops and swaps some words and jitters the embedding, so terms stay Zipfian
and vectors stay clustered like real ones. It is written through the real write path
(prepare_chunks, source_replace_rows) without embedding. Its sources hold no upload
files, so their fingerprint is that of an empty source and a scan leaves them alone.
Optionally the shared HNSW index is dropped for the build and rebuilt once after it;
the written tables are then vacuumed and analysed, as autovacuum would do in time.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from types import FrameType

import numpy as np
from django.db import connection, transaction

from benchmarks.common import BenchmarkError, Log
from catalog.indexing.chunks import prepare_chunks
from catalog.indexing.writes import source_replace_rows
from catalog.models import Catalog, Chunk, ReferenceSource
from catalog.sources.documents import Collected, DocumentInput

SOURCE_ROWS = 10_000  # synthetic chunks per source: one write transaction each
MAX_SYNTHETIC_CHARS = 900  # below the catalog's chunk size: one document, one chunk
_WORD_CHARS = re.compile(r"^[A-Za-z][A-Za-z-]{2,}$")


# --- the synthetic catalog: pure parts ----------------------------------------------------


def perturb_text(text: str, rng: np.random.Generator, vocabulary: list[str], *, drop: float = 0.2,
                 swaps: int = 3, max_chars: int = MAX_SYNTHETIC_CHARS) -> str:
    """`text` with about `drop` of its words removed and `swaps` words replaced by
    random vocabulary words, cut at a word boundary to at most `max_chars`."""
    words = text.split()
    kept = [w for w in words if rng.random() >= drop] or words[:1]
    for position in rng.choice(len(kept), size=min(swaps, len(kept)), replace=False):
        kept[position] = vocabulary[rng.integers(len(vocabulary))]
    out = " ".join(kept)
    if len(out) > max_chars:
        cut = out.rfind(" ", 0, max_chars + 1)
        out = out[: cut if cut > 0 else max_chars]
    return out


def jitter(vectors: np.ndarray, rng: np.random.Generator, sigma: float) -> np.ndarray:
    """Unit vectors near `vectors`: Gaussian noise per dimension, re-normalised."""
    noisy = vectors + rng.normal(0.0, sigma, size=vectors.shape).astype(np.float32)
    # numpy's stubs type this arithmetic as Any
    unit: np.ndarray = (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32)
    return unit


def vocabulary_of(texts: list[str]) -> list[str]:
    """The corpus's distinct plain words, sorted so that a seeded RNG draws alike."""
    return sorted({w for text in texts for w in text.split() if _WORD_CHARS.match(w)})


# --- the synthetic catalog: reading and writing -------------------------------------------


def base_wait(*, slug: str, poll_s: float, timeout_s: float, log: Log) -> Catalog:
    """The base catalog once every source is ready (an import may still be running)."""
    deadline = time.monotonic() + timeout_s
    while True:
        catalog = Catalog.objects.filter(slug=slug).first()
        if catalog is None:
            raise BenchmarkError(f"no catalog {slug!r}: import NFCorpus first "
                                 f"(manage.py import_jsonl corpus.jsonl --catalog {slug})")
        statuses = list(catalog.sources.values_list("status", flat=True))
        if catalog.chunk_count and statuses and all(s == ReferenceSource.Status.READY for s in statuses):
            return catalog
        if ReferenceSource.Status.ERROR in statuses:
            raise BenchmarkError(f"catalog {slug!r} has a source that failed to index; re-import it first")
        if time.monotonic() > deadline:
            raise BenchmarkError(f"catalog {slug!r} not ready after {timeout_s:.0f}s (sources: {statuses})")
        log(f"waiting for {slug}: {catalog.chunk_count} chunks, sources {statuses}; next look in {poll_s:.0f}s")
        time.sleep(poll_s)


def base_chunks(catalog: Catalog) -> tuple[list[str], np.ndarray]:
    """The base catalog's embedded chunk texts and their (n, 384) float32 vectors."""
    rows = Chunk.objects.filter(catalog=catalog, embedding__isnull=False).order_by("id")
    texts, vectors = [], []
    for content, embedding in rows.values_list("content", "embedding").iterator(chunk_size=2000):
        texts.append(content)
        vectors.append(np.asarray(embedding, dtype=np.float32))
    if not texts:
        raise BenchmarkError(f"catalog {catalog.slug!r} has no embedded chunks to grow a synthetic catalog from")
    return texts, np.vstack(vectors)


def synthetic_documents(texts: list[str], vectors: np.ndarray, vocabulary: list[str], *, start: int,
                        count: int, rng: np.random.Generator, sigma: float) -> tuple[list[DocumentInput], np.ndarray]:
    """`count` short documents (syn-<start>...) copied from random base chunks, with their vectors."""
    picks = rng.integers(len(texts), size=count)
    documents = []
    for offset, pick in enumerate(picks):
        text = perturb_text(texts[pick], rng, vocabulary)
        documents.append(DocumentInput(f"syn-{start + offset:07d}", "", text, len(text.encode("utf-8"))))
    return documents, jitter(vectors[picks], rng, sigma)


def synthetic_source_write(*, catalog: Catalog, slug: str, documents: list[DocumentInput],
                           vectors: np.ndarray) -> int:
    """Write pre-embedded documents as one upload source; the chunks written."""
    source = ReferenceSource(catalog=catalog, slug=slug, name=slug, kind=ReferenceSource.Kind.UPLOAD, location=slug)
    source.full_clean()
    source.save()
    prepared = prepare_chunks(catalog, documents, embedder=None)
    if len(prepared) != len(documents):
        raise BenchmarkError(f"{slug}: {len(documents)} documents made {len(prepared)} chunks, expected one each")
    source_replace_rows(source, Collected(documents, [], ""), prepared, vectors)
    return len(prepared)


BENCH_NAME = "Benchmark: "  # how every catalog a benchmark builds, and so may drop, is named


def bench_catalog_claim(catalog: Catalog) -> None:
    """Refuse a catalog that a benchmark would drop but did not build: one that only
    happens to bear a benchmark's slug is someone's."""
    if not catalog.name.startswith(BENCH_NAME):
        raise BenchmarkError(f"catalog {catalog.slug!r} ({catalog.name!r}) was not built by a benchmark (its name "
                             f"would start with {BENCH_NAME!r}), so it is not dropped: rename or delete it yourself")


def bench_catalog_drop(catalog: Catalog) -> None:
    """Delete a catalog a benchmark built; its bulk rows go by SQL, not through the
    ORM's cascade collector."""
    bench_catalog_claim(catalog)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM catalog_termposting WHERE term_id IN "
                       "(SELECT id FROM catalog_term WHERE catalog_id = %s)", [catalog.pk])
        for table in ("catalog_termblock", "catalog_postings", "catalog_chunk", "catalog_document", "catalog_term"):
            cursor.execute(f"DELETE FROM {table} WHERE catalog_id = %s", [catalog.pk])
        catalog.delete()


HNSW_INDEX = "chunk_embedding_hnsw"


def hnsw_drop() -> None:
    """Drop the HNSW index (shared by every catalog) before a bulk load."""
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {HNSW_INDEX}")


def hnsw_rebuild(*, memory: str = "4GB", workers: int = 2) -> bool:
    """Build the HNSW index (as the Chunk model declares it) in one go: in memory (the
    graph of 1M vectors takes about 2 GB) and with parallel workers, far faster than
    inserting vectors one at a time. Does nothing when the index exists; whether it built."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [HNSW_INDEX])
        if cursor.fetchone()[0]:
            return False
    index = next(i for i in Chunk._meta.indexes if i.name == HNSW_INDEX)
    with connection.schema_editor() as editor:
        editor.execute("SELECT set_config('maintenance_work_mem', %s, true), "
                       "set_config('max_parallel_maintenance_workers', %s, true)", [memory, str(workers)])
        editor.add_index(Chunk, index)
    return True


def database_sessions_other() -> int:
    """Client sessions on this database other than this one: a server, a worker, a shell.
    Another role's session (the app's, seen from the owner's) shows no backend_type to
    a role without pg_read_all_stats: one with a user counts as a client."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND coalesce(backend_type, 'client backend') = 'client backend' AND usesysid IS NOT NULL "
                       "AND pid <> pg_backend_pid()")
        return int(cursor.fetchone()[0])


@contextmanager
def terminate_raises() -> Iterator[None]:
    """TERM (`kill`, `timeout`, a service manager) raised as SystemExit in this thread,
    so that `finally` blocks run as they do on Ctrl-C; the previous handler after."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set one
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def hnsw_deferred(*, log: Log) -> Iterator[None]:
    """The shared HNSW index dropped for a bulk load and built again after it, however
    the load ends: done, failed, Ctrl-C or TERM (a SIGKILL leaves it to the next
    bench_catalog_ensure). Every catalog's vector search falls back to exact scans
    without the index, so this is refused while another session uses the database."""
    others = database_sessions_other()
    if others:
        raise BenchmarkError(
            f"--defer-hnsw drops the HNSW index that every catalog's vector search uses: refused while {others} "
            "other session(s) use this database (stop its server and workers, or build in a database of its own, "
            "e.g. LECTERN_DB_NAME=lectern_bench)")
    with terminate_raises():
        hnsw_drop()
        try:
            yield
        finally:
            if connection.connection is not None and not connection.in_atomic_block and not connection.is_usable():
                connection.close()  # the failure broke it: the rebuild reconnects
            log("  building the HNSW index")
            hnsw_rebuild()


def bulk_tables_vacuum() -> None:
    """VACUUM ANALYZE what a build wrote, as autovacuum would in time: index-only scans
    of the postings need the visibility map, and the planner needs fresh statistics."""
    with connection.cursor() as cursor:
        for table in ("catalog_termposting", "catalog_termblock", "catalog_postings", "catalog_chunk", "catalog_term"):
            cursor.execute(f"VACUUM (ANALYZE) {table}")


def bench_catalog_build(*, base: Catalog, chunks: int, seed: int, sigma: float, log: Log) -> Catalog:
    """A fresh `bench-<chunks>` catalog grown from `base` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    texts, vectors = base_chunks(base)
    vocabulary = vocabulary_of(texts)
    catalog = Catalog(slug=f"bench-{chunks}", name=f"{BENCH_NAME}{chunks} synthetic chunks",
                      description=f"Synthetic chunks grown from {base.slug} (seed {seed}, sigma {sigma}).")
    catalog.full_clean()
    catalog.save()
    started = time.perf_counter()
    for start in range(0, chunks, SOURCE_ROWS):
        count = min(SOURCE_ROWS, chunks - start)
        documents, jittered = synthetic_documents(texts, vectors, vocabulary, start=start, count=count,
                                                  rng=rng, sigma=sigma)
        synthetic_source_write(catalog=catalog, slug=f"synthetic-{start // SOURCE_ROWS:03d}",
                               documents=documents, vectors=jittered)
        log(f"  {catalog.slug}: {start + count}/{chunks} chunks written ({time.perf_counter() - started:.0f}s)")
    catalog.refresh_from_db()
    return catalog


def bench_catalog_ensure(*, base: Catalog, chunks: int, rebuild: bool, seed: int, sigma: float, log: Log,
                         defer_hnsw: bool = False) -> tuple[Catalog, float | None]:
    """The `bench-<chunks>` catalog, built when missing, the wrong size or asked to;
    with the build time in seconds (None when it was reused). With `defer_hnsw` the
    shared HNSW index is dropped for the build and rebuilt after it (`hnsw_deferred`).
    An index found missing (a deferred build killed outright) is built again first."""
    if hnsw_rebuild():
        log(f"the HNSW index {HNSW_INDEX} was missing (a --defer-hnsw build killed before it could rebuild it?): "
            "built it again")
    existing = Catalog.objects.filter(slug=f"bench-{chunks}").first()
    if existing is not None and existing.chunk_count == chunks and not rebuild:
        log(f"reusing {existing.slug} ({existing.chunk_count} chunks)")
        return existing, None
    if existing is not None:
        bench_catalog_claim(existing)  # before the index is dropped for nothing
    with hnsw_deferred(log=log) if defer_hnsw else nullcontext():
        if existing is not None:
            log(f"dropping {existing.slug} ({existing.chunk_count} chunks)")
            bench_catalog_drop(existing)
        started = time.perf_counter()
        catalog = bench_catalog_build(base=base, chunks=chunks, seed=seed, sigma=sigma, log=log)
    log(f"  vacuum analyze ({time.perf_counter() - started:.0f}s)")
    bulk_tables_vacuum()
    if catalog.chunk_count != chunks:
        raise BenchmarkError(f"{catalog.slug} holds {catalog.chunk_count} chunks, not {chunks}")
    return catalog, time.perf_counter() - started
