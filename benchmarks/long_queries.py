"""The measurement behind `python -m benchmarks bench_query`: search latency for long queries.

An agent may search with a whole passage (a tool result, an argument) to find where it
comes from. The benchmark:
  1. builds `passages` queries of `chars` characters each from the catalog's own
     source (NFCorpus corpus.jsonl): consecutive documents from a random start (seed),
     joined and cut at a word boundary, remembering which documents they hold
  2. per mode, after a warm-up, times chunk_search over them (top_k 10), and records
     the distinct BM25 terms, the SQL passes, what the model read, and whether the best
     hit is one of the passage's own documents ("found")
  3. times the stages of the lexical side alone (analysis with the term lookup, the
     BM25 SQL) and the query embedding

`merged_terms_max` overrides lexical.MERGED_TERMS_MAX for the run, to compare the
two ways of walking postings (0: every query joined; a large number: every query
merged range by range, as before long queries).
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from catalog.embedder import word_prefix
from catalog.models import Catalog
from retrieval.evaluation.metrics import percentile
from retrieval.search import lexical
from retrieval.search.selectors import FUSION_DEPTH, SearchOptions, chunk_search
from retrieval.search.vector import embed_query

MODES = ("bm25", "vector", "hybrid", "bm25_tiebreak")


@dataclass(frozen=True)
class Passage:
    text: str
    documents: frozenset[str]


def corpus_passages(corpus: Path, *, chars: int, count: int, seed: int) -> list[Passage]:
    """`count` passages of about `chars` characters (cut at a word), each of consecutive
    corpus documents (title, then text) from a random start."""
    rows = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    rng = random.Random(seed)
    passages = []
    for _ in range(count):
        start, parts, ids, length = rng.randrange(len(rows)), [], set(), 0
        for row in rows[start:] + rows[:start]:
            if length >= chars:
                break
            part = f"{row.get('title') or ''}\n\n{row.get('text') or ''}".strip()
            parts.append(part)
            ids.add(row["_id"])
            length += len(part) + 2
        passages.append(Passage(word_prefix("\n\n".join(parts), chars), frozenset(ids)))
    return passages


@dataclass
class ModeReport:
    mode: str
    queries: int
    p50_ms: float
    p95_ms: float
    mean_ms: float
    found: float  # share of passages whose best hit is one of their own documents
    bm25_passes: float


@dataclass
class QueryBenchmark:
    catalog: str
    chunks: int
    chars: int
    passages: int
    mean_chars: float
    mean_terms: float  # distinct analysed terms found in the catalog
    vector_chars: float  # mean characters the model read
    merged_terms_max: int
    modes: list[ModeReport]
    stages_p50_ms: dict[str, float]

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@contextmanager
def merged_terms_max(value: int | None) -> Iterator[int]:
    saved = lexical.MERGED_TERMS_MAX
    lexical.MERGED_TERMS_MAX = saved if value is None else value
    try:
        yield lexical.MERGED_TERMS_MAX
    finally:
        lexical.MERGED_TERMS_MAX = saved


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _mode_report(catalog: Catalog, mode: str, passages: list[Passage], warmup: int) -> ModeReport:
    options = SearchOptions(mode=mode, top_k=10)
    for passage in passages[:warmup]:
        chunk_search(catalog=catalog, query=passage.text, options=options)
    latencies, found, passes = [], 0, []
    for passage in passages:
        started = time.perf_counter()
        result = chunk_search(catalog=catalog, query=passage.text, options=options)
        latencies.append(_ms_since(started))
        found += bool(result.hits) and result.hits[0].document_id in passage.documents
        passes.append(result.bm25_passes)
    return ModeReport(mode, len(passages), percentile(latencies, 50), percentile(latencies, 95),
                      statistics.fmean(latencies), found / len(passages), statistics.fmean(passes))


def _stages(catalog: Catalog, passages: list[Passage]) -> dict[str, float]:
    """Medians of the lexical stages and of the embedding, each timed on its own."""
    analyse, walk, embed = [], [], []
    for passage in passages:
        started = time.perf_counter()
        terms = lexical.bm25_terms(catalog, passage.text)
        analyse.append(_ms_since(started))
        started = time.perf_counter()
        lexical.bm25_top(catalog, terms, FUSION_DEPTH)
        walk.append(_ms_since(started))
        started = time.perf_counter()
        embed_query(passage.text)
        embed.append(_ms_since(started))
    return {"analyse+terms": statistics.median(analyse),
            f"bm25 sql (depth {FUSION_DEPTH})": statistics.median(walk),
            "embed": statistics.median(embed)}


def query_benchmark(*, catalog: Catalog, corpus: Path, chars: int, passages: int, seed: int,
                    merged_max: int | None = None, warmup: int = 3,
                    log: Callable[[str], None] = print) -> QueryBenchmark:
    texts = corpus_passages(corpus, chars=chars, count=passages, seed=seed)
    terms = [len(lexical.bm25_terms(catalog, p.text)) for p in texts]
    read = [embed_query(p.text)[1] for p in texts]
    with merged_terms_max(merged_max) as used:
        reports = []
        for mode in MODES:
            reports.append(_mode_report(catalog, mode, texts, warmup))
            log(f"  {mode}: p50 {reports[-1].p50_ms:.1f} ms")
        stages = _stages(catalog, texts)
    return QueryBenchmark(catalog.slug, catalog.chunk_count, chars, len(texts),
                          statistics.fmean(len(p.text) for p in texts), statistics.fmean(terms),
                          statistics.fmean(read), used, reports, stages)
