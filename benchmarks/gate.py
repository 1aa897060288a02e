"""What the approval gate costs the agent's read paths: enrich and search with the gate
on against the same calls with it off, side by side.

The catalog is the enrich benchmark's `bench-enrich-<N>` (N NFCorpus references,
benchmarks.enrich). Ten agents read it; each holds an approved request for every
source's current fingerprint, so N sources give 10 N approvals in the table (10,000
for the issue's 1,000 sources). "On" is one catalog policy for every agent (one
approval, a year's lifetime, so the lifetime test runs too), created and deleted
through the policy services between configurations; "off" is no policy at all. With
every source approved for the measured agent, both configurations must give the same
answers, which the benchmark checks: only the gate's work differs.

Each configuration runs in rounds ordered A B B A (then again), every call through the
whole DRF stack in-process (token auth, validation, the gate, the trace write); each
figure is the median over rounds, the ratio on/off is taken of those medians.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from approvals.models import ApprovalPolicy, ApprovalRequest
from approvals.services.policies import policy_create, policy_delete
from benchmarks.common import BenchmarkError, Log, bench_person, nfcorpus_test_queries
from benchmarks.enrich import enrich_catalog_ensure, tool_results
from catalog.agents import agent_token_rotate
from catalog.auth import CURATOR_GROUP
from catalog.models import Agent, Catalog
from retrieval.evaluation.metrics import percentile

AGENT = "bench-gate-agent"
OTHERS = tuple(f"bench-gate-other-{i:02d}" for i in range(1, 10))
CURATOR = "bench-gate-curator"
SEARCH_MODES = ("bm25", "vector", "hybrid")
Answer = tuple[Any, ...]  # what a call served, compared between gate off and on


@dataclass
class Latency:
    p50_ms: float
    p95_ms: float


def approvals_ensure(*, catalog: Catalog, agents: list[Agent], log: Log) -> int:
    """An approved request of each agent for every source's current fingerprint. Written
    in bulk (the read paths read this table, not the audit log the decide service also
    writes); rebuilt when the catalog's content or the agents changed."""
    sources = list(catalog.sources.values_list("pk", "fingerprint"))
    wanted = len(sources) * len(agents)
    current = ApprovalRequest.objects.filter(agent__in=agents, source__catalog=catalog, state="approved",
                                             approvals__gte=1, expires_at=None)
    live = sum(1 for fingerprint, source_fp in current.values_list("fingerprint", "source__fingerprint")
               if fingerprint == source_fp)
    if live == wanted and current.count() == wanted:
        return wanted
    log(f"writing {wanted} approvals ({len(agents)} agents x {len(sources)} sources)")
    now = timezone.now()
    with transaction.atomic():
        ApprovalRequest.objects.filter(agent__in=agents, source__catalog=catalog).delete()
        ApprovalRequest.objects.bulk_create(
            [ApprovalRequest(source_id=pk, agent=agent, fingerprint=fingerprint, raised_via="manual",
                             state="approved", approvals=1, decided_at=now)
             for agent in agents for pk, fingerprint in sources], batch_size=2000)
    return wanted


class Gate:
    """The catalog policy that turns the gate on, through the services a curator uses."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog, self.curator = catalog, bench_person(CURATOR, CURATOR_GROUP)
        for policy in ApprovalPolicy.objects.filter(catalog=catalog):  # a run cut short left it on
            policy_delete(policy_id=policy.pk, by=self.curator)

    def set(self, on: bool) -> None:
        policy = ApprovalPolicy.objects.filter(catalog=self.catalog).first()
        if on and policy is None:
            policy_create(by=self.curator, catalog=self.catalog, lifetime=timedelta(days=365),
                          description="bench_gate: every source of the catalog needs approval")
        elif not on and policy is not None:
            policy_delete(policy_id=policy.pk, by=self.curator)


def _timed(call: Callable[[str], Any], texts: list[str], warmup: int) -> tuple[Latency, list[Any]]:
    for text in texts[:warmup]:
        call(text)
    latencies, answers = [], []
    for text in texts:
        started = time.perf_counter()
        answers.append(call(text))
        latencies.append((time.perf_counter() - started) * 1000)
    return Latency(p50_ms=percentile(latencies, 50), p95_ms=percentile(latencies, 95)), answers


def _checked(response: Any) -> dict[str, Any]:
    if response.status_code != 200:
        raise BenchmarkError(f"answered {response.status_code}: {response.content[:300]!r}")
    body: dict[str, Any] = response.json()
    return body


def _enrich_answer(body: dict[str, Any]) -> Answer:
    """What an enrich answer served: its text, and each hint's reference and action."""
    refused = [hint["source_id"] for hint in body["hints"] if hint["withheld"]]
    if refused:
        raise BenchmarkError(f"the measured agent was refused {refused!r}")
    return body["text"], tuple((hint["source_id"], hint["injected"]) for hint in body["hints"])


