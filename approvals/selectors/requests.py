"""Reads of approval requests beyond the gate: an agent's own (GET /api/v1/approvals),
the reviewers' queue and one request with everything a reviewer decides on (the web
queue and the channels build on these). A constant number of queries per call.

The state they show is the one the gate concludes (`with_state_now`): an approval whose
time is up is `expired` from that moment, whether or not the expiry task has marked the
row yet, and `?state=` filters by it.

Its second section is what the reviewer's pages read beyond those (the queue and a
request's detail, shared with the other channels): the queue's further filters and
orders, the header's count, a request's page (the policies, who four eyes keeps out,
the revocation, the text as shown), revocations and the names audit entries refer to.
A constant number of queries per page, whatever its length (rules_for: one governance
statement per distinct agent shown)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from django.db.models import Case, DateTimeField, F, Prefetch, Q, QuerySet, Value, When
from django.db.models.expressions import RawSQL
from django.utils import timezone

from approvals.models import ApprovalPolicy, ApprovalRequest, ApprovedContent, Decision
from approvals.selectors.gate import APPROVAL_ENDS_SQL, Rule, self_approval_allowed, source_rules
from approvals.services.contents import documents_now
from catalog.audit.log import Action
from catalog.models import Agent, AuditEntry, Catalog, ContentEditor, ReferenceSource


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


# --- the reviewer's pages -----------------------------------------------------------------

# What the request page shows of a source's text; past it, documents are named only.
SHOWN_TEXT_MAX_CHARS = 400_000


def requests_filtered(*, state: str = "", catalog: Catalog | None = None, source: ReferenceSource | None = None,
                      agent: Agent | None = None, raised_via: str = "", text: str = "") -> QuerySet[ApprovalRequest]:
    """requests_queue narrowed by every filter given. Pending: the
    queue proper, for the content sources hold now, oldest first (a queue is worked
    from its head). Any other selection, history included: every request, newest
    first. `text`: a case-insensitive substring of the context that raised it."""
    pending = state == ApprovalRequest.State.PENDING
    requests = requests_queue(states=[state] if state else ApprovalRequest.State.values,
                              catalog_ids=[catalog.pk] if catalog is not None else [],
                              agent_ids=[agent.pk] if agent is not None else [], current_only=pending)
    if source is not None:
        requests = requests.filter(source=source)
    if raised_via:
        requests = requests.filter(raised_via=raised_via)
    if text:
        requests = requests.filter(context__icontains=text)
    return requests if pending else requests.order_by("-created_at", "-pk")


def pending_count() -> int:
    """What the queue shows by default: pending requests for the content sources hold now."""
    return requests_queue().count()


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
    text: str | None  # None: too long to show here, or not kept
    chars: int | None
    commit: str = ""  # a git file's: the commit its text was read at


@dataclass(frozen=True)
class RequestReview:
    """request_detail as the page shows it: the documents bounded for
    a browser, the policies behind the rule, who last changed the source or a policy
    covering it (four eyes keeps them from approving), whose change raised it and
    whether they may decide it (self-approval), the revocation if any, and the
    request raised after it (content changed, an approval expired), for a reviewer who
    lands on this one from an old e-mail or the history."""

    request: RequestNow
    rule: Rule
    current: bool  # the request is for the content the source holds now
    documents: list[ShownDocument] | None
    decisions: list[Decision]
    policies: list[ApprovalPolicy]
    changed_by: list[str]
    caused_by: list[str]
    self_approval: bool  # the policies let caused_by decide it
    revocation: Revocation | None
    followed_by: int | None
    previous_state: str | None  # the state of the request it follows, as the gate sees it now


def request_review(*, request_id: int) -> RequestReview | None:
    detail = request_detail(request_id=request_id)
    if detail is None:
        return None
    request = detail.request
    policies = list(ApprovalPolicy.objects.filter(pk__in=detail.rule.policy_ids).select_related(
        "catalog", "source__catalog", "tag", "changed_by"))
    caused_by = sorted(user.get_username() for user in request.caused_by.all())
    revoked = request.state == ApprovalRequest.State.REVOKED
    return RequestReview(request=request, rule=detail.rule, current=request.fingerprint == request.source.fingerprint,
                       documents=None if detail.documents is None else _shown(detail.documents),
                       decisions=detail.decisions, policies=policies,
                       changed_by=_four_eyes_barred(request.source_id, policies, caused_by),
                       caused_by=caused_by,
                       self_approval=self_approval_allowed(detail.rule),
                       revocation=revocations([request.pk]).get(request.pk) if revoked else None,
                       followed_by=ApprovalRequest.objects.filter(previous_id=request.pk).order_by("-pk")
                       .values_list("pk", flat=True).first(),
                       previous_state=with_state_now(ApprovalRequest.objects.filter(pk=request.previous_id))
                       .values_list("state_now", flat=True).first() if request.previous_id else None)


def _four_eyes_barred(source_id: int, policies: list[ApprovalPolicy], caused_by: list[str]) -> list[str]:
    """Whom four eyes keeps from approving, as check_decide reads them: the request's
    causes, the source's content editors and last changer, each policy's last changer."""
    names = {p.changed_by.get_username() for p in policies if p.changed_by is not None} | set(caused_by)
    names.update(ContentEditor.objects.filter(source_id=source_id).values_list("user__username", flat=True))
    names.update(ReferenceSource.objects.filter(pk=source_id, changed_by__isnull=False)
                 .values_list("changed_by__username", flat=True))
    return sorted(names)


def _shown(documents: list[dict[str, Any]]) -> list[ShownDocument]:
    shown, budget = [], SHOWN_TEXT_MAX_CHARS
    for document in documents:
        text = document.get("text")
        fits = text is not None and len(text) <= budget
        budget -= len(text) if fits and text is not None else 0
        shown.append(ShownDocument(document["path"], document.get("title") or "", document["sha256"],
                                   text if fits else None, len(text) if text is not None else None,
                                   document.get("commit", "")))
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
