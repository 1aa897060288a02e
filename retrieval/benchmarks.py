"""The measurements behind `manage.py bench`.

Search latency (`search_benchmark`):
  1. wait until the real base catalog (NFCorpus) is indexed
  2. grow a synthetic catalog `bench-<N>` of exactly N chunks from it: each synthetic
     chunk copies a random real chunk, drops and swaps some words and jitters the
     embedding, so terms stay Zipfian and vectors stay clustered like real ones; it
     is written through the real write path (prepare_chunks, source_replace_rows)
     without embedding. Its sources hold no upload files, so their fingerprint is
     that of an empty source and a scan leaves them alone. Optionally the shared HNSW
     index is dropped for the build and rebuilt once after it; the written tables are
     then vacuumed and analysed, as autovacuum would do in time.
  3. time chunk_search (query embedding included) per mode over the test queries

Indexing throughput (`index_benchmark`): the full import pipeline (chunk, count
tokens, embed, write) against a bare ONNX Runtime loop over the same chunk texts,
alternating the two so that machine noise hits both alike. The embedding cache is
emptied of those texts before each import, so the pipeline embeds every chunk.
"""

from __future__ import annotations

import os
import platform
import re
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import connection, transaction

from catalog.embedder import default_model_files, get_embedder
from catalog.indexing.chunks import prepare_chunks
from catalog.indexing.runs import source_import
from catalog.indexing.writes import source_replace_rows
from catalog.models import Catalog, Chunk, EmbeddingCache, IndexRun, ReferenceSource
from catalog.sources.beir import parse_beir_jsonl
from catalog.sources.documents import Collected, DocumentInput
from catalog.sources.fingerprints import text_sha256
from retrieval.evaluation.beir import read_qrels, read_queries
from retrieval.evaluation.metrics import percentile
from retrieval.search.selectors import SearchOptions, chunk_search
from retrieval.search.vector import embed_query

Log = Callable[[str], None]

SEARCH_MODES = ("bm25", "vector", "hybrid")
SOURCE_ROWS = 10_000  # synthetic chunks per source: one write transaction each
MAX_SYNTHETIC_CHARS = 900  # below the catalog's chunk size: one document, one chunk
_WORD_CHARS = re.compile(r"^[A-Za-z][A-Za-z-]{2,}$")


class BenchmarkError(Exception):
    """A benchmark that cannot run as asked (missing base catalog, data files, ...)."""


def default_dataset_dir() -> Path:
    return Path(settings.BASE_DIR).parent / "shared" / "datasets" / "nfcorpus"


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


def bench_catalog_drop(catalog: Catalog) -> None:
    """Delete a catalog; its bulk rows go by SQL, not through the ORM's cascade collector."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM catalog_termposting WHERE term_id IN "
                       "(SELECT id FROM catalog_term WHERE catalog_id = %s)", [catalog.pk])
        for table in ("catalog_postings", "catalog_chunk", "catalog_document", "catalog_term"):
            cursor.execute(f"DELETE FROM {table} WHERE catalog_id = %s", [catalog.pk])
        catalog.delete()


HNSW_INDEX = "chunk_embedding_hnsw"


def hnsw_drop() -> None:
    """Drop the HNSW index (shared by every catalog) before a bulk load."""
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {HNSW_INDEX}")


def hnsw_rebuild(*, memory: str = "4GB", workers: int = 2) -> None:
    """Build the HNSW index (as the Chunk model declares it) in one go: in memory (the
    graph of 1M vectors takes about 2 GB) and with parallel workers, far faster than
    inserting vectors one at a time. Does nothing when the index exists."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [HNSW_INDEX])
        if cursor.fetchone()[0]:
            return
    index = next(i for i in Chunk._meta.indexes if i.name == HNSW_INDEX)
    with connection.schema_editor() as editor:
        editor.execute("SELECT set_config('maintenance_work_mem', %s, true), "
                       "set_config('max_parallel_maintenance_workers', %s, true)", [memory, str(workers)])
        editor.add_index(Chunk, index)


def bulk_tables_vacuum() -> None:
    """VACUUM ANALYZE what a build wrote, as autovacuum would in time: index-only scans
    of the postings need the visibility map, and the planner needs fresh statistics."""
    with connection.cursor() as cursor:
        for table in ("catalog_termposting", "catalog_postings", "catalog_chunk", "catalog_term"):
            cursor.execute(f"VACUUM (ANALYZE) {table}")


