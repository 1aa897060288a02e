"""Benchmark of POST /api/v1/enrich on a catalog of many references.

The catalog `bench-enrich-<N>` holds N inline references made from NFCorpus
documents (title as name, first sentence as description, 2-4 tags from the title),
indexed through the real write path. Prompts are NFCorpus test queries; tool
results are 4 KB slices of other corpus documents. Each call goes through the whole
DRF stack in-process (token auth, validation, every detection pass, the trace write).
"""

from __future__ import annotations

import json
import re
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
from rest_framework.test import APIClient

from benchmarks.common import BenchmarkError, Log, nfcorpus_test_queries
from catalog.agents import agent_token_rotate
from catalog.embedder import get_embedder
from catalog.indexing.source_index import source_index
from catalog.models import Catalog, ReferenceSource
from catalog.tags import tags_ensure
from retrieval.enrichment import pipeline
from retrieval.enrichment.detection import catalog_index, content_words
from retrieval.models import Trace

AGENT = "bench-enrich-agent"
_WORD = re.compile(r"[a-z][a-z-]{3,}")
_STOP = frozenset("""with from that this into their than what when which while have been does were more most
other over under about after among between during without within study effects effect patients analysis
review trial trials using based among versus high low risk associated association role new""".split())


@dataclass
class EnrichLatency:
    surface: str
    calls: int
    p50_ms: float
    p95_ms: float
    mean_ms: float
    hints_per_call: float
    tag_pass_p50_ms: float
    semantic_pass_p50_ms: float  # embedding the text, then scoring every profile
    embed_p50_ms: float  # the embedding alone


