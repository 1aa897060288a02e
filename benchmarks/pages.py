"""Server time of every page a person opens, on a catalog of 100 sources and about
10,000 chunks (issue 13: each within 200 ms).

The catalog `bench-pages` holds NFCorpus documents spread over 100 upload sources,
chunked at 500 characters and indexed through the real write path (embeddings
included), a catalog policy with ten agents' requests pending, approved and decided
over its sources (so the queue, histories and audit log have pages of rows), and a
trace per agent. Each page is fetched in-process by a signed-in curator and reviewer
through the whole Django stack (middleware, session, view, template): what a server
spends on it, without the network. Pages are fetched in rounds, each round every page
once in a rotated order (the machine is shared), and each figure is over all rounds.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.db.models import Exists, OuterRef
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from approvals.models import ApprovalPolicy, ApprovalRequest
from approvals.services.decisions import request_decide
from approvals.services.policies import policy_create
from benchmarks.common import BenchmarkError, Log, bench_person
from catalog.agents import agent_token_rotate
from catalog.auth import CURATOR_GROUP, REVIEWER_GROUP
from catalog.indexing.runs import index_run_create, index_run_execute
from catalog.indexing.source_index import source_index
from catalog.models import Agent, Catalog, IndexRun, ReferenceSource
from catalog.sources.documents import DocumentInput
from catalog.sources.editing import upload_source_ensure, uploads_replace
from retrieval.enrichment.caller import Caller
from retrieval.enrichment.pipeline import enrich
from retrieval.evaluation.metrics import percentile
from retrieval.evaluation.query_sets import query_set_create
from retrieval.evaluation.runs import evaluation_execute
from retrieval.models import EvaluationRun, EvaluationSet, Trace

SLUG = "bench-pages"
SOURCES = 100
AGENTS = tuple(f"bench-pages-agent-{i:02d}" for i in range(1, 11))
PERSON = "bench-pages-person"  # holds both roles: sees every page
EVALUATION_QUERIES = 50  # NFCorpus test queries in the pages catalog's evaluation run


@dataclass
class World:
    catalog: Catalog
    source: ReferenceSource
    agent: Agent
    request_id: int
    trace_id: str = ""
    evaluation: int = 0  # a succeeded evaluation run of the catalog
    run: int = 0  # an index run of the world's source


@dataclass
class PageTiming:
    page: str
    url: str
    status: int
    p50_ms: float
    p95_ms: float
    max_ms: float
    queries: int


def _corpus(dataset: Path) -> list[dict[str, Any]]:
    with (dataset / "corpus.jsonl").open(encoding="utf-8") as lines:
        return [row for line in lines if (row := json.loads(line)).get("text")]


def pages_catalog_ensure(*, dataset: Path, sources: int, documents: int | None, log: Log) -> Catalog:
    """The catalog of `sources` upload sources over the NFCorpus corpus (its first
    `documents`; None: all of it), built once."""
    slug = SLUG if sources == SOURCES and documents is None else f"{SLUG}-{sources}-{documents}"
    catalog, _ = Catalog.objects.get_or_create(slug=slug, defaults={
        "name": "Pages benchmark", "description": f"{sources} sources of NFCorpus documents", "chunk_size": 500,
        "chunk_overlap": 50})
    if catalog.sources.filter(status=ReferenceSource.Status.READY).count() == sources:
        return catalog
    rows = _corpus(dataset)[:documents]
    if len(rows) < sources:
        raise BenchmarkError(f"{dataset} has only {len(rows)} documents")
    log(f"building {slug}: {len(rows)} NFCorpus documents over {sources} sources")
    started = time.perf_counter()
    for i in range(sources):
        source = upload_source_ensure(catalog=catalog, slug=f"shelf-{i:03d}")
        uploads_replace(source=source, documents=[
            DocumentInput(f"{row['_id']}.md", row.get("title") or row["_id"], row["text"], len(row["text"].encode()))
            for row in rows[i::sources]])
        source_index(source=source)
        if (i + 1) % 10 == 0:
            log(f"  {i + 1}/{sources} sources, {time.perf_counter() - started:.0f} s")
    catalog.refresh_from_db()
    return catalog


def governance_ensure(*, catalog: Catalog, person: User, log: Log) -> World:
    """A catalog policy, and each agent's request for every source: most pending, some
    approved and rejected through the decide service (so the audit log has them)."""
    agents = [agent_token_rotate(name=name, catalogs=[catalog], is_active=True)[0] for name in AGENTS]
    if not ApprovalPolicy.objects.filter(catalog=catalog).exists():
        policy_create(by=person, catalog=catalog, description="bench_pages: every source needs approval")
    sources = list(catalog.sources.order_by("slug"))
    if ApprovalRequest.objects.filter(source__catalog=catalog).count() < len(agents) * len(sources):
        log(f"raising {len(agents) * len(sources)} requests")
        ApprovalRequest.objects.bulk_create(
            [ApprovalRequest(source=source, agent=agent, fingerprint=source.fingerprint, raised_via="search",
                             context=f"search: {source.name}") for agent in agents for source in sources],
            ignore_conflicts=True)
        decided = min(200, len(agents) * len(sources) // 5)  # a fifth, at most 200: the rest stay pending
        for number, pk in enumerate(ApprovalRequest.objects.filter(source__catalog=catalog, state="pending")
                                    .order_by("pk").values_list("pk", flat=True)[:decided]):
            request_decide(request_id=pk, reviewer=person, verdict="approve" if number % 4 else "reject",
                           comment="bench_pages")
    pending = ApprovalRequest.objects.filter(source__catalog=catalog, state="pending").order_by("pk").first()
    if pending is None:
        raise BenchmarkError("no pending request left in the pages catalog")
    return World(catalog, pending.source, pending.agent, pending.pk)


PROMPT = ("My mother was told her vitamin D is low; does that raise her risk of fractures and should she take "
          "supplements?")


def traces_ensure(*, world: World, log: Log) -> World:
    """A prompt enriched by each agent through the real pipeline (its trace stored, as
    an agent's call stores it): the traces pages' rows."""
    agents = list(Agent.objects.filter(name__in=AGENTS).order_by("name"))
    missing = [agent for agent in agents if not Trace.objects.filter(agent=agent).exists()]
    if missing:
        log(f"enriching a prompt as {len(missing)} agents")
    for agent in missing:
        enrich(caller=Caller.of(agent), text=PROMPT, surface=Trace.Surface.PROMPT)
    trace = Trace.objects.filter(agent=world.agent).order_by("-created_at").first()
    if trace is None:
        raise BenchmarkError(f"no trace of {world.agent.name}")
    world.trace_id = str(trace.pk)
    return world


def evaluation_ensure(*, catalog: Catalog, dataset: Path, person: User, log: Log) -> int:
    """A succeeded evaluation run of the catalog (bm25, vector, hybrid) on the first
    EVALUATION_QUERIES NFCorpus test queries, their judged ids named as the catalog's
    documents are (`<_id>.md`); built once, through the worker's own code."""
    done = EvaluationRun.objects.filter(catalog=catalog, status=EvaluationRun.Status.SUCCEEDED).order_by("-pk")
    if (found := done.values_list("pk", flat=True).first()) is not None:
        return found
    name = f"{catalog.slug}-nfcorpus"
    query_set = EvaluationSet.objects.filter(catalog=catalog, name=name).first()
    if query_set is None:
        with (dataset / "qrels" / "test.tsv").open(encoding="utf-8") as lines:
            rows = [line.rstrip("\n").split("\t") for line in lines][1:]
        judged = list(dict.fromkeys(row[0] for row in rows))[:EVALUATION_QUERIES]
        with (dataset / "queries.jsonl").open(encoding="utf-8") as lines:
            queries = [line for line in lines if json.loads(line)["_id"] in judged]
        qrels = "".join(f"{q}\t{d}.md\t{g}\n" for q, d, g in rows if q in judged)
        query_set = query_set_create(catalog=catalog, name=name, queries="".join(queries), qrels=qrels,
                                     by=person.username)
    log(f"evaluating {catalog.slug} on {query_set.query_count} NFCorpus queries")
    run = EvaluationRun.objects.create(catalog=catalog, query_set=query_set, modes=["bm25", "vector", "hybrid"],
                                       queries_total=query_set.query_count * 3, created_by=person.username)
    evaluation_execute(run_id=run.pk)  # here, not queued: what the worker runs
    run.refresh_from_db()
    if run.status != EvaluationRun.Status.SUCCEEDED:
        raise BenchmarkError(f"the pages catalog's evaluation failed: {run.error}")
    return run.pk


def runs_ensure(*, world: World, log: Log) -> World:
    """An index run of every source (the runs pages' rows), each executed as the worker
    executes it: nothing changed, so each finds its documents unchanged."""
    sources = list(world.catalog.sources.exclude(Exists(IndexRun.objects.filter(source=OuterRef("pk")))))
    if sources:
        log(f"running an index run of {len(sources)} sources")
    for source in sources:
        index_run_execute(run_id=index_run_create(source=source, trigger="bench_pages").pk)
    run = IndexRun.objects.filter(source=world.source).order_by("-pk").first()
    if run is None:
        raise BenchmarkError(f"no index run of {world.source.slug}")
    world.run = run.pk
    return world


def page_urls(world: World) -> dict[str, str]:
    """Every page a person opens, by name, with its arguments from the world."""
    catalog, source, agent = world.catalog, world.source, world.agent
    playground = reverse("playground")
    search = urlencode({"kind": "search", "catalog": catalog.slug, "text": "vitamin d deficiency", "mode": "hybrid",
                        "top_k": 10})
    in_catalog, in_source = [catalog.slug], [catalog.slug, source.slug]
    return {
        "catalogs": reverse("catalogs-list"),
        "catalog": reverse("catalogs-detail", args=in_catalog),
        "catalog, filtered": reverse("catalogs-detail", args=in_catalog) + "?q=shelf-0&kind=upload&status=ready",
        "catalog, new": reverse("catalogs-create"),
        "catalog, edit": reverse("catalogs-edit", args=in_catalog),
        "catalog's runs": reverse("catalogs-runs", args=in_catalog),
        "index run": reverse("catalogs-run", args=[catalog.slug, world.run]),
        "source": reverse("catalogs-source", args=in_source),
        "source, chunks page 3": reverse("catalogs-source", args=in_source) + "?chunks=3",
        "source, new (upload)": reverse("catalogs-source-create", args=in_catalog) + "?kind=upload",
        "source, edit": reverse("catalogs-source-edit", args=in_source),
        "agents": reverse("agents-list"),
        "agent": reverse("agents-page", args=[agent.pk]),
        "agent, new": reverse("agents-new"),
        "status": reverse("status-page"),
        "playground": playground,
        "playground, search as an agent": f"{playground}?{search}&agent={agent.name}",
        "playground, search as a person": f"{playground}?{search}",
        "playground, prompt as an agent": f"{playground}?" + urlencode({"kind": "prompt", "agent": agent.name,
                                                                        "text": PROMPT}),
        "traces": reverse("traces-list"),
        "traces, filtered": reverse("traces-list") + f"?agent={agent.name}&withheld=yes",
        "trace": reverse("traces-page", args=[world.trace_id]),
        "approvals queue": reverse("approvals-queue"),
        "approvals queue, filtered": reverse("approvals-queue") + f"?state=&catalog={catalog.slug}&q=search",
        "approval request": reverse("approvals-request", args=[world.request_id]),
        "source history": reverse("approvals-source-history", args=[catalog.slug, source.slug]),
        "agent history": reverse("approvals-agent-history", args=[world.agent.pk]),
        "audit log": reverse("audit-log"),
        "evaluations": reverse("evaluations-list"),
        "evaluation run": reverse("evaluations-run", args=[world.evaluation]),
        "evaluation, two modes compared": reverse("evaluations-run", args=[world.evaluation])
        + "?a=bm25&b=hybrid&metric=recall_at_100",
    }


def _fetch(client: Client, url: str) -> tuple[float, int, int]:
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        response = client.get(url)
        elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise BenchmarkError(f"{url} answered {response.status_code}")
    return elapsed, response.status_code, len(queries)


def pages_benchmark(*, dataset: Path, rounds: int, warmup: int, log: Log, sources: int = SOURCES,
                    documents: int | None = None,
                    urls: Callable[[World], dict[str, str]] = page_urls) -> dict[str, Any]:
    catalog = pages_catalog_ensure(dataset=dataset, sources=sources, documents=documents, log=log)
    person = bench_person(PERSON, CURATOR_GROUP, REVIEWER_GROUP)
    world = traces_ensure(world=governance_ensure(catalog=catalog, person=person, log=log), log=log)
    world = runs_ensure(world=world, log=log)
    world.evaluation = evaluation_ensure(catalog=catalog, dataset=dataset, person=person, log=log)
    if not connection.in_atomic_block:  # steady state: what autovacuum gives tables after a bulk write
        with connection.cursor() as cursor:
            cursor.execute("VACUUM (ANALYZE) catalog_referencesource, catalog_document, catalog_chunk, "
                           "approvals_approvalrequest, approvals_auditentry")
    if not settings.DEBUG and "Manifest" in settings.STORAGES["staticfiles"]["BACKEND"]:
        call_command("collectstatic", interactive=False, verbosity=0)  # as served: hashed names from the manifest
    client = Client()
    client.force_login(person)
    pages = urls(world)
    for url in pages.values():
        for _ in range(warmup):
            _fetch(client, url)
    timings: dict[str, list[float]] = {name: [] for name in pages}
    queries: dict[str, int] = {}
    statuses: dict[str, int] = {}
    names = list(pages)
    for round_no in range(rounds):
        shift = round_no % len(names)
        for name in names[shift:] + names[:shift]:
            elapsed, statuses[name], queries[name] = _fetch(client, pages[name])
            timings[name].append(elapsed)
    results = [PageTiming(page=name, url=pages[name], status=statuses[name],
                          p50_ms=round(statistics.median(timings[name]), 1),
                          p95_ms=round(percentile(timings[name], 95), 1), max_ms=round(max(timings[name]), 1),
                          queries=queries[name]) for name in names]
    return {"catalog": catalog.slug, "sources": catalog.sources.count(), "chunks": catalog.chunk_count,
            "requests": ApprovalRequest.objects.filter(source__catalog=catalog).count(), "rounds": rounds,
            "pages": [result.__dict__ for result in results]}
