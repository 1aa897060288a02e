"""One request's page: what a reviewer decides on (the text an approval lets through, the
diff since the last approved version, the agent, the context, the policy), and the
decisions taken there: approve, reject, revoke, each through the services and audited;
a refusal (decided first by another reviewer, four eyes) is a message, never a 500."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest
from django.urls import reverse

from approvals.models import ApprovalRequest, Decision
from approvals.services.decisions import request_decide
from approvals.services.policies import policy_create
from approvals.services.revocation import approval_revoke
from catalog.models import AuditEntry
from tests.approvals.builders import VAULT_TEXT, approved, document, raised
from tests.factories import import_documents

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def page_of(client, request_id):
    return client.get(reverse("approvals-request", args=[request_id]))


def decide(client, request_id, verdict, comment="", htmx=True):
    return client.post(reverse("approvals-decide", args=[request_id]), {"verdict": verdict, "comment": comment},
                       headers=HTMX if htmx else {})


def test_the_page_shows_the_agent_the_context_the_policy_and_the_text_that_would_be_injected(
        client_for, kb, agent, cora):
    request_id = raised(agent, kb.vault, via="enrichment")
    ApprovalRequest.objects.filter(pk=request_id).update(context="enrich: how do I rotate the vault keys?")

    page = page_of(client_for(cora), request_id)

    html = page.content.decode()
    assert page.status_code == 200
    assert "bot" in html and "kb/vault" in html and "enrichment" in html
    assert "how do I rotate the vault keys?" in html
    assert "rotation.md" in html and "Rotate the vault keys every ninety days." in html
    assert "<strong>0</strong> of 1 required" in html
    assert "requires approval" in html  # the source's own flag is the policy
    assert "No approved version to compare with" in html


def test_the_diff_since_the_last_approved_version_is_coloured_and_escaped(client_for, kb, agent, rita):
    approved(agent, kb.vault, rita)
    changed = VAULT_TEXT.replace("ninety", "thirty") + "<script>alert(1)</script>\n"
    import_documents(catalog=kb.catalog, slug="vault", documents=[document("rotation.md", changed)])
    new = ApprovalRequest.objects.get(state="pending")

    html = page_of(client_for(rita), new.pk).content.decode()

    assert '<span class="d-del">-Rotate the vault keys every ninety days.</span>' in html
    assert '<span class="d-add">+Rotate the vault keys every thirty days.</span>' in html
    assert '<span class="d-add">+&lt;script&gt;alert(1)&lt;/script&gt;</span>' in html
    assert "<script>alert(1)</script>" not in html
    assert f"request #{new.previous_id}" in html


def test_approving_through_htmx_updates_the_panel_in_place_and_audits(client_for, pending, rita):
    response = decide(client_for(rita), pending, "approve", "fine for the bot")

    html = response.content.decode()
    assert response.status_code == 200
    assert json.loads(response["HX-Trigger"]) == {"queue-changed": {}}  # the header's count and the queue reload
    assert 'id="decision-panel"' in html and "<html" not in html
    assert "You approved request" in html and "state-approved" in html and "fine for the bot" in html
    assert ApprovalRequest.objects.get(pk=pending).state == "approved"
    entry = AuditEntry.objects.order_by("-seq")[0]
    assert (entry.action, entry.actor_name, entry.request_id) == ("request.approved", "rita", pending)
    assert (entry.payload["comment"], entry.payload["channel"]) == ("fine for the bot", "web")


def test_rejecting_without_htmx_redirects_back_with_a_message(client_for, pending, rita):
    client = client_for(rita)

    response = decide(client, pending, "reject", "not for bots", htmx=False)

    assert response.status_code == 302 and response["Location"] == reverse("approvals-request", args=[pending])
    page = client.get(response["Location"])
    assert "You rejected request" in page.content.decode()
    assert ApprovalRequest.objects.get(pk=pending).state == "rejected"
    assert Decision.objects.get().comment == "not for bots"


def test_when_two_reviewers_decide_the_first_stands_and_the_second_is_told(client_for, pending, rita, rob):
    rita_client, rob_client = client_for(rita), client_for(rob)
    assert b'value="approve"' in page_of(rob_client, pending).content  # rob opened the page first

    decide(rita_client, pending, "reject", "no")
    late = decide(rob_client, pending, "approve", "yes")

    html = late.content.decode()
    assert late.status_code == 409
    assert late["X-Lectern-Partial"] == "1"  # htmx swaps it in whatever the status
    # the count in the header catches up with rita's decision
    assert json.loads(late["HX-Trigger"]) == {"queue-changed": {}}
    assert "Not recorded." in html and "already rejected" in html
    assert ApprovalRequest.objects.get(pk=pending).state == "rejected"
    assert list(Decision.objects.values_list("reviewer__username", "verdict")) == [("rita", "reject")]


def test_a_conflict_without_htmx_renders_the_page_with_the_message(client_for, pending, rita, rob):
    request_decide(request_id=pending, reviewer=rita, verdict="approve")

    late = decide(client_for(rob), pending, "reject", htmx=False)

    assert late.status_code == 409
    assert b"<html" in late.content and b"already approved" in late.content


def test_four_eyes_keeps_whoever_changed_the_policy_from_approving(client_for, kb, pending, bea, rob):
    policy_create(by=bea, source=kb.vault, four_eyes=True)
    client = client_for(bea)
    assert b"Four eyes: you changed" in page_of(client, pending).content

    refused = decide(client, pending, "approve")

    assert refused.status_code == 403 and refused["X-Lectern-Partial"] == "1"
    assert b"four eyes" in refused.content
    assert ApprovalRequest.objects.get(pk=pending).state == "pending" and not Decision.objects.exists()
    assert decide(client_for(rob), pending, "approve").status_code == 200
    assert ApprovalRequest.objects.get(pk=pending).state == "approved"


def test_two_required_approvals_need_two_reviewers(client_for, kb, pending, cora, rita, rob):
    policy_create(by=cora, source=kb.vault, required_approvals=2)

    first = decide(client_for(rita), pending, "approve")

    assert b"waits for more approvals (1 so far)" in first.content
    assert b"<strong>1</strong> of 2 required" in first.content
    assert b"waits for 1 more approval" in page_of(client_for(rita), pending).content
    assert decide(client_for(rita), pending, "approve").status_code == 409  # not twice by one reviewer
    decide(client_for(rob), pending, "approve")
    assert ApprovalRequest.objects.get(pk=pending).state == "approved"


def test_a_bad_verdict_is_refused_with_400_and_changes_nothing(client_for, pending, rita):
    response = decide(client_for(rita), pending, "maybe")

    assert response.status_code == 400 and b"Check the form" in response.content
    assert ApprovalRequest.objects.get(pk=pending).state == "pending"


def test_revoking_an_approval_needs_a_reason_and_is_audited(client_for, kb, agent, rita):
    request = approved(agent, kb.vault, rita)
    client = client_for(rita)
    assert b"Revoke approval" in page_of(client, request.pk).content

    missing = client.post(reverse("approvals-revoke", args=[request.pk]), {"reason": " "}, headers=HTMX)
    assert missing.status_code == 400 and b"Say why" in missing.content
    assert ApprovalRequest.objects.get(pk=request.pk).state == "approved"

    done = client.post(reverse("approvals-revoke", args=[request.pk]), {"reason": "the key leaked"}, headers=HTMX)

    assert done.status_code == 200 and b"You revoked the approval" in done.content
    assert ApprovalRequest.objects.get(pk=request.pk).state == "revoked"
    entry = AuditEntry.objects.order_by("-seq")[0]
    assert (entry.action, entry.actor_name, entry.payload) == ("request.revoked", "rita", {"reason": "the key leaked"})
    panel = page_of(client, request.pk).content.decode()
    assert "state-revoked\">revoked</span> by <strong>rita</strong>" in panel and "the key leaked" in panel


def test_revoking_what_is_not_approved_is_a_conflict_message(client_for, pending, rita):
    response = client_for(rita).post(reverse("approvals-revoke", args=[pending]), {"reason": "x"}, headers=HTMX)

    assert response.status_code == 409 and b"not approved" in response.content
    assert ApprovalRequest.objects.get(pk=pending).state == "pending"


def test_a_request_for_content_since_replaced_says_so(client_for, kb, agent, rita):
    old = raised(agent, kb.vault)
    import_documents(catalog=kb.catalog, slug="vault", documents=[document("rotation.md", "New text.\n")])

    html = page_of(client_for(rita), old).content.decode()

    assert "state-lapsed" in html and "the source has changed since" in html
    assert "its text is not kept" in html and 'value="approve"' not in html


def test_a_pending_request_for_replaced_content_offers_no_decision(client_for, pending, rita):
    ApprovalRequest.objects.filter(pk=pending).update(fingerprint="0" * 64)  # a read path raced a reindex

    html = page_of(client_for(rita), pending).content.decode()

    assert "it can no longer be decided" in html and 'value="approve"' not in html
    refused = decide(client_for(rita), pending, "approve")
    assert refused.status_code == 409 and b"changed since request" in refused.content


def test_the_text_section_says_what_the_text_is_to_the_agent_in_each_state(client_for, kb, agent, rita):
    request_id = raised(agent, kb.vault)

    def said() -> str:
        html = page_of(client_for(rita), request_id).content.decode()
        assert "Rotate the vault keys every ninety days." in html
        # Only the text is governed: listReferences shows the name and description to any agent.
        assert "the reference's name and description" not in html
        assert "agents see its name and description in their listings either way" in html
        return html

    assert "What this agent may read once approved: this document, exactly as indexed." in said()
    request_decide(request_id=request_id, reviewer=rita, verdict="approve")
    assert "What this agent may read under this approval: this document, exactly as indexed." in said()
    import_documents(catalog=kb.catalog, slug="vault", documents=[document("rotation.md", "New text.\n")])
    assert "What this request was for: this document, exactly as indexed." in said()  # lapsed; kept as approved


def test_a_request_followed_by_another_links_to_it(client_for, kb, agent, rita):
    first = approved(agent, kb.vault, rita)
    import_documents(catalog=kb.catalog, slug="vault", documents=[document("rotation.md", "New text.\n")])
    new = ApprovalRequest.objects.get(state="pending", previous_id=first.pk)

    old_page = page_of(client_for(rita), first.pk).content.decode()
    new_page = page_of(client_for(rita), new.pk).content.decode()

    link = f'<a href="{reverse("approvals-request", args=[new.pk])}">request #{new.pk}</a>'
    assert f"<dt>Followed by</dt><dd>{link}" in old_page
    assert "Followed by" not in new_page


def test_every_time_on_the_page_says_its_zone(client_for, pending, rita):
    ApprovalRequest.objects.filter(pk=pending).update(notified_at=datetime(2026, 3, 4, 10, 30, tzinfo=UTC))
    request_decide(request_id=pending, reviewer=rita, verdict="approve")
    approval_revoke(request_id=pending, by=rita, reason="moved to another team")
    Decision.objects.filter(request_id=pending).update(created_at=datetime(2026, 3, 4, 11, 15, tzinfo=UTC))

    html = page_of(client_for(rita), pending).content.decode()

    assert "reviewers e-mailed 10:30 UTC" in html
    assert "2026-03-04 11:15 UTC · web" in html  # the decision
    times = re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d(?! UTC)", html)
    assert times == [], "a time without its zone"


def test_a_request_after_an_expired_approval_does_not_say_the_content_changed(client_for, kb, agent, rita):
    first = approved(agent, kb.vault, rita)
    ApprovalRequest.objects.filter(pk=first.pk).update(state="expired")
    again = raised(agent, kb.vault)
    assert ApprovalRequest.objects.get(pk=again).previous_id == first.pk

    html = page_of(client_for(rita), again).content.decode()
    queue = client_for(rita).get(reverse("approvals-queue")).content.decode()

    assert "content changed" not in html.lower()  # it is the content approved before
    assert f"request #{first.pk}</a> (the same content; that request is expired)" in html
    assert f"The content is the same as in request #{first.pk} (expired): nothing changed to show" in html
    assert "via select · asked again" in queue and "content changed" not in queue