def _corpus(dataset: Path, count: int) -> list[dict[str, Any]]:
    rows = []
    with (dataset / "corpus.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            if row.get("title") and len(row.get("text", "")) > 400:
                rows.append(row)
            if len(rows) == count:
                break
    if len(rows) < count:
        raise BenchmarkError(f"{dataset} has only {len(rows)} usable documents")
    return rows


def _tags_of(title: str) -> list[str]:
    words = [w for w in _WORD.findall(title.lower()) if w not in _STOP]
    tags = list(dict.fromkeys(words))[:3]
    if len(words) >= 2:
        tags.append(f"{words[0]} {words[1]}")
    return tags


def _description(text: str) -> str:
    sentence = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    return sentence[:300]


def enrich_catalog_ensure(*, sources: int, dataset: Path, log: Log) -> Catalog:
    """The benchmark catalog with `sources` indexed references (built once, then reused)."""
    slug = f"bench-enrich-{sources}"
    catalog, _ = Catalog.objects.get_or_create(slug=slug, defaults={"name": f"Enrich benchmark ({sources} sources)"})
    have = catalog.sources.filter(status=ReferenceSource.Status.READY).count()
    if have == sources:
        return catalog
    log(f"building {slug}: {sources} references from {dataset / 'corpus.jsonl'}")
    started = time.perf_counter()
    for i, row in enumerate(_corpus(dataset, sources), start=1):
        source, _ = ReferenceSource.objects.update_or_create(
            catalog=catalog, slug=f"nf-{row['_id'].lower()}",
            defaults={"name": row["title"][:200], "description": _description(row["text"]),
                      "kind": ReferenceSource.Kind.INLINE, "content": row["text"],
                      "mode": ReferenceSource.Mode.SELECTABLE})
        source.tags.set(tags_ensure(names=_tags_of(row["title"])))
        if source.status != ReferenceSource.Status.READY:
            source_index(source=source)
        if i % 100 == 0:
            log(f"  {i}/{sources} references ({time.perf_counter() - started:.0f} s)")
    return catalog


def tool_results(dataset: Path, count: int, size: int = 4096) -> list[str]:
    texts, current = [], ""
    for row in _corpus(dataset, count * 4)[::-1]:
        current += f"{row['title']}\n{row['text']}\n"
        if len(current.encode()) >= size:
            texts.append(current.encode()[:size].decode("utf-8", "ignore"))
            current = ""
        if len(texts) == count:
            break
    return texts


def _measure(client: APIClient, texts: list[str], surface: str, warmup: int) -> EnrichLatency:
    for text in texts[:warmup]:
        client.post("/api/v1/enrich", {"text": text, "surface": surface}, format="json")
    latencies, hints, tag_ms, semantic_ms, embed_ms = [], [], [], [], []
    for text in texts:
        started = time.perf_counter()
        response = client.post("/api/v1/enrich", {"text": text, "surface": surface}, format="json")
        latencies.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            raise BenchmarkError(f"enrich answered {response.status_code}: {response.content[:200]!r}")
        body = response.json()
        hints.append(len(body["hints"]))
    for steps in Trace.objects.filter(caller=AGENT).order_by("-created_at").values_list("steps", flat=True)[
            :len(texts)]:
        by_pass = {step["pass"]: step for step in steps}
        tag_ms.append(by_pass["tag"]["ms"])
        semantic_ms.append(by_pass["semantic"]["ms"])
        if "embed_ms" in by_pass["semantic"]:  # absent where the pass was skipped (no words, no model)
            embed_ms.append(by_pass["semantic"]["embed_ms"])
    latencies.sort()
    return EnrichLatency(surface=surface, calls=len(texts), p50_ms=round(statistics.median(latencies), 2),
                         p95_ms=round(latencies[int(0.95 * (len(latencies) - 1))], 2),
                         mean_ms=round(statistics.fmean(latencies), 2),
                         hints_per_call=round(statistics.fmean(hints), 2),
                         tag_pass_p50_ms=round(statistics.median(tag_ms), 3),
                         semantic_pass_p50_ms=round(statistics.median(semantic_ms), 3),
                         embed_p50_ms=round(statistics.median(embed_ms), 3) if embed_ms else 0.0)


def semantic_self_recall(catalog: Catalog, *, tokens: int, count: int = 300) -> dict[str, float]:
    """How often the semantic pass alone finds a reference from a 4 KB passage of its
    own text that its profile does not hold (the profile ends 600 characters in): the
    reference's rank among all profiles when `tokens` tokens of the passage are embedded."""
    index, embedder = catalog_index(catalog), get_embedder()
    if embedder is None or index.profile_matrix is None:
        raise BenchmarkError("semantic recall needs the embedding model (and profiles embedded with it)")
    sources = [s for s in catalog.sources.order_by("pk").only("slug", "content") if len(s.content) > 1400][:count]
    passages = [content_words(s.content[600:4696], tokens) for s in sources]  # as enrich reads a tool result
    vectors = embedder.embed(passages, max_tokens=tokens)
    scores = vectors @ index.profile_matrix.T
    ranks = np.array([(row > row[index.rows[s.slug]]).sum() + 1 for row, s in zip(scores, sources, strict=True)])
    return {"passages": len(sources), "recall_at_1": round(float((ranks == 1).mean()), 3),
            "recall_at_5": round(float((ranks <= 5).mean()), 3), "mrr": round(float((1 / ranks).mean()), 3)}


def _median_of_rounds(rounds: list[EnrichLatency]) -> dict[str, object]:
    """Each figure as the median over rounds, with every round's p95 kept."""
    merged = {key: value if isinstance(value, str) else round(statistics.median(getattr(r, key) for r in rounds), 3)
              for key, value in asdict(rounds[0]).items()}
    return {**merged, "p95_ms_by_round": [r.p95_ms for r in rounds]}


def enrich_benchmark(*, sources: int, dataset: Path, calls: int, warmup: int, tool_tokens: list[int],
                     repeat: int, log: Log) -> dict[str, Any]:
    """Prompts, and 4 KB tool results once per head length in `tool_tokens`, side by
    side: `repeat` rounds, each running every configuration in a rotated order (this
    machine is shared and noisy), every figure the median over rounds. Each head
    length comes with the semantic recall it buys."""
    catalog = enrich_catalog_ensure(sources=sources, dataset=dataset, log=log)
    _, token = agent_token_rotate(name=AGENT, catalogs=[catalog], is_active=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    started = time.perf_counter()
    client.post("/api/v1/enrich", {"text": "warm-up", "surface": "prompt"}, format="json")
    first_ms = (time.perf_counter() - started) * 1000
    prompts = nfcorpus_test_queries(dataset)
    prompts = (prompts * (calls // max(len(prompts), 1) + 1))[:calls]
    tool_texts = tool_results(dataset, max(calls // 3, 20))
    configs = [("prompt", None), *(("tool_result", tokens) for tokens in tool_tokens)]
    rounds: dict[tuple[str, int | None], list[EnrichLatency]] = {config: [] for config in configs}
    for round_no in range(repeat):
        shift = round_no % len(configs)
        for surface, tokens in configs[shift:] + configs[:shift]:
            texts = prompts if surface == "prompt" else tool_texts
            head = tokens or pipeline.ENRICH_TOOL_EMBED_TOKENS  # enrich reads it at each call
            with mock.patch.object(pipeline, "ENRICH_TOOL_EMBED_TOKENS", head):
                rounds[(surface, tokens)].append(_measure(client, texts, surface, warmup))
        log(f"  round {round_no + 1}/{repeat} done")
    return {"sources": catalog.sources.count(),
            "tags": len({t for s in catalog.sources.prefetch_related("tags") for t in s.tags.all()}),
            "first_call_ms": round(first_ms, 1), "rounds": repeat,
            "prompt": _median_of_rounds(rounds[("prompt", None)]),
            "tool_result_4kb": {tokens: {**_median_of_rounds(rounds[("tool_result", tokens)]),
                                         "semantic_self_recall": semantic_self_recall(catalog, tokens=tokens)}
                                for tokens in tool_tokens}}
