"""What the reviewer's pages read beyond approvals.queries (the queue and a request's
detail, shared with the other channels): the queue's further filters and orders, the
header's count, a request's page (the policies, who four eyes keeps out, the
revocation, the text as shown), revocations and the names audit entries refer to. A
constant number of queries per page, whatever its length (approvals.queries.rules_for:
one governance statement per distinct agent shown)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db.models import QuerySet

from approvals.models import ApprovalPolicy, ApprovalRequest, Decision
from approvals.queries import request_detail, requests_queue, with_state_now
from approvals.rules import Rule
from approvals.selectors import self_approval_allowed
from catalog.audit.log import Action
from catalog.models import Agent, AuditEntry, Catalog, ContentEditor, ReferenceSource

if TYPE_CHECKING:
    from approvals.queries import RequestNow

# What the request page shows of a source's text; past it, documents are named only.
SHOWN_TEXT_MAX_CHARS = 400_000


def requests_filtered(*, state: str = "", catalog: Catalog | None = None, source: ReferenceSource | None = None,
                      agent: Agent | None = None, raised_via: str = "", text: str = "") -> QuerySet[ApprovalRequest]:
    """approvals.queries.requests_queue narrowed by every filter given. Pending: the
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


@dataclass(frozen=True)
class RequestReview:
    """approvals.queries.request_detail as the page shows it: the documents bounded for
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
