"""An approval covers the content it was granted for: a reindex that changes the content
lapses it in the switch's own transaction, raises a new request carrying the diff, and
no read path serves the new text before a reviewer approves it."""

from __future__ import annotations

import pytest

from approvals.audit.log import audit_verify
from approvals.models import ApprovalRequest, ApprovedContent, AuditEntry
from approvals.selectors import injection_decisions
from tests.approvals.builders import VAULT_TEXT, approved, document, raised
from tests.factories import import_documents

pytestmark = pytest.mark.django_db

NEW_TEXT = "Rotate the vault keys every thirty days.\nKeep the root token offline.\n"


def test_a_content_change_lapses_the_approval_and_raises_a_request_with_the_diff(kb, agent, rita):
    approval = approved(agent, kb.vault, rita)
    assert ApprovedContent.objects.get(source=kb.vault).documents[0]["text"] == VAULT_TEXT

    import_documents(catalog=kb.catalog, slug="vault", documents=[document("rotation.md", NEW_TEXT)])

    kb.vault.refresh_from_db()
    approval.refresh_from_db()
    new = ApprovalRequest.objects.get(state="pending")
    assert approval.state == "lapsed" and approval.ended_at is not None
    assert (new.agent, new.fingerprint, new.raised_via, new.previous_id, new.diff_base) == (
        agent, kb.vault.fingerprint, "reindex", approval.pk, approval.fingerprint)
    assert "-Rotate the vault keys every ninety days.\n+Rotate the vault keys every thirty days.\n" in new.diff
    decision = injection_decisions(agent=agent, sources=[kb.vault], raised_via="enrichment")[kb.vault.pk]
    assert (decision.allowed, decision.state, decision.request_id) == (False, "pending", new.pk)
    assert "content changed" in decision.reason
    actions = list(AuditEntry.objects.order_by("seq").values_list("action", flat=True))
    assert actions[-2:] == ["request.lapsed", "request.raised"]
    assert audit_verify().broken is None


def test_a_pending_request_for_old_content_lapses_too(kb, agent):
    pending = raised(agent, kb.vault)

    import_documents(catalog=kb.catalog, slug="vault", documents=[document("rotation.md", NEW_TEXT)])

    assert ApprovalRequest.objects.get(pk=pending).state == "lapsed"
    new = ApprovalRequest.objects.get(state="pending")
    assert new.previous_id == pending and new.diff == "" and new.diff_base == ""