def bench_catalog_build(*, base: Catalog, chunks: int, seed: int, sigma: float, log: Log) -> Catalog:
    """A fresh `bench-<chunks>` catalog grown from `base` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    texts, vectors = base_chunks(base)
    vocabulary = vocabulary_of(texts)
    catalog = Catalog(slug=f"bench-{chunks}", name=f"Benchmark: {chunks} synthetic chunks",
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
    shared HNSW index is dropped for the build and rebuilt after it (vector search in
    this database is unindexed meanwhile)."""
    existing = Catalog.objects.filter(slug=f"bench-{chunks}").first()
    if existing is not None and existing.chunk_count == chunks and not rebuild:
        log(f"reusing {existing.slug} ({existing.chunk_count} chunks)")
        return existing, None
    if existing is not None:
        log(f"dropping {existing.slug} ({existing.chunk_count} chunks)")
        bench_catalog_drop(existing)
    started = time.perf_counter()
    if defer_hnsw:
        hnsw_drop()
    try:
        catalog = bench_catalog_build(base=base, chunks=chunks, seed=seed, sigma=sigma, log=log)
    finally:
        if defer_hnsw:
            log(f"  building the HNSW index ({time.perf_counter() - started:.0f}s)")
            hnsw_rebuild()
    log(f"  vacuum analyze ({time.perf_counter() - started:.0f}s)")
    bulk_tables_vacuum()
    if catalog.chunk_count != chunks:
        raise BenchmarkError(f"{catalog.slug} holds {catalog.chunk_count} chunks, not {chunks}")
    return catalog, time.perf_counter() - started


# --- search latency -----------------------------------------------------------------------


@dataclass
class LatencyReport:
    catalog: str
    chunks: int
    mode: str
    queries: int
    p50_ms: float
    p95_ms: float
    mean_ms: float
    bm25_passes: float | None = None  # mean BM25 SQL passes per query (2: a probe pass fell back to a walk)
    p95_runs: list[float] = field(default_factory=list)  # each run's p95, when repeated


def nfcorpus_test_queries(dataset: Path) -> list[str]:
    """The texts of the queries judged in qrels/test.tsv, in qrels order."""
    try:
        with (dataset / "queries.jsonl").open(encoding="utf-8") as q, \
                (dataset / "qrels" / "test.tsv").open(encoding="utf-8", newline="") as r:
            texts, judged = read_queries(q), read_qrels(r)
    except FileNotFoundError as exc:
        raise BenchmarkError(f"no such file: {exc.filename}") from None
    return [texts[query_id] for query_id in judged if query_id in texts]


def _latency_report(catalog: Catalog, mode: str, latencies: list[float], passes: list[int]) -> LatencyReport:
    return LatencyReport(
        catalog=catalog.slug, chunks=catalog.chunk_count, mode=mode, queries=len(latencies),
        p50_ms=percentile(latencies, 50), p95_ms=percentile(latencies, 95), mean_ms=statistics.fmean(latencies),
        bm25_passes=statistics.fmean(passes) if mode in ("bm25", "hybrid") else None,
    )


def search_latency(*, catalog: Catalog, mode: str, queries: list[str], warmup: int = 20,
                   top_k: int = 10) -> LatencyReport:
    """Wall time of chunk_search per query (query embedding included), after `warmup` queries."""
    options = SearchOptions(mode=mode, top_k=top_k)
    for query in queries[:warmup]:
        chunk_search(catalog=catalog, query=query, options=options)
    latencies, passes = [], []
    for query in queries:
        started = time.perf_counter()
        result = chunk_search(catalog=catalog, query=query, options=options)
        latencies.append((time.perf_counter() - started) * 1000)
        passes.append(result.bm25_passes)
    return _latency_report(catalog, mode, latencies, passes)


def embed_latency(*, catalog: Catalog, queries: list[str], warmup: int = 20) -> LatencyReport:
    """The query-embedding share of vector and hybrid latency, timed alone."""
    for query in queries[:warmup]:
        embed_query(query)
    latencies = []
    for query in queries:
        started = time.perf_counter()
        embed_query(query)
        latencies.append((time.perf_counter() - started) * 1000)
    return _latency_report(catalog, "embed-only", latencies, [])


