"""The person whose change raised a request never decides it: a curator who is also a
reviewer edits a source (its files, its text), and the request for that content (raised
by the reindex that switched to it, or by a read path later) is theirs to leave to
another reviewer, approve or reject, on every channel, unless every policy covering the
source explicitly allows self-approval. Who caused it is recorded on the request."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from approvals.channels.files import SETTLE, decision_files_apply
from approvals.channels.webhooks.endpoints import endpoint_create
from approvals.channels.webhooks.signing import signed_headers
from approvals.models import ApprovalRequest, AuditEntry, Decision
from approvals.selectors import injection_decisions
from approvals.services.bulk import requests_decide_bulk
from approvals.services.decisions import request_decide
from approvals.services.policies import policy_create, policy_update
from catalog.indexing.runs import source_index_now
from catalog.models import IndexRun
from catalog.rest.errors import DomainError
from catalog.sources.editing import uploads_replace
from tests.approvals.builders import approved, document, raised

pytestmark = pytest.mark.django_db


@pytest.fixture
def both(db):
    from tests.factories import person

    return person("both", "curator", "reviewer")


def edited_by(person, kb, text="Rotate the vault keys every thirty days.\n"):
    """`person` replaces the vault's file and it is reindexed, as the dashboard does."""
    uploads_replace(source=kb.vault, documents=[document("rotation.md", text)], by=person)
    run = source_index_now(source=kb.vault, trigger=IndexRun.Trigger.UI)
    assert run.status == IndexRun.Status.SUCCEEDED, run.error
    kb.vault.refresh_from_db()


def refused(request_id, reviewer, verdict="approve") -> DomainError:
    with pytest.raises(DomainError) as caught:
        request_decide(request_id=request_id, reviewer=reviewer, verdict=verdict)
    return caught.value


def test_who_changed_the_content_neither_approves_nor_rejects_the_request_its_reindex_raised(kb, agent, both, rita):
    # given: an approved source, then `both` changes its text, which raises a new request
    old = approved(agent, kb.vault, rita)
    edited_by(both, kb)
    new = ApprovalRequest.objects.get(previous=old, raised_via="reindex")

    # when / then: `both` may not decide it, either way, with no four-eyes policy anywhere
    for verdict in ("approve", "reject"):
        error = refused(new.pk, both, verdict)
        assert (error.status_code, error.error_code) == (403, "self_approval")
        assert "both" in str(error.detail)
    assert ApprovalRequest.objects.get(pk=new.pk).state == "pending"
    assert not Decision.objects.filter(request=new).exists()
    request_decide(request_id=new.pk, reviewer=rita, verdict="approve")  # another reviewer does
    assert injection_decisions(agent=agent, sources=[kb.vault])[kb.vault.pk].allowed


def test_the_request_a_read_path_raises_for_the_editors_content_is_theirs_too(kb, agent, both, rita):
    edited_by(both, kb)
    request_id = raised(agent, kb.vault, via="enrichment")

    assert refused(request_id, both).error_code == "self_approval"
    request = ApprovalRequest.objects.get(pk=request_id)
    assert request.caused_by == both
    raised_entry = AuditEntry.objects.get(action="request.raised", request_id=request_id)
    assert raised_entry.payload["caused_by"] == "both"


def test_a_request_for_content_no_person_changed_has_no_cause_and_any_reviewer_decides(kb, agent, rita):
    request_id = raised(agent, kb.vault)

    assert ApprovalRequest.objects.get(pk=request_id).caused_by is None
    assert request_decide(request_id=request_id, reviewer=rita, verdict="approve").state == "approved"


def test_a_policy_that_allows_self_approval_lets_the_editor_decide_while_every_covering_one_does(kb, agent, both,
                                                                                                cora):
    loose = policy_create(by=cora, source=kb.vault, allow_self_approval=True)
    edited_by(both, kb)
    strict = policy_create(by=cora, catalog=kb.catalog)
    request_id = raised(agent, kb.vault)

    assert refused(request_id, both).error_code == "self_approval"  # the catalog policy does not allow it

    policy_update(policy_id=strict.pk, by=cora, allow_self_approval=True)
    assert request_decide(request_id=request_id, reviewer=both, verdict="approve").state == "approved"
    assert loose.allow_self_approval and not strict.allow_self_approval


