"""Who may use each URL of the project: a table naming every URL the resolver knows, with
the answer each caller gets (anyone not signed in, a person signed in with no role, staff
with no role, a curator, a reviewer, a person with both roles, a superuser, an agent's
token, a curator agent's token), and what each write leaves behind.

- test_every_url_is_in_the_matrix walks django.urls.get_resolver(): a URL the table does
  not name fails it, so a new endpoint cannot ship unchecked. The admin is Django's:
  its index, sign-in and every registered model's changelist are rows (only staff get
  in, staff with no role sees no model); the rest of what admin.site generates per
  model (add, change, delete, history), its own sign-out, password and JavaScript views
  and its catch-all sit behind the same AdminSite.admin_view check and the model's
  permissions, and tests/approvals/test_admin.py walks the governance admin's writes.
  There are no static or media URL patterns: WhiteNoise serves static files outside
  the URLconf, and nothing is uploaded as media.
- test_the_matrix makes every call as every caller: a refusal changes nothing (every
  mutable table is compared before and after), a write that is let through changes
  something (so its body is one a permitted caller succeeds with), an error under /api/
  is the JSON error body, a page refused to someone signed in is the 403 page, and
  anyone not signed in (an agent's token signs no one in on a page) goes to sign in.
- CSRF: every form outside /api/ refuses a POST without the token; every API write
  refuses a session without it (bearer tokens are exempt by design, and so is the
  signed-decision endpoint, which reads no session: the signature is its credential).
- Any other method is a 405, JSON under /api/.
- Every answer, whoever asks and whatever the status, carries the Content-Security-Policy
  (tests/policy.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import quote

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import models
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.test import APIClient

from approvals.channels.models import InboundWebhookMessage, WebhookDelivery, WebhookEndpoint, WebhookEvent
from approvals.models import ApprovalPolicy, ApprovalRequest, ApprovedContent, Decision
from approvals.services.decisions import request_decide
from catalog.models import Agent, AuditEntry, Catalog, Document, IndexRun, ReferenceSource, UploadedFile
from catalog.sources.documents import DocumentInput
from retrieval.citations.grammar import cite_string, fingerprint
from retrieval.evaluation.query_sets import query_set_create
from retrieval.evaluation.runs import evaluation_execute, evaluation_request
from retrieval.models import (
    EvaluationQuery,
    EvaluationRun,
    EvaluationSet,
    Fact,
    MemoryEntry,
    Selection,
    ServedPassage,
    ServedText,
    Trace,
    TuningRun,
)
from tests.approvals.builders import raised
from tests.factories import agent_with_token, import_documents, person
from tests.policy import assert_policy
from tests.retrieval.evaluation.builders import qrels_tsv, queries_jsonl

pytestmark = pytest.mark.django_db

ACTORS = ("anonymous", "nobody", "staff", "curator", "reviewer", "both", "superuser", "agent", "curator_agent")
AGENTS = ("agent", "curator_agent")
LOGIN = "login"  # 302 to the sign-in page, coming back after (?next=)
ADMIN_LOGIN = "admin-login"  # 302 to the admin's sign-in page, coming back after

Expected = int | str
# The whole of notes.md (the world's ungoverned source), cited: it resolves from the
# document as it is, with no trace needed.
NOTES_CITE = cite_string(catalog="kb", source="notes", path="notes.md", start=0, end=13,
                         fingerprint=fingerprint("Plain notes.\n"))


# --- the world every call meets ----------------------------------------------------------


@dataclass
class World:
    catalog: Catalog
    vault: ReferenceSource  # needs an approval
    notes: ReferenceSource  # an upload source, auto: every agent may read it
    intro: ReferenceSource  # an inline source
    people: dict[str, User]
    agents: dict[str, Agent]
    tokens: dict[str, str]
    spare: Agent  # an agent the agent pages edit, rotate and revoke
    pending: int  # the agent's request for vault, pending
    approved: int  # the curator agent's request for vault, approved
    trace: str  # an enrichment trace of the agent
    run: int  # an index run of the catalog
    query_set: int  # an evaluation test set
    evaluation: int  # a succeeded evaluation run of the catalog on it
    tuning: int  # a succeeded tuning run of the catalog on it, with a held-out gain: it may be applied


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker) -> Iterator[World]:
    """Built once for the module inside a transaction rolled back at its end; each test
    runs in a savepoint inside it (as tests/conftest.py's `demo`)."""
    from django.db import transaction

    with django_db_blocker.unblock():
        outer = transaction.atomic()
        outer.__enter__()
        try:
            yield _build_world()
        finally:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


def _build_world() -> World:
    catalog = Catalog.objects.create(slug="kb", name="KB")
    vault = import_documents(catalog=catalog, slug="vault", documents=[
        DocumentInput("rotation.md", "Rotation", "Rotate the vault keys every ninety days.\n", 41)])
    notes = import_documents(catalog=catalog, slug="notes", documents=[
        DocumentInput("notes.md", "Notes", "Plain notes.\n", 13)])
    ReferenceSource.objects.filter(pk=vault.pk).update(requires_approval=True)
    ReferenceSource.objects.filter(pk=notes.pk).update(mode=ReferenceSource.Mode.AUTO)
    intro = ReferenceSource.objects.create(catalog=catalog, slug="intro", name="Intro",
                                           kind=ReferenceSource.Kind.INLINE, content="Welcome.")
    people = {
        "nobody": person("nobody"),
        "staff": person("stan", is_staff=True),
        "curator": person("cora", "curator"),
        "reviewer": person("rita", "reviewer"),
        "both": person("bea", "curator", "reviewer"),
        "superuser": person("sue", is_staff=True, is_superuser=True),
    }
    agent, token = agent_with_token(name="reader-bot", catalogs=[catalog])
    curator_agent, curator_token = agent_with_token(name="curator-bot", catalogs=[catalog], is_curator=True)
    spare = agent_with_token(name="spare-bot", catalogs=[catalog])[0]
    pending = raised(agent, vault, via="enrichment")
    approved = raised(curator_agent, vault)
    request_decide(request_id=approved, reviewer=people["reviewer"], verdict="approve")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    trace = client.post("/api/v1/enrich", {"text": "Plain notes, please.", "surface": "prompt"},
                        format="json").json()["trace_id"]
    run = IndexRun.objects.filter(catalog=catalog).values_list("pk", flat=True).first()
    assert run is not None
    query_set = query_set_create(catalog=catalog, name="kb-questions",
                                 queries=queries_jsonl({"q1": "plain notes", "q2": "welcome"}),
                                 qrels=qrels_tsv([("q1", "notes.md", 1), ("q2", "notes.md", 1)]), by="cora")
    evaluation = evaluation_request(catalog=catalog, query_set=query_set, modes=["bm25", "vector"], by="cora")
    evaluation_execute(run_id=evaluation.pk)
    settings = asdict(catalog.ranking_settings)
    tuning = TuningRun.objects.create(
        catalog=catalog, query_set=query_set, status="succeeded", created_by="cora", current=settings,
        chosen={**settings, "k1": 0.9}, report={"metrics": {"ndcg_at_10": {"current": 0.5, "tuned": 0.6, "gain": 0.1}}})
    return World(catalog=catalog, vault=vault, notes=notes, intro=intro, people=people,
                 agents={"agent": agent, "curator_agent": curator_agent},
                 tokens={"agent": token, "curator_agent": curator_token}, spare=spare, pending=pending,
                 approved=approved,
                 trace=trace, run=run, query_set=query_set.pk, evaluation=evaluation.pk, tuning=tuning.pk)


# Every table a write could touch (Agent.last_used_at moves on each use of a token: not a write).
MUTABLE: tuple[type[models.Model], ...] = (
    Catalog, ReferenceSource, UploadedFile, Document, IndexRun, ApprovalPolicy, ApprovalRequest, Decision,
    ApprovedContent, AuditEntry, WebhookEndpoint, WebhookEvent, WebhookDelivery, InboundWebhookMessage, Selection,
    Trace, User, Agent, Agent.catalogs.through, Agent.preselected.through, EvaluationSet, EvaluationRun,
    EvaluationQuery, TuningRun, Fact, MemoryEntry, ServedPassage, ServedText,
)
NOT_WRITES: dict[type[models.Model], set[str]] = {Agent: {"last_used_at"}}


def snapshot() -> list[list[dict[str, Any]]]:
    return [list(model._default_manager.order_by("pk").values(
        *(f.attname for f in model._meta.concrete_fields if f.attname not in NOT_WRITES.get(model, ()))))
        for model in MUTABLE]


# --- the matrix ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    name: str  # the URL's name
    method: str
    expect: tuple[Expected, ...]  # one per actor, in ACTORS order
    args: Callable[[World], list[Any]] = field(default=lambda world: [])
    query: str = ""
    body: dict[str, Any] | Callable[[World], dict[str, Any]] | None = None
    writes: bool = False  # let through, it changes something

    def __post_init__(self) -> None:
        assert len(self.expect) == len(ACTORS), self.name

    @property
    def id(self) -> str:
        return f"{self.name}-{self.method}"

    def path(self, world: World) -> str:
        return reverse(self.name, args=self.args(world)) + self.query

    def send(self, client: Client, world: World, **extra: Any) -> Any:
        path = self.path(world)
        body = self.body(world) if callable(self.body) else self.body
        if body is None:
            return client.generic(self.method, path, **extra)
        if path.startswith("/api/"):
            return client.generic(self.method, path, json.dumps(body), content_type="application/json", **extra)
        return getattr(client, self.method.lower())(path, body, **extra)


def agent_form(world: World, **fields: Any) -> dict[str, Any]:
    return {"catalogs": [world.catalog.pk], "strategy": "preload", "token_budget": 12000, "default_top_k": 5,
            "semantic_threshold": 0.3, "semantic_margin": 0.1, "max_hints": 5, "rag_relevance_threshold": 0.3,
            "rag_max_results": 3, **fields}


def catalog_slug(world: World) -> list[Any]:
    return [world.catalog.slug]


def source_of(attribute: str) -> Callable[[World], list[Any]]:
    return lambda world: [world.catalog.slug, getattr(world, attribute).slug]


#                 anonymous  nobody  staff  curator  reviewer  both  superuser  agent  curator_agent
EVERYONE_200 = (200,) * 9
SIGNED_IN_200 = (401,) + (200,) * 8
CATALOG_READERS = (401, 404, 404, 200, 200, 200, 200, 200, 200)
CURATORS = (401, 404, 404, 202, 403, 202, 202, 403, 202)  # people or agents marked curator
CURATOR_READS = (401, 404, 404, 200, 403, 200, 200, 403, 200)  # the same, answered 200
PERSON_CURATORS = (401, 404, 404, 200, 403, 200, 200, 403, 403)  # people only
VIEWERS = (LOGIN, 403, 403, 200, 200, 200, 200, LOGIN, LOGIN)  # the reviewer's pages
DECIDERS = (LOGIN, 403, 403, 403, 302, 302, 302, LOGIN, LOGIN)
CURATOR_PAGES = (LOGIN, 403, 403, 200, 403, 200, 200, LOGIN, LOGIN)  # the dashboard: people, curators
CURATOR_WRITES = (LOGIN, 403, 403, 302, 403, 302, 302, LOGIN, LOGIN)
AGENTS_ONLY = (401, 403, 403, 403, 403, 403, 403, 200, 200)
AGENTS_ONLY_CREATE = (401, 403, 403, 403, 403, 403, 403, 201, 201)
AGENTS_ONLY_NONE = (401, 403, 403, 403, 403, 403, 403, 404, 404)
ADMIN_STAFF = (ADMIN_LOGIN, ADMIN_LOGIN, 200, ADMIN_LOGIN, ADMIN_LOGIN, ADMIN_LOGIN, 200, ADMIN_LOGIN, ADMIN_LOGIN)
ADMIN_MODEL = (ADMIN_LOGIN, ADMIN_LOGIN, 403, ADMIN_LOGIN, ADMIN_LOGIN, ADMIN_LOGIN, 200, ADMIN_LOGIN, ADMIN_LOGIN)

CALLS: list[Call] = [
    # --- the agent and reader API (catalog.auth.visible_catalogs: no role, no catalog) ---
    Call("api-health", "GET", EVERYONE_200),
    Call("api-status", "GET", SIGNED_IN_200),  # the embeddings to all; the rest to roles and curator agents
    Call("api-status-reset", "POST", (401, 403, 403, 200, 403, 200, 200, 403, 200), writes=True),  # audited
    Call("api-catalogs", "GET", SIGNED_IN_200),  # no role: an empty list
    Call("api-search", "POST", CATALOG_READERS, body={"catalog": "kb", "query": "plain notes", "mode": "bm25"}),
    Call("api-explain", "POST", CATALOG_READERS,
         body={"catalog": "kb", "query": "plain notes", "mode": "bm25", "source": "notes", "document": "notes.md"}),
    Call("api-explain-enrichment", "POST", SIGNED_IN_200,  # no role: no catalog, so "notes" is no reference
         body={"prompt": "Plain notes, please.", "reference": "notes"}),
    Call("api-search-conversation", "POST", CATALOG_READERS,
         body={"catalog": "kb", "messages": [{"role": "user", "content": "Plain notes, please."}]}),
    Call("api-enrich", "POST", SIGNED_IN_200, body={"text": "Plain notes, please.", "surface": "prompt"}),
    Call("api-enrich-conversation", "POST", SIGNED_IN_200,  # people: no facts or memory, their catalogs' passages
         body={"messages": [{"role": "user", "content": "Plain notes, please."}], "user_id": "steve"}),
    Call("api-references", "GET", SIGNED_IN_200),  # no role: an empty list
    # no role: no catalog, so "notes" is an id nobody has
    Call("api-references-select", "POST", (401, 400, 400, 200, 200, 200, 200, 200, 200), body={"ids": ["notes"]}),
    Call("api-reference-file", "GET", CATALOG_READERS, args=source_of("notes"), query="?path=notes.md"),
    Call("api-trace", "GET", (401, 404, 404, 200, 404, 200, 200, 200, 404),  # the agent's: its own and curators'
         args=lambda world: [world.trace]),
    # curators of the cite's catalog; a curator agent only what the gate lets it read
    Call("api-cite", "GET", CURATOR_READS, query=f"?c={quote(NOTES_CITE)}"),
    Call("api-agent-instructions", "GET", SIGNED_IN_200),
    Call("api-approvals", "GET", (401, 403, 403, 403, 403, 403, 403, 200, 200)),  # an agent's own requests
    # --- facts and memory: an agent's own, per end user (people see them on the agent's page) ---
    Call("api-facts", "GET", AGENTS_ONLY, query="?user_id=steve"),
    Call("api-facts", "PUT", AGENTS_ONLY_CREATE, body={"user_id": "steve", "key": "name", "value": "Steve"},
         writes=True),
    Call("api-facts", "DELETE", AGENTS_ONLY_NONE, query="?user_id=steve&key=nothing"),  # nothing to delete: 404
    Call("api-memory", "GET", AGENTS_ONLY, query="?user_id=steve&q=bees"),
    Call("api-memory", "POST", AGENTS_ONLY_CREATE, body={"user_id": "steve", "content": "Steve keeps bees."},
         writes=True),
    Call("api-memory", "DELETE", AGENTS_ONLY, query="?user_id=steve", writes=True),  # the erasure is audited
    Call("api-memory-export", "GET", AGENTS_ONLY, query="?user_id=steve"),
    # --- evaluations: curators, people or agents (a curator agent within its catalogs) ---
    Call("api-evaluations", "POST", (401, 403, 403, 202, 403, 202, 202, 403, 202), writes=True,
         body=lambda world: {"catalog": "kb", "modes": ["bm25"], "query_set": world.query_set}),
    Call("api-evaluation", "GET", (401, 403, 403, 200, 403, 200, 200, 403, 200), args=lambda world: [world.evaluation]),
    Call("api-tuning-runs", "POST", (401, 403, 403, 202, 403, 202, 202, 403, 202), writes=True,
         body=lambda world: {"catalog": "kb", "query_set": world.query_set, "folds": 2}),
    Call("api-tuning-run", "GET", (401, 403, 403, 200, 403, 200, 200, 403, 200), args=lambda world: [world.tuning]),
    Call("api-tuning-apply", "POST", (401, 403, 403, 200, 403, 200, 200, 403, 200), args=lambda world: [world.tuning],
         writes=True),  # audited
    # --- a catalog's ranking settings: its readers read, curators change (audited) ---
    Call("api-ranking", "GET", CATALOG_READERS, args=catalog_slug),
    Call("api-ranking", "PATCH", CURATOR_READS, args=catalog_slug, body={"k1": 0.9}, writes=True),
    # --- curators: reindex and edit sources ---
    Call("api-reindex", "POST", CURATORS, args=catalog_slug, query="?source=notes", writes=True),
    Call("api-index-run", "GET", CATALOG_READERS, args=lambda world: [world.run]),
    Call("api-source-content", "PUT", CURATORS, args=source_of("intro"), body={"content": "Welcome back."},
         writes=True),
    Call("api-source-files", "PUT", CURATORS, args=source_of("notes"), body={"path": "more.md", "text": "More."},
         writes=True),
    Call("api-source-files", "DELETE", CURATORS, args=source_of("notes"), query="?path=notes.md", writes=True),
    Call("api-sources", "GET", CURATOR_READS, args=catalog_slug),
    Call("api-sources", "POST", CURATORS, args=catalog_slug, writes=True,
         body={"slug": "fresh", "name": "Fresh", "kind": "inline", "content": "New notes."}),
    Call("api-source", "GET", CURATOR_READS, args=source_of("intro")),
    Call("api-source", "PATCH", CURATOR_READS, args=source_of("intro"), body={"description": "Welcome."},
         writes=True),
    # --- the webhook channel: people in the curator group manage it; the signature alone decides ---
    Call("api-webhook-endpoints", "GET", PERSON_CURATORS, args=catalog_slug),
    Call("api-webhook-endpoints", "POST", (401, 404, 404, 201, 403, 201, 201, 403, 403), args=catalog_slug,
         body={"url": "https://hooks.example.com/lectern"}, writes=True),
    Call("api-webhook-deliveries", "GET", PERSON_CURATORS, args=catalog_slug),
    Call("api-approval-decision-signed", "POST", (401,) * 9, args=lambda world: [world.pending],
         body={"verdict": "approve", "reviewer": "rita"}, writes=True),
    # --- the published schema and its viewers: public ---
    Call("api-schema", "GET", EVERYONE_200),
    Call("api-docs", "GET", EVERYONE_200),
    Call("api-redoc", "GET", EVERYONE_200),
    # --- the reviewer's pages: curators and reviewers read, reviewers decide ---
    Call("approvals-queue", "GET", VIEWERS),
    Call("approvals-pending-count", "GET", VIEWERS),
    Call("approvals-request", "GET", VIEWERS, args=lambda world: [world.pending]),
    Call("approvals-source-history", "GET", VIEWERS, args=source_of("vault")),
    Call("approvals-agent-history", "GET", VIEWERS, args=lambda world: [world.agents["agent"].pk]),
    Call("audit-log", "GET", VIEWERS),
    Call("audit-export", "GET", VIEWERS, args=lambda world: ["csv"]),
    Call("approvals-decide", "POST", DECIDERS, args=lambda world: [world.pending],
         body={"verdict": "approve", "comment": "ok"}, writes=True),
    Call("approvals-revoke", "POST", DECIDERS, args=lambda world: [world.approved], body={"reason": "leaked"},
         writes=True),
    Call("approvals-bulk", "POST", (LOGIN, 403, 403, 403, 200, 200, 200, LOGIN, LOGIN),
         body=lambda world: {"ids": [world.pending], "verdict": "reject", "comment": "no"}, writes=True),
    # --- the status page: anyone with a role; its reset: curators ---
    Call("status-page", "GET", VIEWERS),
    Call("status-reset", "POST", CURATOR_WRITES, writes=True),
    # --- the agent pages: curators (people) ---
    Call("agents-list", "GET", CURATOR_PAGES),
    Call("agents-new", "GET", CURATOR_PAGES),
    Call("agents-new", "POST", (LOGIN, 403, 403, 201, 403, 201, 201, LOGIN, LOGIN), writes=True,
         body=lambda world: agent_form(world, name="fresh-bot")),
    Call("agents-pins", "GET", CURATOR_PAGES, query="?catalogs=1"),
    Call("agents-page", "GET", CURATOR_PAGES, args=lambda world: [world.spare.pk]),
    Call("agents-page", "POST", CURATOR_WRITES, args=lambda world: [world.spare.pk], writes=True,
         body=lambda world: agent_form(world, strategy="rag")),
    Call("agents-rotate", "GET", CURATOR_PAGES, args=lambda world: [world.spare.pk]),
    Call("agents-rotate", "POST", CURATOR_PAGES, args=lambda world: [world.spare.pk], writes=True),
    Call("agents-revoke", "GET", CURATOR_PAGES, args=lambda world: [world.spare.pk]),
    Call("agents-revoke", "POST", CURATOR_WRITES, args=lambda world: [world.spare.pk], writes=True),
    Call("agents-memory", "GET", CURATOR_PAGES, args=lambda world: [world.spare.pk]),
    Call("agents-memory-export", "GET", CURATOR_PAGES, args=lambda world: [world.spare.pk], query="?user=steve"),
    Call("agents-memory-erase", "POST", CURATOR_WRITES, args=lambda world: [world.spare.pk], writes=True,  # audited
         body={"user": "steve", "confirm": "steve"}),
    # --- the evaluation pages: curators (people) ---
    Call("evaluations-list", "GET", CURATOR_PAGES),
    Call("evaluations-start", "POST", CURATOR_WRITES, writes=True,
         body=lambda world: {"catalog": "kb", "modes": ["bm25"], "test_set": "stored", "query_set": world.query_set}),
    Call("evaluations-run", "GET", CURATOR_PAGES, args=lambda world: [world.evaluation]),
    Call("evaluations-compare", "GET", CURATOR_WRITES, args=lambda world: [world.evaluation],  # to the run's page
         query="?a=vector&b=bm25&metric=ndcg_at_10"),
    Call("tuning-list", "GET", CURATOR_PAGES),
    Call("tuning-start", "POST", CURATOR_WRITES, writes=True,
         body=lambda world: {"query_set": world.query_set, "folds": 2}),
    Call("tuning-run", "GET", CURATOR_PAGES, args=lambda world: [world.tuning]),
    Call("tuning-apply", "POST", CURATOR_WRITES, args=lambda world: [world.tuning], writes=True),
    # --- the curator's dashboard: curators and reviewers read, curators write ---
    Call("catalogs-list", "GET", VIEWERS),
    Call("catalogs-create", "GET", CURATOR_PAGES),
    Call("catalogs-create", "POST", CURATOR_WRITES, writes=True,
         body={"slug": "fresh", "name": "Fresh", "chunk_size": 1000, "chunk_overlap": 100}),
    Call("catalogs-tag-suggest", "GET", CURATOR_PAGES, query="?tags_new=o"),
    Call("catalogs-tag-chips", "GET", CURATOR_PAGES, query="?tags_new=ops"),
    Call("catalogs-glob-preview", "GET", CURATOR_PAGES, query="?location=*.md"),
    Call("catalogs-detail", "GET", VIEWERS, args=catalog_slug),
    Call("catalogs-edit", "GET", CURATOR_PAGES, args=catalog_slug),
    Call("catalogs-edit", "POST", CURATOR_WRITES, args=catalog_slug, writes=True,
         body={"name": "Knowledge", "description": "", "chunk_size": 1000, "chunk_overlap": 100}),
    Call("catalogs-ranking", "GET", CURATOR_PAGES, args=catalog_slug),
    Call("catalogs-ranking", "POST", CURATOR_WRITES, args=catalog_slug, writes=True,
         body={"mode": "hybrid", "fusion": "rrf", "rrf_k": 30, "bm25_weight": 1, "vector_weight": 1,
               "normalization": "minmax", "k1": 1.2, "b": 0.75, "fusion_depth": 100, "vector_feedback": 0,
               "feedback_weight": 0.5, "bm25_feedback": 0, "bm25_feedback_terms": 10, "bm25_feedback_weight": 0.5}),
    Call("catalogs-delete", "GET", CURATOR_PAGES, args=catalog_slug),
    Call("catalogs-delete", "POST", CURATOR_WRITES, args=catalog_slug, body={"confirm": "kb"}, writes=True),
    Call("catalogs-reindex", "POST", CURATOR_WRITES, args=catalog_slug, body={}, writes=True),
    Call("catalogs-activity", "GET", VIEWERS, args=catalog_slug),
    Call("catalogs-runs", "GET", VIEWERS, args=catalog_slug),
    Call("catalogs-run", "GET", VIEWERS, args=lambda world: [world.catalog.slug, world.run]),
    Call("catalogs-source-create", "GET", CURATOR_PAGES, args=catalog_slug, query="?kind=inline"),
    Call("catalogs-source-create", "POST", CURATOR_WRITES, args=catalog_slug, query="?kind=inline", writes=True,
         body={"slug": "fresh", "name": "Fresh", "mode": "selectable", "content": "Hello."}),
    Call("catalogs-source", "GET", VIEWERS, args=source_of("vault")),
    Call("catalogs-source-edit", "GET", CURATOR_PAGES, args=source_of("notes")),
    Call("catalogs-source-edit", "POST", CURATOR_WRITES, args=source_of("notes"), writes=True,
         body={"name": "Notes", "mode": "selectable", "tags_new": "ops"}),
    Call("catalogs-source-delete", "GET", CURATOR_PAGES, args=source_of("notes")),
    Call("catalogs-source-delete", "POST", CURATOR_WRITES, args=source_of("notes"), body={}, writes=True),
    Call("catalogs-source-reindex", "POST", CURATOR_WRITES, args=source_of("notes"), body={}, writes=True),
    Call("catalogs-source-files", "POST", CURATOR_WRITES, args=source_of("notes"), writes=True,
         body=lambda world: {"uploads": SimpleUploadedFile("more.md", b"More notes.\n")}),
    Call("catalogs-source-file-delete", "POST", CURATOR_WRITES, args=source_of("notes"), body={"path": "notes.md"},
         writes=True),
    # --- the front door: curators to the playground, reviewers to the queue, no role 403 ---
    Call("home", "GET", (LOGIN, 403, 403, 302, 302, 302, 302, LOGIN, LOGIN)),
    # --- the playground and the traces: curators (people); a run writes nothing ---
    Call("playground", "GET", CURATOR_PAGES, query="?kind=search&catalog=kb&agent=reader-bot&text=vault+keys"),
    Call("playground", "POST", CURATOR_PAGES, body={"kind": "prompt", "agent": "reader-bot",
                                                    "text": "Rotate the vault keys, see @vault"}),
    Call("playground-why-not", "POST", CURATOR_PAGES, body={"kind": "search", "catalog": "kb", "agent": "reader-bot",
                                                            "text": "plain notes", "document": "notes/notes.md"}),
    Call("playground-why-not-documents", "GET", CURATOR_PAGES, query="?catalog=kb&document=notes"),
    Call("traces-list", "GET", CURATOR_PAGES, query="?withheld=yes"),
    Call("traces-page", "GET", CURATOR_PAGES, args=lambda world: [world.trace]),
    Call("traces-cite", "GET", CURATOR_PAGES, query=f"?c={quote(NOTES_CITE)}"),
    # --- signing in and out ---
    Call("login", "GET", EVERYONE_200),
    Call("login", "POST", EVERYONE_200, body={"username": "rita", "password": "wrong"}),
    Call("logout", "POST", (302,) * 9),
    # --- the admin (see the module docstring) ---
    Call("admin:index", "GET", ADMIN_STAFF),
    Call("admin:login", "GET", (200, 200, 302, 200, 200, 200, 302, 200, 200)),  # staff: on to the index
    *(Call(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist", "GET", ADMIN_MODEL)
      for model in admin.site._registry),
]
CALL_IDS = [call.id for call in CALLS]
assert len(set(CALL_IDS)) == len(CALL_IDS), "a call is in the table twice"

# What admin.site generates besides the rows above (see the module docstring).
ADMIN_INTERNALS = re.compile(r"^admin:(\w+_(add|change|delete|history)|logout|password_change|password_change_done"
                             r"|jsi18n|autocomplete|app_list|view_on_site)$")


def url_names(patterns: list[URLPattern | URLResolver], namespace: str = "") -> Iterator[tuple[str | None, str]]:
    """(name with its namespace, or None when unnamed; the route) of every URL pattern."""
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            for name, route in url_names(pattern.url_patterns, inner):
                yield name, f"{pattern.pattern}{route}"
        else:
            yield (f"{namespace}{pattern.name}" if pattern.name else None), str(pattern.pattern)


def test_every_url_is_in_the_matrix():
    found = list(url_names(get_resolver().url_patterns))
    named = {call.name for call in CALLS}

    unnamed = [route for name, route in found if name is None and not route.startswith("admin/")]
    missing = sorted(name for name, _ in found if name is not None and name not in named
                     and not ADMIN_INTERNALS.match(name))
    assert not unnamed, f"URLs without a name cannot be held in the matrix: {unnamed}"
    assert not missing, f"URLs the permission matrix does not name: {missing}"
    assert named <= {name for name, _ in found}, "the matrix names a URL that no longer exists"
    assert any(name and name.endswith("_changelist") for name, _ in found)  # the admin rows are real


# --- making the calls --------------------------------------------------------------------


def client_for(world: World, actor: str, *, csrf: bool = False) -> Client:
    if actor in AGENTS:
        return Client(enforce_csrf_checks=csrf, headers={"Authorization": f"Bearer {world.tokens[actor]}"})
    client = Client(enforce_csrf_checks=csrf)
    if actor != "anonymous":
        client.force_login(world.people[actor])
    return client


def refused(expected: Expected) -> bool:
    return expected in (LOGIN, ADMIN_LOGIN) or (isinstance(expected, int) and expected >= 400)


def assert_answer(response: Any, expected: Expected, path: str) -> None:
    status = response.status_code
    if expected in (LOGIN, ADMIN_LOGIN):
        login = reverse("login") if expected == LOGIN else reverse("admin:login")
        assert status == 302, f"{path}: {status}, not a redirect to sign in"
        assert response["Location"].startswith(f"{login}?next="), response["Location"]
    else:
        assert status == expected, f"{path}: {status}, expected {expected}: {response.content[:300]!r}"
    assert_policy(response, path)  # every answer, page or API, allowed or refused
    if path.startswith("/api/") and status >= 400:
        assert response["Content-Type"] == "application/json", f"{path}: an API error that is not JSON"
        body = response.json()
        assert set(body) == {"error"} and body["error"]["code"] and body["error"]["message"], body
    elif not path.startswith("/admin/") and status == 403:
        assert b"<h1>Not allowed</h1>" in response.content, f"{path}: a refusal that is not the 403 page"


@pytest.mark.parametrize("actor", ACTORS)
@pytest.mark.parametrize("call", CALLS, ids=CALL_IDS)
def test_the_matrix(world, call, actor):
    expected = call.expect[ACTORS.index(actor)]
    client = client_for(world, actor)
    before = snapshot()

    response = call.send(client, world)

    assert_answer(response, expected, call.path(world))
    if refused(expected):
        assert snapshot() == before, f"{actor} was refused {call.id} and something changed"
    elif call.writes:
        assert snapshot() != before, f"{actor} was let through {call.id} and nothing changed"


# --- CSRF ----------------------------------------------------------------------------------

FORMS = [call for call in CALLS if call.method == "POST" and not call.name.startswith("api-")]
API_WRITES = [call for call in CALLS if call.method != "GET" and call.name.startswith("api-")]
PEOPLE = ("superuser", "both", "curator", "reviewer", "staff", "nobody")


def permitted_person(call: Call) -> str:
    """A person the matrix lets through `call` (a superuser where one is)."""
    return next(actor for actor in PEOPLE if not refused(call.expect[ACTORS.index(actor)]))


def test_the_forms_and_the_api_writes_are_all_checked():
    assert {call.id for call in FORMS} == {"approvals-decide-POST", "approvals-revoke-POST", "approvals-bulk-POST",
                                           "status-reset-POST", "agents-new-POST", "agents-page-POST",
                                           "agents-rotate-POST", "agents-revoke-POST", "playground-POST",
                                           "playground-why-not-POST",
                                           "login-POST", "logout-POST",
                                           "catalogs-create-POST", "catalogs-edit-POST",
                                           "catalogs-delete-POST", "catalogs-reindex-POST",
                                           "catalogs-source-create-POST", "catalogs-source-edit-POST",
                                           "catalogs-source-delete-POST", "catalogs-source-reindex-POST",
                                           "catalogs-source-files-POST", "catalogs-source-file-delete-POST",
                                           "evaluations-start-POST", "agents-memory-erase-POST",
                                           "catalogs-ranking-POST", "tuning-start-POST", "tuning-apply-POST"}
    assert len(API_WRITES) == 24  # the two explains are POSTs that write nothing (search writes its trace)


@pytest.mark.parametrize("call", FORMS, ids=[call.id for call in FORMS])
def test_every_form_refuses_a_post_without_its_csrf_token(world, call):
    actor = permitted_person(call)
    client = client_for(world, actor, csrf=True)
    before = snapshot()

    response = call.send(client, world)

    assert response.status_code == 403 and b"CSRF" in response.content, (actor, response.status_code)
    assert snapshot() == before
    client.get(reverse("login"))  # any page sets the cookie; the form then carries its token
    token = client.cookies["csrftoken"].value
    assert_answer(call.send(client, world, headers={"X-CSRFToken": token}),
                  call.expect[ACTORS.index(actor)], call.path(world))


@pytest.mark.parametrize("call", API_WRITES, ids=[call.id for call in API_WRITES])
def test_a_session_writing_to_the_api_needs_the_csrf_token_a_bearer_token_does_not(world, call):
    people = [actor for actor in PEOPLE if not refused(call.expect[ACTORS.index(actor)])]
    for actor in people:
        client = client_for(world, actor, csrf=True)
        before = snapshot()

        response = call.send(client, world)

        assert response.status_code == 403, (actor, response.status_code, response.content[:300])
        assert response.json()["error"]["code"] == "forbidden" and "CSRF" in response.json()["error"]["message"]
        assert snapshot() == before
    for actor in AGENTS:
        response = call.send(client_for(world, actor, csrf=True), world)
        assert_answer(response, call.expect[ACTORS.index(actor)], call.path(world))
    if not people:  # refused to every session: whatever it asks, CSRF is not what refuses it
        response = call.send(client_for(world, "superuser", csrf=True), world)
        assert_answer(response, call.expect[ACTORS.index("superuser")], call.path(world))


# --- other methods -------------------------------------------------------------------------

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
OWN = sorted({call.name for call in CALLS if not call.name.startswith(("admin:", "login", "logout"))})


@pytest.mark.parametrize("name", OWN)
def test_any_other_method_is_405(world, name):
    calls = [call for call in CALLS if call.name == name]
    allowed = {call.method for call in calls}
    client = client_for(world, "superuser")
    for method in sorted(set(METHODS) - allowed):
        before = snapshot()
        response = Call(name, method, calls[0].expect, args=calls[0].args).send(client, world)
        path = calls[0].path(world)
        assert response.status_code == 405, (method, path, response.status_code)
        if path.startswith("/api/"):
            assert response.json()["error"]["code"] == "method_not_allowed"
        assert snapshot() == before