def catalog_latencies(*, catalog: Catalog, queries: list[str]) -> list[LatencyReport]:
    """One run: query embedding alone, then each search mode."""
    reports = [embed_latency(catalog=catalog, queries=queries)]
    return reports + [search_latency(catalog=catalog, mode=mode, queries=queries) for mode in SEARCH_MODES]


def median_report(runs: list[LatencyReport]) -> LatencyReport:
    """Repeated runs of one catalog and mode as one report: the median of each figure."""
    def middle(name: str) -> float:
        return statistics.median(float(getattr(run, name)) for run in runs)

    return replace(runs[0], p50_ms=middle("p50_ms"), p95_ms=middle("p95_ms"), mean_ms=middle("mean_ms"),
                   p95_runs=[run.p95_ms for run in runs])


@dataclass
class SearchBenchmark:
    chunks: int
    build_s: float | None
    reports: list[LatencyReport]
    targets_p95_ms: dict[str, float] = field(default_factory=lambda: {"bm25": 20.0, "vector": 15.0, "hybrid": 40.0})

    def missed(self) -> list[LatencyReport]:
        """The reports on the synthetic catalog whose p95 is over its target."""
        return [r for r in self.reports if r.chunks == self.chunks and r.mode in self.targets_p95_ms
                and r.p95_ms > self.targets_p95_ms[r.mode]]


def search_benchmark(*, chunks: int, base_slug: str, dataset: Path, rebuild: bool, repeat: int, seed: int = 42,
                     sigma: float = 0.02, wait_timeout_s: float = 7200, defer_hnsw: bool = False,
                     log: Log) -> SearchBenchmark:
    """Latency on the base catalog and on a synthetic `bench-<chunks>` one, each figure
    the median of `repeat` runs; see the module docstring."""
    queries = nfcorpus_test_queries(dataset)
    base = base_wait(slug=base_slug, poll_s=30, timeout_s=wait_timeout_s, log=log)
    bench, build_s = bench_catalog_ensure(base=base, chunks=chunks, rebuild=rebuild, seed=seed, sigma=sigma, log=log,
                                          defer_hnsw=defer_hnsw)
    if get_embedder() is None:
        raise BenchmarkError("no embedding model loaded: vector and hybrid latency cannot be measured")
    runs: dict[tuple[str, str], list[LatencyReport]] = {}
    for round_ in range(1, repeat + 1):
        for catalog in (base, bench):
            for report in catalog_latencies(catalog=catalog, queries=queries):
                runs.setdefault((report.catalog, report.mode), []).append(report)
                log(f"  run {round_}: {catalog.slug} {report.mode} p50 {report.p50_ms:.1f} ms, "
                    f"p95 {report.p95_ms:.1f} ms")
    return SearchBenchmark(chunks, build_s, [median_report(r) for r in runs.values()])


# --- indexing throughput ------------------------------------------------------------------


