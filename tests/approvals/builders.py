"""Builders the approvals tests share: documents, and requests raised and decided
through the gate and the services."""

from __future__ import annotations

from django.contrib.auth.models import User

from approvals.models import ApprovalRequest
from approvals.selectors import injection_decisions
from approvals.services.decisions import request_decide
from catalog.models import Agent, ReferenceSource
from catalog.sources.documents import DocumentInput

VAULT_TEXT = "Rotate the vault keys every ninety days.\nKeep the root token offline.\n"


def document(path: str, text: str) -> DocumentInput:
    return DocumentInput(path, path.removesuffix(".md").title(), text, len(text.encode()))


def raised(agent: Agent, source: ReferenceSource, via: str = "select") -> int:
    """The id of the request the gate raises (or names) when `via` withholds `source`."""
    request_id = injection_decisions(agent=agent, sources=[source], raised_via=via)[source.pk].request_id
    assert request_id is not None
    return request_id


def approved(agent: Agent, source: ReferenceSource, *reviewers: User) -> ApprovalRequest:
    """A request raised for `agent` and approved by each of `reviewers`."""
    request_id = raised(agent, source)
    request = ApprovalRequest.objects.get(pk=request_id)
    for reviewer in reviewers:
        request = request_decide(request_id=request_id, reviewer=reviewer, verdict="approve")
    return request
