"""The person whose change raised a request never decides it: a curator who is also a
reviewer edits a source (its files, its text), and the request for that content (raised
by the reindex that switched to it, or by a read path later) is theirs to leave to
another reviewer, approve or reject, on every channel, unless every policy covering the
source explicitly allows self-approval. Who caused it is recorded on the request: every
person whose edits the content came from, whatever changed the source after them (an
agent's edit, an import, a rename) and however many edited it before one reindex."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from approvals.channels.files import SETTLE, decision_files_apply
from approvals.channels.webhooks.endpoints import endpoint_create
from approvals.channels.webhooks.signing import signed_headers
from approvals.models import ApprovalRequest, Decision
from approvals.selectors.gate import injection_decisions
from approvals.services.bulk import requests_decide_bulk
from approvals.services.decisions import request_decide
from approvals.services.policies import policy_create, policy_update
from catalog.errors import ApplicationError
from catalog.indexing.runs import source_index_now
from catalog.models import AuditEntry, Document, IndexRun, ReferenceSource
from catalog.sources.editing import uploads_add, uploads_replace
from catalog.web import status_of
from tests.approvals.builders import VAULT_TEXT, approved, document, raised
from tests.factories import agent_with_token, import_documents, person

pytestmark = pytest.mark.django_db


@pytest.fixture
def both(db):
    return person("both", "curator", "reviewer")


def edited_by(person, kb, text="Rotate the vault keys every thirty days.\n"):
    """`person` replaces the vault's file and it is reindexed, as the dashboard does."""
    uploads_replace(source=kb.vault, documents=[document("rotation.md", text)], by=person)
    run = source_index_now(source=kb.vault, trigger=IndexRun.Trigger.UI)
    assert run.status == IndexRun.Status.SUCCEEDED, run.error
    kb.vault.refresh_from_db()


def causes(request_id) -> list[str]:
    return sorted(ApprovalRequest.objects.get(pk=request_id).caused_by.values_list("username", flat=True))


def refused(request_id, reviewer, verdict="approve") -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
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
        assert (status_of(error), error.code) == (403, "self_approval")
        assert "both" in error.message
    assert ApprovalRequest.objects.get(pk=new.pk).state == "pending"
    assert not Decision.objects.filter(request=new).exists()
    request_decide(request_id=new.pk, reviewer=rita, verdict="approve")  # another reviewer does
    assert injection_decisions(agent=agent, sources=[kb.vault])[kb.vault.pk].allowed


def test_the_request_a_read_path_raises_for_the_editors_content_is_theirs_too(kb, agent, both, rita):
    edited_by(both, kb)
    request_id = raised(agent, kb.vault, via="enrichment")

    assert refused(request_id, both).code == "self_approval"
    assert causes(request_id) == ["both"]
    raised_entry = AuditEntry.objects.get(action="request.raised", request_id=request_id)
    assert raised_entry.payload["caused_by"] == ["both"]


def test_a_request_for_content_no_person_changed_has_no_cause_and_any_reviewer_decides(kb, agent, rita):
    request_id = raised(agent, kb.vault)

    assert causes(request_id) == []
    assert request_decide(request_id=request_id, reviewer=rita, verdict="approve").state == "approved"


def test_a_policy_that_allows_self_approval_lets_the_editor_decide_while_every_covering_one_does(kb, agent, both,
                                                                                                cora):
    loose = policy_create(by=cora, source=kb.vault, allow_self_approval=True)
    edited_by(both, kb)
    strict = policy_create(by=cora, catalog=kb.catalog)
    request_id = raised(agent, kb.vault)

    assert refused(request_id, both).code == "self_approval"  # the catalog policy does not allow it

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


# --- every author, however the source changed after them ------------------------------------


@pytest.fixture
def bea(db):
    return person("bea", "curator", "reviewer")


def edits(person, kb, path="rotation.md", text="Rotate the vault keys every thirty days.\n"):
    """`person` changes one file of the vault on the dashboard; nothing is reindexed yet."""
    uploads_add(source=kb.vault, documents=[document(path, text)], by=person)


