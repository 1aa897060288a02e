"""Reads of approval requests beyond the gate: an agent's own (GET /api/v1/approvals),
the reviewers' queue and one request with everything a reviewer decides on (the web
queue and the channels build on these). A constant number of queries per call.

The state they show is the one the gate concludes (`with_state_now`): an approval whose
time is up is `expired` from that moment, whether or not the expiry task has marked the
row yet, and `?state=` filters by it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from django.db.models import Case, DateTimeField, F, Prefetch, Q, QuerySet, Value, When
from django.db.models.expressions import RawSQL
from django.utils import timezone

from approvals.models import ApprovalRequest, ApprovedContent, Decision
from approvals.rules import Rule
from approvals.selectors import APPROVAL_ENDS_SQL, source_rules
from approvals.services.contents import documents_now
from catalog.models import Agent


class StateNow(TypedDict):
    """What with_state_now annotates."""

    approval_ends: datetime | None
    state_now: str
    ended_now: datetime | None


if TYPE_CHECKING:
    from typing import TypeAlias

    from django_stubs_ext import WithAnnotations

    RequestNow: TypeAlias = WithAnnotations[ApprovalRequest, StateNow]

_Request = TypeVar("_Request", bound=ApprovalRequest)


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


def _over(now: datetime) -> Q:
    """Approved, and its time is up (annotated by with_state_now)."""
    return Q(state=ApprovalRequest.State.APPROVED, approval_ends__lte=now)


def with_state_now(requests: QuerySet[ApprovalRequest], now: datetime | None = None) -> QuerySet[RequestNow]:
    """`requests` with `state_now` (the state the gate concludes: an approval whose time
    is up is expired) and `ended_now` (when it ended: for such an approval, the moment
    its time was up) annotated, as of `now`."""
    now = now or timezone.now()
    ends = RawSQL(APPROVAL_ENDS_SQL.format(r=ApprovalRequest._meta.db_table), [], output_field=DateTimeField())
    return requests.annotate(approval_ends=ends).annotate(
        state_now=Case(When(_over(now), then=Value(ApprovalRequest.State.EXPIRED)), default=F("state")),
        ended_now=Case(When(_over(now), then=F("approval_ends")), default=F("ended_at")))


def in_states_now(states: Iterable[str], now: datetime) -> Q:
    """The filter for requests whose state now is one of `states` (on a queryset
    annotated by with_state_now); a plain column filter for the other states."""
    found = Q(pk__in=[])
    for state in states:
        if state == ApprovalRequest.State.EXPIRED:
            found |= Q(state=state) | _over(now)
        elif state == ApprovalRequest.State.APPROVED:
            found |= Q(state=state) & (Q(approval_ends__isnull=True) | Q(approval_ends__gt=now))
        else:
            found |= Q(state=state)
    return found


def _with_decisions(requests: QuerySet[_Request]) -> QuerySet[_Request]:
    return requests.select_related("source__catalog", "agent", "previous").prefetch_related(
        Prefetch("decisions", queryset=Decision.objects.select_related("reviewer").order_by("pk")))


def _rules(requests: Sequence[ApprovalRequest]) -> dict[tuple[int, int], Rule]:
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
    """(how many, one page newest first) of `agent`'s requests, in `state` (as the gate
    sees it now) if given."""
    now = timezone.now()
    requests = with_state_now(ApprovalRequest.objects.filter(agent=agent), now)
    if state:
        requests = requests.filter(in_states_now([state], now))
    count = requests.count()
    page = list(_with_decisions(requests.order_by("-pk"))[offset:offset + limit])
    rules = _rules(page)
    return count, [_agent_view(request, rules.get((request.agent_id, request.source_id), Rule())) for request in page]


def _agent_view(request: RequestNow, rule: Rule) -> AgentRequest:
    decisions = list(request.decisions.all())
    deciding = next((d for d in reversed(decisions) if d.verdict == Decision.Verdict.REJECT), None) \
        or (decisions[-1] if decisions else None)
    return AgentRequest(
        id=request.pk, catalog=request.source.catalog.slug, source_id=request.source.slug,
        fingerprint=request.fingerprint, state=request.state_now,
        current=request.fingerprint == request.source.fingerprint,
        raised_via=request.raised_via, context=request.context, approvals=request.approvals,
        required_approvals=rule.required, previous_id=request.previous_id,
        comment=deciding.comment if deciding else "", created_at=request.created_at, decided_at=request.decided_at,
        expires_at=request.expires_at, ended_at=request.ended_now)


def requests_queue(*, states: Iterable[str] = (ApprovalRequest.State.PENDING,), catalog_ids: Iterable[int] = (),
                   agent_ids: Iterable[int] = (), current_only: bool = True) -> QuerySet[ApprovalRequest]:
    """The reviewers' queue: requests in `states` (pending by default; as the gate sees
    them now: with_state_now), oldest first, with source, catalog, agent and decisions
    loaded; narrowed to catalogs or agents when given. `current_only`: only requests
    for the content the source holds now (a read path racing a reindex can leave a
    pending request for the old content, which request_decide refuses with
    content_changed). Paginate the queryset; rules_for() adds what each now requires."""
    now = timezone.now()
    requests = with_state_now(ApprovalRequest.objects.all(), now).filter(in_states_now(states, now))
    if current_only:
        requests = requests.filter(fingerprint=F("source__fingerprint"))
    if catalog_ids := list(catalog_ids):
        requests = requests.filter(source__catalog_id__in=catalog_ids)
    if agent_ids := list(agent_ids):
        requests = requests.filter(agent_id__in=agent_ids)
    return _with_decisions(requests.order_by("created_at", "pk"))


def rules_for(requests: Sequence[ApprovalRequest]) -> dict[int, Rule]:
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

    request: RequestNow
    rule: Rule
    documents: list[dict[str, Any]] | None
    previously_approved: ApprovedContent | None
    decisions: list[Decision]


def request_detail(*, request_id: int) -> RequestDetail | None:
    request = _with_decisions(with_state_now(ApprovalRequest.objects.filter(pk=request_id))).first()
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