def test_the_policy_field_is_audited_when_set_and_changed(kb, cora):
    policy = policy_create(by=cora, source=kb.vault, allow_self_approval=True)
    policy_update(policy_id=policy.pk, by=cora, allow_self_approval=False)

    created, updated = AuditEntry.objects.filter(policy_id=policy.pk).order_by("seq")
    assert created.payload["allow_self_approval"] is True
    assert (updated.payload["before"]["allow_self_approval"], updated.payload["after"]["allow_self_approval"]) == (
        True, False)


def test_bulk_approval_refuses_the_editors_own_rows_and_decides_the_rest(kb, agent, other_agent, both):
    edited_by(both, kb)
    own = raised(agent, kb.vault)
    kb.notes.requires_approval = True
    kb.notes.save(update_fields=["requires_approval"])
    others = raised(other_agent, kb.notes)

    outcomes = requests_decide_bulk(request_ids=[own, others], reviewer=both, verdict="approve")

    assert [(o.request_id, o.decided, o.code) for o in outcomes] == [(own, False, "self_approval"),
                                                                     (others, True, "")]
    assert "another reviewer" in outcomes[0].message
    assert ApprovalRequest.objects.get(pk=own).state == "pending"


# --- every channel -------------------------------------------------------------------------


def test_a_signed_webhook_decision_naming_the_editor_as_reviewer_is_refused(kb, agent, both, cora, client):
    secret = endpoint_create(catalog=kb.catalog, url="https://reviews.example.com/hooks", by=cora).secret
    edited_by(both, kb)
    request_id = raised(agent, kb.vault)
    body = json.dumps({"request_id": request_id, "fingerprint": kb.vault.fingerprint, "verdict": "approve",
                       "reviewer": "both"})

    answer = client.post(f"/api/v1/approvals/{request_id}/decision", data=body, content_type="application/json",
                         headers=signed_headers(secret=secret, message_id="msg_self", at=timezone.now(), body=body))

    assert answer.status_code == 403 and answer.json()["error"]["code"] == "self_approval"
    assert ApprovalRequest.objects.get(pk=request_id).state == "pending"


def test_a_decision_file_by_the_editor_is_refused_whole(kb, agent, both, tmp_path):
    edited_by(both, kb)
    request_id = raised(agent, kb.vault)
    (tmp_path / "own.json").write_text(json.dumps({"request_id": request_id, "fingerprint": kb.vault.fingerprint,
                                                   "verdict": "reject", "reviewer": "both"}))

    (outcome,) = decision_files_apply(directory=tmp_path, now=timezone.now() + SETTLE + timedelta(seconds=1))

    assert outcome.status == "failed" and "[self_approval]" in outcome.reason
    assert ApprovalRequest.objects.get(pk=request_id).state == "pending" and not Decision.objects.exists()


def test_the_request_page_tells_the_editor_another_reviewer_decides_and_refuses_their_post(kb, agent, both,
                                                                                          client_for):
    edited_by(both, kb)
    request_id = raised(agent, kb.vault)
    browser = client_for(both)

    page = browser.get(reverse("approvals-request", args=[request_id])).content.decode()
    posted = browser.post(reverse("approvals-decide", args=[request_id]), {"verdict": "approve"},
                          headers={"HX-Request": "true"})

    assert "Your change raised this request, so another reviewer decides it" in page
    assert 'value="approve"' not in page
    assert posted.status_code == 403 and "self-approval" in posted.content.decode()
    assert ApprovalRequest.objects.get(pk=request_id).state == "pending"


def test_the_bulk_page_reports_the_editors_own_rows_as_refused(kb, agent, both, client_for):
    edited_by(both, kb)
    request_id = raised(agent, kb.vault)

    response = client_for(both).post(reverse("approvals-bulk"), {"ids": [request_id], "verdict": "approve"},
                                     headers={"HX-Request": "true"})

    html = response.content.decode()
    assert response.status_code == 200 and "<strong>1</strong> refused" in html
    assert "another reviewer decides it" in html and "self_approval" in html
    assert ApprovalRequest.objects.get(pk=request_id).state == "pending"