def reindexed(kb, progress=None):
    run = source_index_now(source=kb.vault, trigger=IndexRun.Trigger.UI, progress=progress)
    assert run.status == IndexRun.Status.SUCCEEDED, run.error
    kb.vault.refresh_from_db()


def raised_by_reindex(old):
    return ApprovalRequest.objects.get(previous=old, raised_via="reindex").pk


def test_a_curator_agents_put_after_the_edit_does_not_make_the_editors_change_anyones(kb, agent, both, rita,
                                                                                       django_capture_on_commit_callbacks):
    # given: an approved source; `both` edits it, then a curator agent's token puts a file before the reindex
    old = approved(agent, kb.vault, rita)
    edits(both, kb)
    _, token = agent_with_token(name="both-helper", catalogs=[kb.catalog], is_curator=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")

    # when: the agent's PUT queues the reindex that switches both edits in
    with django_capture_on_commit_callbacks(execute=True):
        put = client.put("/api/v1/catalogs/kb/sources/vault/files",
                         {"path": "extra.md", "title": "Extra", "text": "Seal the vault at night.\n"}, format="json")
    assert put.status_code == 202

    # then: the request names `both` (the agent adds nobody), who may not decide it
    new = raised_by_reindex(old)
    assert causes(new) == ["both"]
    assert refused(new, both).code == "self_approval"
    assert ApprovalRequest.objects.get(pk=new).state == "pending" and not Decision.objects.filter(request=new)


def test_a_curator_agents_put_after_the_edit_was_indexed_leaves_the_editor_its_author(kb, agent, both,
                                                                                     django_capture_on_commit_callbacks):
    # given: the content indexed came from `both`; then a curator agent's PUT is indexed too
    edits(both, kb)
    reindexed(kb)
    _, token = agent_with_token(name="both-helper", catalogs=[kb.catalog], is_curator=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    with django_capture_on_commit_callbacks(execute=True):
        client.put("/api/v1/catalogs/kb/sources/vault/files",
                   {"path": "extra.md", "title": "Extra", "text": "Seal the vault at night.\n"}, format="json")
    assert Document.objects.filter(source=kb.vault, path="extra.md").exists()

    # when: an agent that never had it approved reads it
    request_id = raised(agent, kb.vault, via="enrichment")

    # then: `both`'s text is still served, and so theirs to leave to another reviewer
    assert causes(request_id) == ["both"]
    assert refused(request_id, both).code == "self_approval"


def test_an_import_after_the_edit_does_not_make_the_editors_change_anyones(kb, agent, both, rita):
    old = approved(agent, kb.vault, rita)
    edits(both, kb)

    import_documents(catalog=kb.catalog, slug="vault", documents=[document("rotation.md", VAULT_TEXT + "More.\n")])

    new = raised_by_reindex(old)
    assert causes(new) == ["both"]
    assert refused(new, both, "reject").code == "self_approval"


def test_an_admin_rename_after_the_edit_does_not_make_the_editors_change_the_renamers(kb, agent, both, rita, client):
    # given: `both` edits the vault; an administrator renames it in the admin before the reindex
    old = approved(agent, kb.vault, rita)
    edits(both, kb)
    client.force_login(person("root", is_staff=True, is_superuser=True))
    renamed = client.post(f"/admin/catalog/referencesource/{kb.vault.pk}/change/", {
        "catalog": kb.catalog.pk, "slug": "vault", "name": "Key vault", "description": "", "mode": kb.vault.mode,
        "kind": "upload", "location": kb.vault.location, "content": "", "requires_approval": "on",
        "max_depth": kb.vault.max_depth, "max_pages": kb.vault.max_pages})
    assert renamed.status_code == 302, renamed.content.decode()[-2000:]
    assert ReferenceSource.objects.values_list("changed_by__username", flat=True).get(pk=kb.vault.pk) == "root"

    # when
    reindexed(kb)

    # then: a change of the name is no change of the content: `both` is still its author
    new = raised_by_reindex(old)
    assert causes(new) == ["both"]
    assert refused(new, both).code == "self_approval"


def test_two_people_who_edit_before_one_reindex_may_neither_decide(kb, agent, both, bea, rita):
    old = approved(agent, kb.vault, rita)
    edits(both, kb)
    edits(bea, kb, "sealing.md", "Seal the vault at night.\n")

    reindexed(kb)

    new = raised_by_reindex(old)
    assert causes(new) == ["bea", "both"]
    assert AuditEntry.objects.get(action="request.raised", request_id=new).payload["caused_by"] == ["bea", "both"]
    for editor in (both, bea):
        assert refused(new, editor).code == "self_approval"
    assert request_decide(request_id=new, reviewer=rita, verdict="approve").state == "approved"


def test_a_read_path_names_the_authors_of_the_content_indexed_not_whoever_edited_it_since(kb, agent, both, bea):
    # given: the content indexed came from `both`; `bea` has edited it since, not indexed yet
    edits(both, kb)
    reindexed(kb)
    edits(bea, kb, "sealing.md", "Seal the vault at night.\n")

    # when: an agent's read raises the request for the content indexed now
    request_id = raised(agent, kb.vault, via="enrichment")

    # then: it is `both`'s to leave, and `bea`'s (whose edit it does not hold) to decide
    assert causes(request_id) == ["both"]
    assert refused(request_id, both).code == "self_approval"
    assert request_decide(request_id=request_id, reviewer=bea, verdict="approve").state == "approved"


def test_an_edit_made_while_a_reindex_runs_is_left_to_the_next_one(kb, agent, both, bea, rita):
    # given: `both` edits; `bea` edits after the reindex read the content, before it switches
    old = approved(agent, kb.vault, rita)
    edits(both, kb)

    def bea_edits_after_collecting(stage, done, total):
        if stage == "collect":
            edits(bea, kb, "sealing.md", "Seal the vault at night.\n")

    # when
    reindexed(kb, progress=bea_edits_after_collecting)

    # then: the switch holds `both`'s edit alone; `bea` is an author of the next content
    first = raised_by_reindex(old)
    assert causes(first) == ["both"]
    assert not Document.objects.filter(source=kb.vault, path="sealing.md").exists()
    reindexed(kb)
    second = raised_by_reindex(first)
    assert "bea" in causes(second)
    assert refused(second, bea).code == "self_approval"


def test_a_request_that_follows_an_undecided_one_names_its_people_too(kb, agent, both, bea, rita):
    # given: `both`'s edit raised a request nobody decided; `bea` edits and the content is reindexed
    old = approved(agent, kb.vault, rita)
    edits(both, kb)
    reindexed(kb)
    undecided = raised_by_reindex(old)
    edits(bea, kb, "sealing.md", "Seal the vault at night.\n")

    reindexed(kb)

    # then: the new request's diff against the approved text holds both changes, and names both people
    new = raised_by_reindex(undecided)
    request = ApprovalRequest.objects.get(pk=new)
    assert "thirty days" in request.diff and "Seal the vault" in request.diff
    assert causes(new) == ["bea", "both"]
    assert refused(new, both).code == "self_approval"


def test_four_eyes_bars_the_editor_after_a_curator_agents_put_even_where_self_approval_is_allowed(
        kb, agent, both, cora, rita, django_capture_on_commit_callbacks):
    policy_create(by=cora, source=kb.vault, four_eyes=True, allow_self_approval=True)
    old = approved(agent, kb.vault, rita)
    edits(both, kb)
    _, token = agent_with_token(name="both-helper", catalogs=[kb.catalog], is_curator=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    with django_capture_on_commit_callbacks(execute=True):
        client.put("/api/v1/catalogs/kb/sources/vault/files",
                   {"path": "extra.md", "title": "Extra", "text": "Seal the vault at night.\n"}, format="json")

    new = raised_by_reindex(old)
    error = refused(new, both)
    assert (status_of(error), error.code) == (403, "four_eyes")
    assert ApprovalRequest.objects.get(pk=new).approvals == 0


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
