"""Reads for the reviewer's pages: the queue with its filters, one request with what a
reviewer decides on, the history of a source or an agent. A constant number of queries
per page, whatever its length (one governance statement per distinct agent shown)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Prefetch, QuerySet

from approvals.audit.log import Action
from approvals.models import ApprovalPolicy, ApprovalRequest, ApprovedContent, AuditEntry, Decision
from approvals.rules import Rule
from approvals.selectors import source_rules
from approvals.services.contents import documents_now
from catalog.models import Agent, Catalog, ReferenceSource

# What the detail page shows of a source's text; past it, documents are named only.
SHOWN_TEXT_MAX_CHARS = 400_000


def with_decisions(requests: QuerySet[ApprovalRequest]) -> QuerySet[ApprovalRequest]:
    """`requests` with their source, catalog, agent and decisions (and deciders) loaded."""
    return requests.select_related("source__catalog", "agent").prefetch_related(
        Prefetch("decisions", queryset=Decision.objects.select_related("reviewer").order_by("pk")))


def requests_filtered(*, state: str = "", catalog: Catalog | None = None, source: ReferenceSource | None = None,
                      agent: Agent | None = None, raised_via: str = "", text: str = "") -> QuerySet[ApprovalRequest]:
    """Requests matching every filter given: pending ones oldest first (a queue is worked
    from its head), any other selection newest first. `text`: a case-insensitive
    substring of the context that raised the request."""
    requests = ApprovalRequest.objects.all()
    if state:
        requests = requests.filter(state=state)
    if catalog is not None:
        requests = requests.filter(source__catalog=catalog)
    if source is not None:
        requests = requests.filter(source=source)
    if agent is not None:
        requests = requests.filter(agent=agent)
    if raised_via:
        requests = requests.filter(raised_via=raised_via)
    if text:
        requests = requests.filter(context__icontains=text)
    order = ("created_at", "pk") if state == ApprovalRequest.State.PENDING else ("-created_at", "-pk")
    return with_decisions(requests.order_by(*order))


def pending_count() -> int:
    return ApprovalRequest.objects.filter(state=ApprovalRequest.State.PENDING).count()


def rules_for(requests: Iterable[ApprovalRequest]) -> dict[int, Rule]:
    """request id -> the rule that applies to it now (required approvals, lifetime, four
    eyes, policies): one statement per distinct agent among `requests`. A source no
    longer governed gets the default rule (one approval settles it)."""
    requests = list(requests)
    by_agent: dict[int, tuple[Agent, set[int]]] = {}
    for request in requests:
        by_agent.setdefault(request.agent_id, (request.agent, set()))[1].add(request.source_id)
    rules: dict[tuple[int, int], Rule] = {}
    for agent_id, (agent, source_ids) in by_agent.items():
        for source_id, governance in source_rules(agent=agent, source_ids=source_ids).items():
            rules[(agent_id, source_id)] = governance.rule
    return {request.pk: rules.get((request.agent_id, request.source_id), Rule()) for request in requests}


@dataclass(frozen=True)
class Revocation:
    """Who revoked an approval, when and why: the request keeps its state, the audit
    log the rest."""

    by: str
    at: datetime
    reason: str


def revocations(request_ids: Iterable[int]) -> dict[int, Revocation]:
    """request id -> its revocation, for those of `request_ids` revoked (one query)."""
    entries = AuditEntry.objects.filter(action=Action.REQUEST_REVOKED, request_id__in=list(request_ids)) \
        .values_list("request_id", "actor_name", "at", "payload")
    return {request_id: Revocation(by, at, str(payload.get("reason", "")))
            for request_id, by, at, payload in entries if request_id is not None}


@dataclass(frozen=True)
class ShownDocument:
    path: str
    title: str
    sha256: str
    text: str | None  # None: too long to show here (or not kept)
    chars: int | None


@dataclass(frozen=True)
class RequestDetail:
    """What a reviewer decides on: the request and its decisions, the rule that applies
    now, the text an approval lets through (the source's documents while they are the
    content the request was raised for; after a change, the text kept when that content
    was approved, else None), and who last changed the source or a policy covering it
    (four eyes keeps them from approving)."""

    request: ApprovalRequest
    rule: Rule
    current: bool
    documents: list[ShownDocument] | None
    decisions: list[Decision]
    policies: list[ApprovalPolicy]
    changed_by: list[str]
    revocation: Revocation | None


def request_detail(*, request_id: int) -> RequestDetail | None:
    request = with_decisions(ApprovalRequest.objects.filter(pk=request_id)).select_related("source__changed_by").first()
    if request is None:
        return None
    rule = rules_for([request])[request.pk]
    current = request.fingerprint == request.source.fingerprint
    if current:
        documents: list[dict[str, Any]] | None = documents_now(request.source_id)
    else:
        documents = ApprovedContent.objects.filter(source_id=request.source_id, fingerprint=request.fingerprint) \
            .values_list("documents", flat=True).first()
    policies = list(ApprovalPolicy.objects.filter(pk__in=rule.policy_ids).select_related(
        "catalog", "source__catalog", "tag", "changed_by"))
    changed_by = {p.changed_by.get_username() for p in policies if p.changed_by is not None}
    if request.source.changed_by is not None:
        changed_by.add(request.source.changed_by.get_username())
    return RequestDetail(request=request, rule=rule, current=current,
                         documents=None if documents is None else _shown(documents),
                         decisions=list(request.decisions.all()), policies=policies, changed_by=sorted(changed_by),
                         revocation=revocations([request.pk]).get(request.pk)
                         if request.state == ApprovalRequest.State.REVOKED else None)


def _shown(documents: list[dict[str, Any]]) -> list[ShownDocument]:
    shown, budget = [], SHOWN_TEXT_MAX_CHARS
    for document in documents:
        text = document.get("text")
        fits = text is not None and len(text) <= budget
        budget -= len(text) if fits and text is not None else 0
        shown.append(ShownDocument(document["path"], document.get("title") or "", document["sha256"],
                                   text if fits else None, len(text) if text is not None else None))
    return shown


def audit_names(entries: Iterable[AuditEntry]) -> tuple[dict[int, str], dict[int, str]]:
    """The sources ("catalog/slug") and agents (names) the audit entries name, by id, as
    they are now (an entry outlives what it names: a missing id keeps its number)."""
    entries = list(entries)
    source_ids = {e.source_id for e in entries if e.source_id is not None}
    agent_ids = {e.agent_id for e in entries if e.agent_id is not None}
    sources = {pk: f"{catalog}/{slug}" for pk, catalog, slug in ReferenceSource.objects.filter(
        pk__in=source_ids).values_list("pk", "catalog__slug", "slug")} if source_ids else {}
    agents = dict(Agent.objects.filter(pk__in=agent_ids).values_list("pk", "name")) if agent_ids else {}
    return sources, agents
