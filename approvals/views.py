"""The reviewer's pages: the queue, one request (approve, reject, revoke), bulk
decisions, history per source and per agent, the audit log and its exports.

Who may do what: curators and reviewers see every page (the queue, requests, history,
the audit log and its exports: curators answer for what governance let through);
only reviewers decide, decide in bulk and revoke. Anyone else signed in gets 403, anyone
not signed in the sign-in page; agents' bearer tokens sign no one in here. Every write
goes through a service (approvals.services), which checks the role again.

One view, two renders: an htmx request gets the partial it swaps in, a plain request
the whole page holding the same partial. A decision the service refuses (decided
first by another reviewer, four eyes, content changed) comes back as the panel with
the message and the service's status (409, 403), marked X-Lectern-Partial so htmx
swaps it in (templates/base.html).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import trigger_client_event

from approvals.filters import AuditFilter
from approvals.forms import BulkDecideForm, DecideForm, QueueFilterForm, RevokeForm
from approvals.models import ApprovalRequest, Decision
from approvals.selectors.requests import (
    RequestReview,
    audit_names,
    pending_count,
    request_review,
    requests_filtered,
    revocations,
    rules_for,
)
from approvals.services.bulk import requests_decide_bulk
from approvals.services.decisions import request_decide
from approvals.services.revocation import approval_revoke
from catalog.audit.export import audit_csv_chunks, audit_json_chunks
from catalog.auth import CURATOR_GROUP, REVIEWER_GROUP, is_reviewer, role_required
from catalog.errors import ApplicationError
from catalog.models import Agent, AuditEntry, ReferenceSource
from catalog.web import from_htmx, person, status_of

viewers = role_required(CURATOR_GROUP, REVIEWER_GROUP)
reviewers = role_required(REVIEWER_GROUP)

QUEUE_PAGE = 25
HISTORY_PAGE = 25
AUDIT_PAGE = 50
EXPORT_CHUNK_CHARS = 64 * 1024
# Tells the page that requests changed: the queue table and the header's count reload.
QUEUE_CHANGED = "queue-changed"






def _query_without_page(request: HttpRequest) -> str:
    query = request.GET.copy()
    query.pop("page", None)
    return query.urlencode()


# --- the queue ---------------------------------------------------------------------------

@viewers
@require_GET
def queue(request: HttpRequest) -> HttpResponse:
    form = QueueFilterForm(request.GET)
    requests = requests_filtered(**form.filters()) if form.is_valid() else ApprovalRequest.objects.none()
    page = Paginator(requests, QUEUE_PAGE).get_page(request.GET.get("page"))
    rules = rules_for(list(page.object_list))
    context = {"form": form, "page": page, "rows": [(r, rules[r.pk]) for r in page.object_list],
               "query": _query_without_page(request), "can_decide": is_reviewer(request.user),
               "state": form.cleaned_data.get("state") if form.is_valid() else ""}
    template = "approvals/partials/queue_table.html" if from_htmx(request) else "approvals/queue.html"
    return render(request, template, context, status=200 if form.is_valid() else 400)


@viewers
@require_GET
def pending_badge(request: HttpRequest) -> HttpResponse:
    """The header's count of pending requests (polled, and reloaded after decisions)."""
    return render(request, "approvals/partials/pending_badge.html", {"pending_requests": pending_count()})


# --- one request -------------------------------------------------------------------------

def _detail_or_404(request_id: int) -> RequestReview:
    """The request with what a reviewer decides on; every curator and reviewer may see
    every request (as they see every catalog: catalog.auth.visible_catalogs)."""
    detail = request_review(request_id=request_id)
    if detail is None:
        raise Http404(f"No approval request {request_id}.")
    return detail


def _panel_context(request: HttpRequest, detail: RequestReview, **extra: Any) -> dict[str, Any]:
    """What the decision panel shows this person: the forms they may use, their own
    decision so far, whether their own change raised it (then another reviewer decides,
    unless the policies allow self-approval), whether four eyes keeps them from approving."""
    user, state = person(request), detail.request.state_now
    mine = next((d for d in detail.decisions if d.reviewer_id == user.pk), None)
    reviewer = is_reviewer(user)
    own = user.get_username() in detail.caused_by and not detail.self_approval
    return {"detail": detail, "req": detail.request, "my_decision": mine, "is_reviewer": reviewer, "own_change": own,
            "can_decide": reviewer and state == ApprovalRequest.State.PENDING and mine is None and detail.current
            and not own,
            "can_revoke": reviewer and state == ApprovalRequest.State.APPROVED,
            "approvals_missing": max(detail.rule.required - detail.request.approvals, 0),
            "four_eyes_me": detail.rule.four_eyes and user.get_username() in detail.changed_by,
            "decide_form": extra.pop("decide_form", None) or DecideForm(),
            "revoke_form": extra.pop("revoke_form", None) or RevokeForm(), **extra}


