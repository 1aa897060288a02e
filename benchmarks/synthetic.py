"""The synthetic catalog `bench-<N>` that `python -m benchmarks bench --search` times.

It is grown from a real base catalog (NFCorpus): each synthetic chunk copies a random
real chunk, drops and swaps some words and jitters the embedding, so terms stay Zipfian
and vectors stay clustered like real ones. It is written through the real write path
(prepare_chunks, source_replace_rows) without embedding, as a bulk load: the catalog's
HNSW index and BM25 blocks are built once, after its rows (catalog.indexing.bulk). Its
sources hold no upload files, so their fingerprint is that of an empty source and a scan
leaves them alone. The written tables are then vacuumed and analysed, as autovacuum
would do in time.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.queues
import re
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from queue import Empty
from types import FrameType

import numpy as np
from django.db import connection, transaction

from benchmarks.common import BenchmarkError, Log
from catalog.indexing.bulk import bulk_loads_recover, catalog_bulk_load
from catalog.indexing.chunks import PreparedChunk, prepare_chunks
from catalog.indexing.writes import source_replace_rows
from catalog.models import Catalog, Chunk, ReferenceSource
from catalog.progress import Progress
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
                           vectors: np.ndarray, prepared: list[PreparedChunk]) -> int:
    """Write pre-embedded documents, `prepared` as chunks, as one upload source; the
    chunks written."""
    source = ReferenceSource(catalog=catalog, slug=slug, name=slug, kind=ReferenceSource.Kind.UPLOAD, location=slug)
    source.full_clean()
    source.save()
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
    """Delete a catalog a benchmark built: its partitions emptied (TRUNCATE), its other
    rows by SQL, not through the ORM's cascade collector."""
    bench_catalog_claim(catalog)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT lectern_catalog_partitions_empty(%s)", [catalog.pk])
        for table in ("catalog_termblock", "catalog_document", "catalog_term"):
            cursor.execute(f"DELETE FROM {table} WHERE catalog_id = %s", [catalog.pk])
        catalog.delete()


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


def bulk_tables_vacuum(catalog: Catalog) -> None:
    """VACUUM ANALYZE what a build wrote, as autovacuum would in time: index-only scans
    of the chunk keys need the visibility map, and the planner needs fresh statistics."""
    with connection.cursor() as cursor:
        for table in ("catalog_postings", "catalog_chunk"):
            cursor.execute(f"VACUUM (ANALYZE) {table}_c{int(catalog.pk)}")
        cursor.execute("VACUUM (ANALYZE) catalog_term")
        cursor.execute("VACUUM (ANALYZE) catalog_termblock")


Batch = tuple[int, list[DocumentInput], np.ndarray, list[PreparedChunk]]  # first number, documents, vectors, chunks


def _batches_make(catalog: Catalog, texts: list[str], vectors: np.ndarray, chunks: int, seed: int, sigma: float,
                  out: multiprocessing.queues.Queue[Batch | None]) -> None:
    """Make the synthetic sources' documents, vectors and chunks in order (one random
    generator: the same catalog for the same seed), each batch put on `out`; None after
    the last. Touches no database."""
    rng = np.random.default_rng(seed)
    vocabulary = vocabulary_of(texts)
    for start in range(0, chunks, SOURCE_ROWS):
        documents, jittered = synthetic_documents(texts, vectors, vocabulary, start=start,
                                                  count=min(SOURCE_ROWS, chunks - start), rng=rng, sigma=sigma)
        out.put((start, documents, jittered, prepare_chunks(catalog, documents, embedder=None)))
    out.put(None)