def _search_answer(body: dict[str, Any]) -> Answer:
    if body["withheld"]["count"]:
        raise BenchmarkError(f"the measured agent was refused something: {body['withheld']!r}")
    return tuple(hit["chunk_id"] for hit in body["results"])


def gate_benchmark(*, sources: int, dataset: Path, calls: int, warmup: int, repeat: int,
                   log: Log) -> dict[str, Any]:
    catalog = enrich_catalog_ensure(sources=sources, dataset=dataset, log=log)
    agents, token = [], ""
    for name in (AGENT, *OTHERS):
        agent, issued = agent_token_rotate(name=name, catalogs=[catalog], is_active=True)
        agents.append(agent)
        token = token or issued
    approvals = approvals_ensure(catalog=catalog, agents=agents, log=log)
    if not connection.in_atomic_block:  # steady state: what autovacuum gives tables after a bulk write
        with connection.cursor() as cursor:
            cursor.execute("VACUUM (ANALYZE) catalog_referencesource, approvals_approvalrequest")
    gate = Gate(catalog)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    prompts = nfcorpus_test_queries(dataset)
    prompts = (prompts * (calls // max(len(prompts), 1) + 1))[:calls]
    tools = tool_results(dataset, max(calls // 3, 20))

    def enrich(surface: str) -> Callable[[str], Answer]:
        return lambda text: _enrich_answer(_checked(client.post(
            "/api/v1/enrich", {"text": text, "surface": surface}, format="json")))

    def search(mode: str) -> Callable[[str], Answer]:
        return lambda query: _search_answer(_checked(client.post(
            "/api/v1/search", {"catalog": catalog.slug, "query": query, "mode": mode, "top_k": 10}, format="json")))

    paths: dict[str, tuple[Callable[[str], Answer], list[str]]] = {
        "enrich prompt": (enrich("prompt"), prompts), "enrich tool result": (enrich("tool_result"), tools),
        **{f"search {mode}": (search(mode), prompts) for mode in SEARCH_MODES}}
    enrich("prompt")("warm-up")  # the first call builds the catalog's detection index
    figures: dict[tuple[str, bool], list[Latency]] = {(path, on): [] for path in paths for on in (False, True)}
    answers: dict[tuple[str, bool], list[Any]] = {}
    order = [False, True, True, False] * repeat
    try:
        for step, on in enumerate(order, start=1):
            gate.set(on)
            for path, (call, texts) in paths.items():
                latency, served = _timed(call, texts, warmup)
                figures[(path, on)].append(latency)
                answers.setdefault((path, on), served)
            log(f"  {step}/{len(order)}: gate {'on' if on else 'off'} done")
    finally:
        gate.set(False)
    same: dict[str, bool] = {path: answers[(path, False)] == answers[(path, True)] for path in paths}
    if not all(same.values()):
        raise BenchmarkError(f"the gate changed what an approved agent is served: {same!r}")
    results: dict[str, dict[str, Any]] = {}
    for path in paths:
        without, with_gate = (_median(figures[(path, flag)]) for flag in (False, True))
        results[path] = {"off": without, "on": with_gate,
                         "p95_ratio": round(with_gate["p95_ms"] / without["p95_ms"], 3),
                         "p50_ratio": round(with_gate["p50_ms"] / without["p50_ms"], 3),
                         "p95_by_round": {"off": [f.p95_ms for f in figures[(path, False)]],
                                          "on": [f.p95_ms for f in figures[(path, True)]]}}
    return {"sources": catalog.sources.count(), "chunks": catalog.chunk_count, "agents": len(agents),
            "approvals": approvals, "calls": {path: len(texts) for path, (_, texts) in paths.items()},
            "rounds": len(order), "same_answers": True, "paths": results}


def _median(rounds: list[Latency]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(r.p50_ms for r in rounds), 2),
            "p95_ms": round(statistics.median(r.p95_ms for r in rounds), 2)}