@viewers
@require_GET
def request_page(request: HttpRequest, request_id: int) -> HttpResponse:
    detail = _detail_or_404(request_id)
    return render(request, "approvals/request.html", _panel_context(request, detail))


def _panel_response(request: HttpRequest, request_id: int, *, status: int = 200, changed: bool = False,
                    **extra: Any) -> HttpResponse:
    """After a decision or a revocation: the panel (htmx) or the whole page."""
    detail = _detail_or_404(request_id)
    context = _panel_context(request, detail, **extra)
    if not from_htmx(request):
        if status == 200:
            return redirect("approvals-request", request_id=request_id)
        return render(request, "approvals/request.html", context, status=status)
    response = render(request, "approvals/partials/decision_panel.html", context, status=status)
    response["X-Lectern-Partial"] = "1"
    if changed:
        trigger_client_event(response, QUEUE_CHANGED)
    return response


def _refused(error: ApplicationError) -> dict[str, Any]:
    return {"error": error.message, "error_code": error.code}


@reviewers
@require_POST
def decide(request: HttpRequest, request_id: int) -> HttpResponse:
    form = DecideForm(request.POST)
    if not form.is_valid():
        return _panel_response(request, request_id, status=400, decide_form=form, error="Check the form below.")
    verdict = form.cleaned_data["verdict"]
    try:
        decided = request_decide(request_id=request_id, reviewer=person(request),
                                 verdict=verdict, comment=form.cleaned_data["comment"], channel=Decision.Channel.WEB)
    except ApplicationError as error:
        if status_of(error) == 404:
            raise Http404(error.message) from None
        return _panel_response(request, request_id, status=status_of(error), changed=True, decide_form=form,
                               **_refused(error))
    done = {"approve": "approved", "reject": "rejected"}[verdict]
    note = f"You {done} request {decided.pk}" + (
        "." if decided.state != ApprovalRequest.State.PENDING else
        f"; it waits for more approvals ({decided.approvals} so far).")
    if not from_htmx(request):
        messages.success(request, note)
    return _panel_response(request, request_id, changed=True, notice=note)


@reviewers
@require_POST
def revoke(request: HttpRequest, request_id: int) -> HttpResponse:
    form = RevokeForm(request.POST)
    if not form.is_valid():
        return _panel_response(request, request_id, status=400, revoke_form=form,
                               error="Say why the approval is revoked.")
    try:
        approval_revoke(request_id=request_id, by=person(request), reason=form.cleaned_data["reason"])
    except ApplicationError as error:
        if status_of(error) == 404:
            raise Http404(error.message) from None
        return _panel_response(request, request_id, status=status_of(error), changed=True, revoke_form=form,
                               **_refused(error))
    note = f"You revoked the approval of request {request_id}."
    if not from_htmx(request):
        messages.success(request, note)
    return _panel_response(request, request_id, changed=True, notice=note)


@reviewers
@require_POST
def bulk_decide(request: HttpRequest) -> HttpResponse:
    """One verdict and comment on the chosen requests: a report per request."""
    form = BulkDecideForm(request.POST)
    outcomes = []
    status = 200
    if form.is_valid():
        data = form.cleaned_data
        try:
            outcomes = requests_decide_bulk(request_ids=data["ids"], reviewer=person(request),
                                            verdict=data["verdict"], comment=data["comment"])
        except ApplicationError as error:
            form.add_error(None, error.message)
            status = status_of(error)
    else:
        status = 400
    context = {"form": form, "outcomes": outcomes, "verdict": form.cleaned_data.get("verdict", ""),
               "decided": sum(o.decided for o in outcomes), "refused": sum(not o.decided for o in outcomes)}
    if not from_htmx(request):
        return render(request, "approvals/bulk.html", context, status=status)
    response = render(request, "approvals/partials/bulk_report.html", context, status=status)
    response["X-Lectern-Partial"] = "1"
    if any(o.decided for o in outcomes):
        trigger_client_event(response, QUEUE_CHANGED)
    return response