@contextmanager
def synthetic_batches(catalog: Catalog, texts: list[str], vectors: np.ndarray, *, chunks: int, seed: int,
                      sigma: float) -> Iterator[Iterator[Batch]]:
    """The synthetic sources, made by a forked process while this one writes the batch
    before (on two cores the analysis and the database's work overlap). The child
    inherits this process's database connection and never uses it; it is stopped when
    the build ends, however it ends."""
    context = multiprocessing.get_context("fork")
    queue: multiprocessing.queues.Queue[Batch | None] = context.Queue(maxsize=2)
    maker = context.Process(target=_batches_make, args=(catalog, texts, vectors, chunks, seed, sigma, queue),
                            daemon=True, name="synthetic batches")
    maker.start()

    def batches() -> Iterator[Batch]:
        while True:
            try:
                batch = queue.get(timeout=BATCH_WAIT_S)
            except Empty:
                if maker.is_alive():
                    continue
                raise BenchmarkError(f"the process making the synthetic batches died (exit {maker.exitcode})") from None
            if batch is None:
                return
            yield batch

    try:
        yield batches()
    finally:
        maker.terminate()
        maker.join()


BATCH_WAIT_S = 5.0  # how often the writer checks that the maker of its batches is alive


def bench_catalog_build(*, base: Catalog, chunks: int, seed: int, sigma: float, log: Log,
                        progress: Progress | None = None) -> Catalog:
    """A fresh `bench-<chunks>` catalog grown from `base` (see the module docstring): a
    bulk load (catalog.indexing.bulk), its HNSW index and BM25 blocks built once after
    its rows, however the build ends (an error, Ctrl-C, TERM)."""
    texts, vectors = base_chunks(base)
    catalog = Catalog(slug=f"bench-{chunks}", name=f"{BENCH_NAME}{chunks} synthetic chunks",
                      description=f"Synthetic chunks grown from {base.slug} (seed {seed}, sigma {sigma}).")
    catalog.full_clean()
    catalog.save()
    started = time.perf_counter()
    with (terminate_raises(), catalog_bulk_load(catalog, across_writes=True, memory=BUILD_MEMORY),
          synthetic_batches(catalog, texts, vectors, chunks=chunks, seed=seed, sigma=sigma) as batches):
        for start, documents, jittered, prepared in batches:
            synthetic_source_write(catalog=catalog, slug=f"synthetic-{start // SOURCE_ROWS:03d}",
                                   documents=documents, vectors=jittered, prepared=prepared)
            written = start + len(documents)
            log(f"  {catalog.slug}: {written}/{chunks} chunks written ({time.perf_counter() - started:.0f}s)")
            if progress:
                progress("build", written, chunks)
        log(f"  building {catalog.slug}'s HNSW index and BM25 blocks ({time.perf_counter() - started:.0f}s)")
    catalog.refresh_from_db()
    return catalog


# maintenance_work_mem of a build's index builds: the HNSW graph of 1M vectors takes about
# 2 GB, and built in memory it is far faster.
BUILD_MEMORY = "4GB"


def bench_catalog_ensure(*, base: Catalog, chunks: int, rebuild: bool, seed: int, sigma: float, log: Log,
                         progress: Progress | None = None) -> tuple[Catalog, float | None]:
    """The `bench-<chunks>` catalog, built when missing, the wrong size or asked to;
    with the build time in seconds (None when it was reused). A catalog whose build was
    killed outright (SIGKILL) before its indexes were built gets them first."""
    for catalog_id in bulk_loads_recover():
        log(f"catalog {catalog_id} had no HNSW index or BM25 blocks (a build killed before its end?): built them")
    existing = Catalog.objects.filter(slug=f"bench-{chunks}").first()
    if existing is not None and existing.chunk_count == chunks and not rebuild:
        log(f"reusing {existing.slug} ({existing.chunk_count} chunks)")
        return existing, None
    if existing is not None:
        bench_catalog_claim(existing)
        log(f"dropping {existing.slug} ({existing.chunk_count} chunks)")
        bench_catalog_drop(existing)
    started = time.perf_counter()
    catalog = bench_catalog_build(base=base, chunks=chunks, seed=seed, sigma=sigma, log=log, progress=progress)
    log(f"  vacuum analyze ({time.perf_counter() - started:.0f}s)")
    bulk_tables_vacuum(catalog)
    if catalog.chunk_count != chunks:
        raise BenchmarkError(f"{catalog.slug} holds {catalog.chunk_count} chunks, not {chunks}")
    return catalog, time.perf_counter() - started
