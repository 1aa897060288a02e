"""Reads of approval requests beyond the gate: an agent's own (GET /api/v1/approvals),
the reviewers' queue and one request with everything a reviewer decides on (the web
queue and the channels build on these). A constant number of queries per call."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import F, Prefetch, QuerySet

from approvals.models import ApprovalRequest, ApprovedContent, Decision
from approvals.rules import Rule
from approvals.selectors import source_rules
from approvals.services.contents import documents_now
from catalog.models import Agent


@dataclass(frozen=True)
class AgentRequest:
    """A request as its agent sees it: states and ids, never content or diffs."""

    id: int
    catalog: str
    source_id: str
    fingerprint: str
    state: str
    current: bool
    raised_via: str
    context: str
    approvals: int
    required_approvals: int
    previous_id: int | None
    comment: str
    created_at: datetime
    decided_at: datetime | None
    expires_at: datetime | None
    ended_at: datetime | None


def _with_decisions(requests: QuerySet[ApprovalRequest]) -> QuerySet[ApprovalRequest]:
    return requests.select_related("source__catalog", "agent", "previous", "caused_by").prefetch_related(
        Prefetch("decisions", queryset=Decision.objects.select_related("reviewer").order_by("pk")))


def _rules(requests: list[ApprovalRequest]) -> dict[tuple[int, int], Rule]:
    """(agent, source) -> the rule now; one statement per agent on the page."""
    rules: dict[tuple[int, int], Rule] = {}
    by_agent: dict[int, set[int]] = {}
    agents: dict[int, Agent] = {}
    for request in requests:
        by_agent.setdefault(request.agent_id, set()).add(request.source_id)
        agents[request.agent_id] = request.agent
    for agent_id, source_ids in by_agent.items():
        for source_id, governance in source_rules(agent=agents[agent_id], source_ids=source_ids).items():
            rules[(agent_id, source_id)] = governance.rule
    return rules


def agent_requests(*, agent: Agent, state: str = "", limit: int = 50,
                   offset: int = 0) -> tuple[int, list[AgentRequest]]:
    """(how many, one page newest first) of `agent`'s requests, in `state` if given."""
    requests = ApprovalRequest.objects.filter(agent=agent)
    if state:
        requests = requests.filter(state=state)
    count = requests.count()
    page = list(_with_decisions(requests.order_by("-pk"))[offset:offset + limit])
    rules = _rules(page)
    return count, [_agent_view(request, rules.get((request.agent_id, request.source_id), Rule())) for request in page]


def _agent_view(request: ApprovalRequest, rule: Rule) -> AgentRequest:
    decisions = list(request.decisions.all())
    deciding = next((d for d in reversed(decisions) if d.verdict == Decision.Verdict.REJECT), None) \
        or (decisions[-1] if decisions else None)
    return AgentRequest(
        id=request.pk, catalog=request.source.catalog.slug, source_id=request.source.slug,
        fingerprint=request.fingerprint, state=request.state, current=request.fingerprint == request.source.fingerprint,
        raised_via=request.raised_via, context=request.context, approvals=request.approvals,
        required_approvals=rule.required, previous_id=request.previous_id,
        comment=deciding.comment if deciding else "", created_at=request.created_at, decided_at=request.decided_at,
        expires_at=request.expires_at, ended_at=request.ended_at)


def requests_queue(*, states: Iterable[str] = (ApprovalRequest.State.PENDING,), catalog_ids: Iterable[int] = (),
                   agent_ids: Iterable[int] = (), current_only: bool = True) -> QuerySet[ApprovalRequest]:
    """The reviewers' queue: requests in `states` (pending by default), oldest first,
    with source, catalog, agent and decisions loaded; narrowed to catalogs or agents
    when given. `current_only`: only requests for the content the source holds now (a
    read path racing a reindex can leave a pending request for the old content, which
    request_decide refuses with content_changed). Paginate the queryset; rules_for()
    adds what each now requires."""
    requests = ApprovalRequest.objects.filter(state__in=list(states))
    if current_only:
        requests = requests.filter(fingerprint=F("source__fingerprint"))
    if catalog_ids := list(catalog_ids):
        requests = requests.filter(source__catalog_id__in=catalog_ids)
    if agent_ids := list(agent_ids):
        requests = requests.filter(agent_id__in=agent_ids)
    return _with_decisions(requests.order_by("created_at", "pk"))


def rules_for(requests: list[ApprovalRequest]) -> dict[int, Rule]:
    """request id -> the rule that applies to it now (required approvals, lifetime,
    four eyes, the policies): one statement per distinct agent among `requests`."""
    rules = _rules(requests)
    return {request.pk: rules.get((request.agent_id, request.source_id), Rule()) for request in requests}


@dataclass(frozen=True)
class RequestDetail:
    """Everything a reviewer decides on: the request, the rule, the text an approval
    would let through (the source's documents while they are still the content the
    request was raised for; once it changed, the text kept if that content was ever
    approved, else None), the text approved before that the request's diff is against,
    and the decisions so far."""

    request: ApprovalRequest
    rule: Rule
    documents: list[dict[str, Any]] | None
    previously_approved: ApprovedContent | None
    decisions: list[Decision]


def request_detail(*, request_id: int) -> RequestDetail | None:
    request = _with_decisions(ApprovalRequest.objects.filter(pk=request_id)).first()
    if request is None:
        return None
    rule = rules_for([request])[request.pk]
    current = request.fingerprint == request.source.fingerprint
    documents = documents_now(request.source_id) if current else None
    if not current:  # what was approved for this fingerprint, if it ever was
        documents = next(iter(ApprovedContent.objects.filter(
            source_id=request.source_id, fingerprint=request.fingerprint).values_list("documents", flat=True)), None)
    previous = ApprovedContent.objects.filter(source_id=request.source_id, fingerprint=request.diff_base).first() \
        if request.diff_base else None
    return RequestDetail(request=request, rule=rule, documents=documents, previously_approved=previous,
                         decisions=list(request.decisions.all()))
