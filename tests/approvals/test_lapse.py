"""An approval covers the content it was granted for: a reindex that changes the content
lapses it in the switch's own transaction, raises a new request carrying the diff, and
no read path serves the new text before a reviewer approves it."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest, ApprovedContent
from approvals.selectors.gate import injection_decisions
from approvals.services.decisions import request_decide
from catalog.audit.log import audit_verify
from catalog.models import AuditEntry
from tests.approvals.builders import VAULT_TEXT, approved, document, gate_raise, raised
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
    decision = gate_raise(agent=agent, sources=[kb.vault], via="enrichment")[kb.vault.pk]
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


def test_the_lapse_commits_or_fails_with_the_switch(kb, agent, rita):
    """The lapse runs inside the switch's transaction: when anything after it fails, the
    switch is undone with it and the old, approved content stays served."""
    from catalog.indexing.runs import source_import
    from catalog.models import Document, IndexRun
    from catalog.signals import content_switched

    approval = approved(agent, kb.vault, rita)

    def fail_after_the_lapse(**kwargs) -> None:
        assert ApprovalRequest.objects.get(pk=approval.pk).state == "lapsed"  # in this very transaction
        raise RuntimeError("the switch fails after the lapse")

    content_switched.connect(fail_after_the_lapse, dispatch_uid="test-fail-after-lapse")
    try:
        run = source_import(catalog=kb.catalog, slug="vault", documents=[document("rotation.md", NEW_TEXT)],
                            trigger=IndexRun.Trigger.COMMAND)
    finally:
        content_switched.disconnect(dispatch_uid="test-fail-after-lapse")

    assert run.status == IndexRun.Status.FAILED and "the switch fails after the lapse" in run.error
    approval.refresh_from_db()
    assert approval.state == "approved"
    assert ApprovalRequest.objects.count() == 1
    assert Document.objects.get(source=kb.vault).text == VAULT_TEXT
    assert injection_decisions(agent=agent, sources=[kb.vault])[kb.vault.pk].allowed


def test_no_read_path_serves_the_new_text_before_it_is_approved(kb, agent, rita):
    from rest_framework.test import APIClient

    from catalog.agents import agent_token_rotate
    from tests.approvals.builders import raised as raise_for

    _, token = agent_token_rotate(name=agent.name)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    approved(agent, kb.vault, rita)
    client.post("/api/v1/references/select", {"ids": ["vault"]}, format="json")
    assert "ninety days" in client.get("/api/v1/references/kb/vault/file?path=rotation.md").json()["text"]

    import_documents(catalog=kb.catalog, slug="vault", documents=[document("rotation.md", NEW_TEXT)])

    answers = [
        client.post("/api/v1/enrich", {"text": "@vault", "surface": "prompt"}, format="json").content,
        client.post("/api/v1/references/select", {"ids": ["vault"]}, format="json").content,
        client.post("/api/v1/search", {"catalog": "kb", "query": "vault keys thirty days", "mode": "bm25"},
                    format="json").content,
        client.get("/api/v1/references/kb/vault/file?path=rotation.md").content,
        client.get("/api/v1/agent/instructions").content,
    ]
    for answer in answers:
        assert b"thirty days" not in answer and b"ninety days" not in answer
    new = ApprovalRequest.objects.get(state="pending")
    assert ApprovalRequest.objects.filter(state="pending").count() == 1  # the reads raised nothing more

    request_decide(request_id=raise_for(agent, kb.vault), reviewer=rita, verdict="approve")
    assert new.pk == ApprovalRequest.objects.get(state="approved").pk
    assert "thirty days" in client.get("/api/v1/references/kb/vault/file?path=rotation.md").json()["text"]
    hits = client.post("/api/v1/search", {"catalog": "kb", "query": "vault keys thirty days", "mode": "bm25"},
                       format="json").json()["results"]
    assert "thirty days" in hits[0]["content"]
