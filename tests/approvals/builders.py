"""Builders the approvals tests share: documents, and requests raised and decided
through the gate and the services."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.models import User

from approvals.models import ApprovalRequest
from approvals.selectors.gate import InjectionDecision, injection_decisions
from approvals.services.decisions import request_decide
from approvals.services.requests import withheld_requests_raise
from catalog.models import Agent, ReferenceSource
from catalog.sources.documents import DocumentInput

VAULT_TEXT = "Rotate the vault keys every ninety days.\nKeep the root token offline.\n"


def document(path: str, text: str) -> DocumentInput:
    return DocumentInput(path, path.removesuffix(".md").title(), text, len(text.encode()))


def gate_raise(*, agent: Agent | None, sources: Iterable[ReferenceSource], via: str | None,
               context: str = "") -> dict[int, InjectionDecision]:
    """The gate's decisions for `sources`, as a read path that wants them takes them:
    read (approvals.selectors.gate), then the requests due raised (`via`; None: a listing,
    which raises nothing)."""
    decisions = injection_decisions(agent=agent, sources=sources)
    if via is None:
        return decisions
    return withheld_requests_raise(agent=agent, decisions=decisions, via=via, context=context)


def raised(agent: Agent, source: ReferenceSource, via: str = "select") -> int:
    """The id of the request the gate raises (or names) when `via` withholds `source`."""
    request_id = gate_raise(agent=agent, sources=[source], via=via)[source.pk].request_id
    assert request_id is not None
    return request_id


def approved(agent: Agent, source: ReferenceSource, *reviewers: User) -> ApprovalRequest:
    """A request raised for `agent` and approved by each of `reviewers`."""
    request_id = raised(agent, source)
    request = ApprovalRequest.objects.get(pk=request_id)
    for reviewer in reviewers:
        request = request_decide(request_id=request_id, reviewer=reviewer, verdict="approve")
    return request
