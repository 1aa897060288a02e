"""Reviewers are e-mailed once per new request, after the raise commits, by a task (not
inside the read path): not for a read that finds the request already pending, not for
a raise rolled back, not twice when the task runs twice."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.db import transaction
from django.urls import reverse

from approvals.models import ApprovalRequest
from approvals.services.decisions import request_decide
from approvals.services.notifications import reviewers_notify
from catalog.models import AuditEntry
from tests.approvals.builders import approved, document, gate_raise
from tests.factories import import_documents, person

pytestmark = pytest.mark.django_db


@pytest.fixture
def addressed(rita, rob, cora):
    """rita and rob (reviewers) and cora (a curator) with addresses; a reviewer who left
    (inactive) and one without an address."""
    for user in (rita, rob, cora):
        User.objects.filter(pk=user.pk).update(email=f"{user.username}@example.org")
    person("gone", "reviewer", email="gone@example.org", is_active=False)
    person("quiet", "reviewer")


def raise_for(agent, source, via="enrichment", context="") -> int:
    decisions = gate_raise(agent=agent, sources=[source], via=via, context=context)
    request_id = decisions[source.pk].request_id
    assert request_id is not None
    return request_id


def test_a_new_request_emails_the_reviewers_once_after_it_commits(kb, agent, addressed,
                                                                  django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as queued:
        request_id = raise_for(agent, kb.vault, context="enrich: rotate the vault keys")
    assert queued and mail.outbox == []  # nothing before the commit

    for callback in queued:  # the commit: the task runs (synchronously in tests), and the
        callback()           # audit's after-commit signal, which other channels hear

    [message] = mail.outbox
    assert message.to == ["rita@example.org", "rob@example.org"]
    assert message.subject == f"Lectern: bot asks to read kb/vault (request {request_id})"
    assert "rotate the vault keys" in message.body and "via: enrichment" in message.body
    assert f"http://127.0.0.1:8000{reverse('approvals-request', args=[request_id])}" in message.body
    assert ApprovalRequest.objects.get(pk=request_id).notified_at is not None
    entry = AuditEntry.objects.get(action="request.notified")
    assert (entry.request_id, entry.actor_name, entry.payload) == (request_id, "notifications", {"recipients": 2})


def test_a_read_that_finds_the_request_pending_sends_nothing(kb, agent, addressed,
                                                             django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        first = raise_for(agent, kb.vault)
    with django_capture_on_commit_callbacks(execute=True) as again:
        assert raise_for(agent, kb.vault, via="select") == first

    assert again == [] and len(mail.outbox) == 1


def test_a_raise_rolled_back_tells_no_one(kb, agent, addressed, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as queued:
        with pytest.raises(RuntimeError), transaction.atomic():
            raise_for(agent, kb.vault)
            raise RuntimeError("the read path failed")

    assert queued == [] and mail.outbox == [] and not ApprovalRequest.objects.exists()


def test_the_task_run_twice_sends_once(kb, agent, addressed, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        request_id = raise_for(agent, kb.vault)

    assert reviewers_notify(request_ids=[request_id]) == 1
    assert reviewers_notify(request_ids=[request_id]) == 0
    assert len(mail.outbox) == 1


def test_a_request_decided_before_the_mail_goes_is_not_mailed(kb, agent, rita, addressed,
                                                             django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        request_id = raise_for(agent, kb.vault)
    request_decide(request_id=request_id, reviewer=rita, verdict="approve")

    assert reviewers_notify(request_ids=[request_id]) == 0 and mail.outbox == []


def test_without_a_reviewer_address_nothing_is_sent_nor_marked(kb, agent, rita,
                                                              django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        request_id = raise_for(agent, kb.vault)

    assert mail.outbox == [] and ApprovalRequest.objects.get(pk=request_id).notified_at is None


def test_a_content_change_mails_the_new_request_with_what_it_follows(kb, agent, rita, addressed,
                                                                     django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        old = approved(agent, kb.vault, rita)
    mail.outbox.clear()

    with django_capture_on_commit_callbacks(execute=True):
        import_documents(catalog=kb.catalog, slug="vault", documents=[document("rotation.md", "New text.\n")])

    new = ApprovalRequest.objects.get(state="pending")
    [message] = mail.outbox
    assert f"(request {new.pk})" in message.subject
    assert f"It follows request {old.pk}: the content changed since." in message.body


def test_a_request_after_an_expired_approval_is_mailed_as_the_same_content(kb, agent, rita, addressed,
                                                                           django_capture_on_commit_callbacks):
    old = approved(agent, kb.vault, rita)
    ApprovalRequest.objects.filter(pk=old.pk).update(state="expired")
    mail.outbox.clear()

    with django_capture_on_commit_callbacks(execute=True):
        new = raise_for(agent, kb.vault)

    [message] = mail.outbox
    assert ApprovalRequest.objects.get(pk=new).previous_id == old.pk
    assert f"It follows request {old.pk} (now expired), for the same content." in message.body
    assert "changed" not in message.body
