"""What the topology tests do to their own database, run in a child process that the
environment points at it (tests/topology.py, Cluster.call): every write through the
product's own services, as a command or a reviewer's page would make it."""

from __future__ import annotations

from typing import Any

from approvals.models import ApprovalRequest, Decision
from approvals.services.decisions import request_decide
from approvals.services.requests import request_raise
from approvals.services.revocation import approval_revoke
from catalog.catalogs import CatalogSettings, catalog_create
from catalog.models import ReferenceSource
from catalog.sources.documents import DocumentInput
from tests.factories import agent_with_token, import_documents, person

CATALOG = "kb"
NOTES = "notes"  # an upload source the agent may read and edit
VAULT = "vault"  # a source that needs approval
VAULT_TEXT = "The zebrafish protocol: the vault door code rotates every week."
REVIEWER = "rita"


def _document(path: str, text: str) -> DocumentInput:
    return DocumentInput(path=path, title=path, text=text, size=len(text.encode()))


def seed() -> dict[str, Any]:
    """A catalog with an open source and one that needs approval, a curator agent that
    may read it, a reviewer, and the agent's approval of the governed source."""
    catalog = catalog_create(slug=CATALOG, settings=CatalogSettings(name="Knowledge base"))
    import_documents(catalog=catalog, slug=NOTES, documents=[
        _document("intro.md", "Operating notes: retry transient failures with exponential backoff.")])
    vault = import_documents(catalog=catalog, slug=VAULT, documents=[_document("vault.md", VAULT_TEXT)])
    ReferenceSource.objects.filter(pk=vault.pk).update(requires_approval=True)  # as the demo manifest sets it
    agent, token = agent_with_token(name="topology-agent", catalogs=[catalog], is_curator=True)
    reviewer = person(REVIEWER, "reviewer")
    request = request_raise(source=ReferenceSource.objects.get(pk=vault.pk), agent=agent, by=agent)
    request_decide(request_id=request.pk, reviewer=reviewer, verdict=Decision.Verdict.APPROVE)
    assert ApprovalRequest.objects.get(pk=request.pk).state == ApprovalRequest.State.APPROVED
    return {"token": token, "request": request.pk}


def revoke(request: int) -> str:
    """The reviewer revokes the approval, as the queue's button does."""
    from django.contrib.auth.models import User

    return approval_revoke(request_id=request, by=User.objects.get(username=REVIEWER), reason="leaked").state


LEDGER_CATALOG = "ledger-kb"
LEDGER = "ledger"  # needs approval; its policy lets a search say the query matches it
LEDGER_TEXT = "The quarterly ledger reconciliation: accruals, deferrals and the closing checklist."


def ledger_disclosed() -> dict[str, Any]:
    """A second catalog for the agent, with a source a policy governs and discloses
    matches of (so the agent's matching search raises its request), and a webhook
    endpoint on that catalog, so each request raised becomes an outbox event."""
    from django.test import override_settings

    from approvals.channels.webhooks.endpoints import endpoint_create
    from approvals.services.policies import policy_create
    from catalog.agents import agent_update
    from catalog.models import Agent

    catalog = catalog_create(slug=LEDGER_CATALOG, settings=CatalogSettings(name="Ledger"))
    ledger = import_documents(catalog=catalog, slug=LEDGER, documents=[_document("ledger.md", LEDGER_TEXT)])
    curator = person("cora", "curator")
    policy_create(by=curator, source=ReferenceSource.objects.get(pk=ledger.pk), disclose_matches=True)
    with override_settings(LECTERN_OUTBOUND_ALLOWED_NETWORKS=["127.0.0.0/8"]):  # never delivered: only recorded
        endpoint_create(catalog=catalog, url="http://127.0.0.1:9/hook", by=curator)
    agent = Agent.objects.get(name="topology-agent")
    agent_update(agent_id=agent.pk, by=None, catalogs=[*agent.catalogs.all(), catalog])
    return {"catalog": LEDGER_CATALOG}


def webhook_events(request: int) -> list[str]:
    """The outbox events of approval request `request`, oldest first."""
    from approvals.channels.models import WebhookEvent

    return list(WebhookEvent.objects.filter(request_id=request).order_by("pk").values_list("type", flat=True))