class BareOnnx:
    """The minimal inference loop: tokenizer, per-batch padding, ONNX, mean pooling."""

    def __init__(self, *, threads: int, batch_size: int) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        files = default_model_files()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(files.model), options, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.tokenizer = Tokenizer.from_file(str(files.tokenizer))
        self.tokenizer.no_padding()  # tokenizer.json pads to 128 and truncates at 128
        self.tokenizer.enable_truncation(max_length=files.max_tokens)
        self.batch_size = batch_size

    def embed(self, texts: list[str]) -> np.ndarray:
        ordered = sorted(texts, key=len)
        return np.vstack([self._batch(ordered[lo : lo + self.batch_size])
                          for lo in range(0, len(ordered), self.batch_size)])

    def _batch(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(texts), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        outputs = self.session.run(None, {k: v for k, v in feeds.items() if k in self.inputs})
        hidden = np.asarray(outputs[0], dtype=np.float32)  # the model's dense float32 output, as is
        pooled = (hidden * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        # numpy's stubs type this arithmetic as Any
        unit: np.ndarray = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        return unit


@dataclass
class IndexBenchmark:
    documents: int
    chunks: int
    threads: int
    batch_size: int
    pipeline_chunks_per_s: list[float]
    bare_chunks_per_s: list[float]
    pipeline_stages_s: dict[str, float] = field(default_factory=dict)  # median seconds per pipeline stage

    @property
    def pipeline_median(self) -> float:
        return statistics.median(self.pipeline_chunks_per_s)

    @property
    def bare_median(self) -> float:
        return statistics.median(self.bare_chunks_per_s)

    @property
    def ratio(self) -> float:
        return self.pipeline_median / self.bare_median

    @property
    def paired_ratio(self) -> float:
        """The median of each round's A/B: steadier than `ratio` when load drifts between rounds."""
        return statistics.median(a / b for a, b in zip(self.pipeline_chunks_per_s, self.bare_chunks_per_s,
                                                       strict=True))

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "pipeline_median": self.pipeline_median, "bare_median": self.bare_median,
                "ratio": self.ratio, "paired_ratio": self.paired_ratio}


def corpus_head(dataset: Path, documents: int) -> list[DocumentInput]:
    """The first `documents` corpus documents, parsed as the importer parses them."""
    try:
        with (dataset / "corpus.jsonl").open(encoding="utf-8") as handle:
            lines = [line for _, line in zip(range(documents), handle, strict=False)]
    except FileNotFoundError as exc:
        raise BenchmarkError(f"no such file: {exc.filename}") from None
    return parse_beir_jsonl(lines)


def index_catalog_fresh() -> Catalog:
    """An empty `bench-index` catalog, so that the next import indexes every document."""
    existing = Catalog.objects.filter(slug="bench-index").first()
    if existing is not None:
        bench_catalog_drop(existing)
    catalog = Catalog(slug="bench-index", name="Benchmark: indexing throughput")
    catalog.full_clean()
    catalog.save()
    return catalog


def pipeline_run(*, documents: list[DocumentInput]) -> tuple[list[str], IndexRun, float]:
    """Import `documents` into a fresh catalog: (the texts embedded, in chunk order; the run; chunks/s)."""
    catalog = index_catalog_fresh()
    started = time.perf_counter()
    run = source_import(catalog=catalog, slug="throughput", documents=documents, trigger=IndexRun.Trigger.COMMAND)
    elapsed = time.perf_counter() - started
    if run.status != IndexRun.Status.SUCCEEDED:
        raise BenchmarkError(f"import run {run.pk} {run.status}: {run.error}")
    chunks = Chunk.objects.filter(source=run.source).order_by("id").only("heading", "content")
    return [chunk.indexed_text for chunk in chunks], run, run.counts["chunks_written"] / elapsed


def embedding_cache_evict(*, model: str, texts: list[str]) -> None:
    """Forget cached vectors of `texts`, so that the next import embeds them all again."""
    digests = [text_sha256(text) for text in texts]
    EmbeddingCache.objects.filter(model=model, text_sha256__in=digests).delete()


def bare_run(model: BareOnnx, texts: list[str]) -> float:
    started = time.perf_counter()
    model.embed(texts)
    return len(texts) / (time.perf_counter() - started)


def index_benchmark(*, dataset: Path, documents: int, rounds: int, log: Log) -> IndexBenchmark:
    """A/B rounds of the full pipeline and the bare loop; see the module docstring.

    Each import goes into a fresh catalog. An untimed first one warms both models and
    the tables and yields the chunk texts; before each timed one their cached vectors
    are evicted, so that it embeds every chunk as a first import does.
    """
    docs = corpus_head(dataset, documents)
    embedder = get_embedder()
    if embedder is None:
        raise BenchmarkError("no embedding model loaded: indexing throughput needs one")
    threads, batch = settings.LECTERN_EMBEDDING_THREADS, settings.LECTERN_EMBEDDING_BATCH
    bare = BareOnnx(threads=threads, batch_size=batch)
    texts, _, _ = pipeline_run(documents=docs)
    bare.embed(texts[: batch * 4])
    pipeline, plain, stages = [], [], []
    for round_ in range(1, rounds + 1):
        embedding_cache_evict(model=embedder.model_id, texts=texts)
        texts, run, rate = pipeline_run(documents=docs)
        if run.counts["chunks_reused"] or run.counts["chunks_written"] != len(texts):
            raise BenchmarkError(f"round {round_} embedded {run.counts['chunks_embedded']} of "
                                 f"{len(texts)} chunks; every chunk must be embedded afresh")
        pipeline.append(rate)
        stages.append(run.timings)
        plain.append(bare_run(bare, texts))
        log(f"  round {round_}: pipeline {pipeline[-1]:.1f} chunks/s, bare onnx {plain[-1]:.1f} chunks/s")
    medians = {stage: statistics.median(t[stage] for t in stages) for stage in stages[0]}
    return IndexBenchmark(len(docs), len(texts), threads, batch, pipeline, plain, medians)


# --- the machine --------------------------------------------------------------------------


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
