"""The measurement behind `python -m benchmarks bench --index`: indexing throughput.

The full import pipeline (chunk, count tokens, embed, write) against a bare ONNX
Runtime loop over the same chunk texts, alternating the two so that machine noise hits
both alike. The embedding cache is emptied of those texts before each import, so the
pipeline embeds every chunk.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from django.conf import settings

from benchmarks.common import BenchmarkError, Log
from benchmarks.synthetic import BENCH_NAME, bench_catalog_drop
from catalog.embedder import default_model_files, get_embedder
from catalog.indexing.runs import source_import
from catalog.models import Catalog, Chunk, EmbeddingCache, IndexRun
from catalog.sources.beir import parse_beir_jsonl
from catalog.sources.documents import DocumentInput
from catalog.sources.fingerprints import text_sha256


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
    catalog = Catalog(slug="bench-index", name=f"{BENCH_NAME}indexing throughput")
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