# --- history -----------------------------------------------------------------------------

def _history(request: HttpRequest, requests: QuerySet[ApprovalRequest], **context: Any) -> HttpResponse:
    page = Paginator(requests, HISTORY_PAGE).get_page(request.GET.get("page"))
    rules = rules_for(list(page.object_list))
    context.update(page=page, rows=[(r, rules[r.pk]) for r in page.object_list], query="",
                   revocations=revocations(r.pk for r in page.object_list))
    template = "approvals/partials/history_list.html" if from_htmx(request) else "approvals/history.html"
    return render(request, template, context)


@viewers
@require_GET
def source_history(request: HttpRequest, catalog: str, source: str) -> HttpResponse:
    found = get_object_or_404(ReferenceSource.objects.select_related("catalog"), catalog__slug=catalog, slug=source)
    return _history(request, requests_filtered(source=found), source=found, subject=f"source {found}",
                    audit_query=f"source={found.pk}")


@viewers
@require_GET
def agent_history(request: HttpRequest, agent_id: int) -> HttpResponse:
    found = get_object_or_404(Agent, pk=agent_id)
    return _history(request, requests_filtered(agent=found), agent=found, subject=f"agent {found.name}",
                    audit_query=f"agent={found.pk}")


# --- the audit log -----------------------------------------------------------------------

@viewers
@require_GET
def audit_log(request: HttpRequest) -> HttpResponse:
    """Newest first, filtered; the exports take the same filters (in chain order)."""
    filters = AuditFilter(request.GET, queryset=AuditEntry.objects.order_by("-seq"))
    form = filters.form
    entries = filters.qs if filters.is_valid() else AuditEntry.objects.none()
    page = Paginator(entries, AUDIT_PAGE).get_page(request.GET.get("page"))
    sources, agents = audit_names(page.object_list)
    context = {"form": form, "page": page, "query": _query_without_page(request), "source_names": sources,
               "agent_names": agents, "narrowed": _narrowed(request, form, sources, agents)}
    template = "approvals/partials/audit_table.html" if from_htmx(request) else "approvals/audit.html"
    return render(request, template, context, status=200 if form.is_valid() else 400)


def _narrowed(request: HttpRequest, form: forms.Form, sources: dict[int, str],
              agents: dict[int, str]) -> list[tuple[str, str]]:
    """The source and agent filters in force (set by links from history pages and the
    log itself), each with the query that drops it."""
    if not form.is_valid():
        return []
    found = []
    for field, names in (("source", sources), ("agent", agents)):
        value = form.cleaned_data[field]
        if value is not None:
            query = request.GET.copy()
            query.pop(field, None)
            query.pop("page", None)
            found.append((f"{field} {names.get(value, f'#{value}')}", query.urlencode()))
    return found


EXPORTS = {"csv": (audit_csv_chunks, "text/csv; charset=utf-8"),
           "json": (audit_json_chunks, "application/json")}


@viewers
@require_GET
def audit_export(request: HttpRequest, fmt: str) -> HttpResponseBase:
    """The filtered log as a download, streamed as it is read (every column, hashes
    included: an export can be checked against the chain elsewhere)."""
    if fmt not in EXPORTS:
        raise Http404(f"No export format {fmt!r}.")
    filters = AuditFilter(request.GET, queryset=AuditEntry.objects.order_by("seq"))  # in chain order
    if not filters.is_valid():
        return render(request, "approvals/audit.html",
                      {"form": filters.form, "page": None, "query": "", "narrowed": []}, status=400)
    chunks, content_type = EXPORTS[fmt]
    response = StreamingHttpResponse(_batched(chunks(filters.qs)), content_type=content_type)
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    response["Content-Disposition"] = f'attachment; filename="lectern-audit-{stamp}.{fmt}"'
    return response


def _batched(chunks: Iterator[str]) -> Iterator[bytes]:
    """Chunks joined up to about EXPORT_CHUNK_CHARS: one write per batch, not per entry."""
    batch: list[str] = []
    size = 0
    for chunk in chunks:
        batch.append(chunk)
        size += len(chunk)
        if size >= EXPORT_CHUNK_CHARS:
            yield "".join(batch).encode()
            batch, size = [], 0
    if batch:
        yield "".join(batch).encode()
