"""Deciding a request: reviewers only, once each, for the content as it is; two
reviewers at once: one decision stands and the other gets a clear conflict."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest, Decision
from approvals.services.decisions import check_decide, request_decide
from approvals.services.revocation import approval_revoke
from catalog.errors import ApplicationError
from catalog.models import AuditEntry
from catalog.web import status_of
from tests.approvals.builders import document, raised
from tests.approvals.concurrency import Holder, Session, waiting_on_a_lock
from tests.factories import import_documents

pytestmark = pytest.mark.django_db


def refused(code: str, status: int, call, *args, **kwargs) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        call(*args, **kwargs)
    assert (caught.value.code, status_of(caught.value)) == (code, status), caught.value.message
    return caught.value


def test_a_rejection_is_recorded_with_its_comment_and_audited(kb, agent, rita):
    request_id = raised(agent, kb.vault)

    request = request_decide(request_id=request_id, reviewer=rita, verdict="reject", comment="not for bots",
                             channel="webhook")

    assert (request.state, request.decided_at is not None) == ("rejected", True)
    decision = Decision.objects.get()
    assert (decision.reviewer, decision.verdict, decision.comment, decision.channel) == (
        rita, "reject", "not for bots", "webhook")
    entry = AuditEntry.objects.get(action="request.rejected")
    assert (entry.actor_name, entry.request_id, entry.fingerprint) == ("rita", request_id, kb.vault.fingerprint)
    assert entry.payload["comment"] == "not for bots" and entry.payload["channel"] == "webhook"


def test_only_reviewers_decide_and_a_refusal_changes_nothing(kb, agent, cora):
    request_id = raised(agent, kb.vault)

    refused("not_reviewer", 403, request_decide, request_id=request_id, reviewer=cora, verdict="approve")

    assert ApprovalRequest.objects.get(pk=request_id).state == "pending"
    assert not Decision.objects.exists() and not AuditEntry.objects.filter(action__startswith="request.a").exists()


def test_a_decided_request_is_a_conflict(kb, agent, rita, rob):
    request_id = raised(agent, kb.vault)
    request_decide(request_id=request_id, reviewer=rita, verdict="approve")

    error = refused("request_decided", 409, request_decide, request_id=request_id, reviewer=rob, verdict="reject")

    assert error.details == {"state": "approved"}
    assert Decision.objects.count() == 1


def test_bad_input_is_refused_before_anything_is_locked(kb, agent, rita):
    request_id = raised(agent, kb.vault)

    refused("invalid_input", 400, request_decide, request_id=request_id, reviewer=rita, verdict="maybe")
    refused("invalid_input", 400, request_decide, request_id=request_id, reviewer=rita, verdict="approve",
            comment="x" * 4001)
    refused("not_found", 404, request_decide, request_id=request_id + 1000, reviewer=rita, verdict="approve")
    assert ApprovalRequest.objects.get(pk=request_id).state == "pending"


def test_a_request_for_content_that_changed_cannot_be_approved(kb, agent, rita):
    request_id = raised(agent, kb.vault)
    import_documents(catalog=kb.catalog, slug="vault", documents=[document("rotation.md", "New text.\n")])

    refused("request_decided", 409, request_decide, request_id=request_id, reviewer=rita, verdict="approve")
    assert ApprovalRequest.objects.get(pk=request_id).state == "lapsed"


def test_revoking_needs_a_reviewer_and_an_approved_request(kb, agent, rita, cora):
    request_id = raised(agent, kb.vault)
    refused("not_approved", 409, approval_revoke, request_id=request_id, by=rita)
    request_decide(request_id=request_id, reviewer=rita, verdict="approve")
    refused("not_reviewer", 403, approval_revoke, request_id=request_id, by=cora)

    request = approval_revoke(request_id=request_id, by=rita, reason="leaked")

    assert (request.state, request.ended_at is not None) == ("revoked", True)
    assert AuditEntry.objects.get(action="request.revoked").payload == {"reason": "leaked"}


@pytest.mark.django_db(transaction=True)
def test_two_reviewers_deciding_at_once_one_decision_stands_the_other_gets_a_conflict(kb, agent, rita, rob):
    request_id = raised(agent, kb.vault)
    # given rita's decision under way: her check has locked the source and the request
    first = Holder(lambda: check_decide(request_id=request_id, reviewer=rita, verdict="approve", comment="",
                                        channel="web"),
                   lambda checked: request_decide_rest(checked, rita)).hold()
    # when rob decides the same request meanwhile, he waits for her
    second = Session(lambda: request_decide(request_id=request_id, reviewer=rob, verdict="reject"))
    second.start()
    waiting_on_a_lock(second)

    first.release()

    # then hers stands, and he gets a conflict saying why; nothing of his was recorded
    with pytest.raises(ApplicationError) as conflict:
        second.outcome()
    assert (status_of(conflict.value), conflict.value.code) == (409, "request_decided")
    assert "already approved" in conflict.value.message
    request = ApprovalRequest.objects.get(pk=request_id)
    assert (request.state, request.approvals) == ("approved", 1)
    assert list(Decision.objects.values_list("reviewer__username", "verdict")) == [("rita", "approve")]
    assert AuditEntry.objects.filter(action="request.approved").count() == 1


def request_decide_rest(checked, reviewer):
    from approvals.services.decisions import do_decide

    request, rule = checked
    return do_decide(request=request, rule=rule, reviewer=reviewer, verdict="approve", comment="", channel="web")
