"""What approvals adds to the curator's source page and delete confirmations
(catalog.panels; ApprovalsConfig.ready registers these): a source's approval state and
its latest requests with their decisions, with links to the full history, the queue
and the audit log (approvals' own pages); and, before a source or a catalog is
deleted, the governance rows that go with it. Reads only, a few queries each."""

from __future__ import annotations

from django.db.models import Count, Q
from django.http import HttpRequest
from django.utils import timezone

from approvals.channels.models import WebhookEndpoint
from approvals.models import ApprovalPolicy, ApprovalRequest
from approvals.selectors.requests import requests_filtered, with_state_now
from catalog.models import Catalog, ReferenceSource
from catalog.panels import Panel

LATEST = 5


def _policies(source: ReferenceSource) -> list[ApprovalPolicy]:
    """The policies covering the source: on it, on its catalog, or on one of its tags."""
    covering = Q(scope=ApprovalPolicy.Scope.SOURCE, source=source) | \
        Q(scope=ApprovalPolicy.Scope.CATALOG, catalog_id=source.catalog_id) | \
        Q(scope=ApprovalPolicy.Scope.TAG, tag__in=source.tags.all())
    return list(ApprovalPolicy.objects.filter(covering).select_related("catalog", "source__catalog", "tag")
                .annotate(agent_count=Count("agents")).order_by("pk"))


def _states_now(source: ReferenceSource) -> dict[str, int]:
    """How many of the source's requests are in each state, as the gate sees them now:
    approvals whose time is up count as expired (counted apart: a GROUP BY over the
    computed state would repeat its subquery per group)."""
    now = timezone.now()
    requests = ApprovalRequest.objects.filter(source=source)
    states = dict(requests.values_list("state").annotate(n=Count("pk")).values_list("state", "n"))
    over = with_state_now(requests.filter(state=ApprovalRequest.State.APPROVED), now) \
        .filter(state_now=ApprovalRequest.State.EXPIRED).count()
    if over:
        states[ApprovalRequest.State.APPROVED] -= over
        states[ApprovalRequest.State.EXPIRED] = states.get(ApprovalRequest.State.EXPIRED, 0) + over
    return states


def source_approvals(request: HttpRequest, source: ReferenceSource) -> Panel:
    states = _states_now(source)
    policies = _policies(source)
    return Panel("approvals/partials/source_panel.html", {
        "source": source, "policies": policies, "governed": source.requires_approval or bool(policies),
        "states": [(state, states[state]) for state in ApprovalRequest.State.values if states.get(state)],
        "total": sum(states.values()), "pending": states.get(ApprovalRequest.State.PENDING, 0),
        "latest": list(requests_filtered(source=source)[:LATEST]),
    }, order=10)


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def deletion_notes(catalog: Catalog | None, source: ReferenceSource | None) -> list[str]:
    if source is not None:
        requests = ApprovalRequest.objects.filter(source=source).count()
        policies = ApprovalPolicy.objects.filter(source=source).count()
        endpoints = 0
    else:
        assert catalog is not None
        requests = ApprovalRequest.objects.filter(source__catalog=catalog).count()
        policies = ApprovalPolicy.objects.filter(Q(catalog=catalog) | Q(source__catalog=catalog)).count()
        endpoints = WebhookEndpoint.objects.filter(catalog=catalog).count()
    notes = []
    if requests:
        notes.append(f"{_plural(requests, 'approval request', 'approval requests')} with their decisions "
                     "(approvals of its content are gone with them)")
    if policies:
        notes.append(f"{_plural(policies, 'approval policy', 'approval policies')} naming it")
    if endpoints:
        notes.append(f"{_plural(endpoints, 'webhook endpoint', 'webhook endpoints')} and their deliveries")
    notes.append("The audit log keeps every entry about it, and records who deleted it.")
    return notes


def register() -> None:
    from catalog.panels import deletion_notes_register, source_panel_register

    source_panel_register("approvals", source_approvals)
    deletion_notes_register("approvals", deletion_notes)
