"""The reviewer's queue in a real browser (Debian's chromium driven by Playwright): a
reviewer signs in, sees the pending count, opens a request, reads the diff and the
text, approves it in place and watches the count drop; bulk decisions, history, the
audit log and the refusals as a person meets them. Each page is photographed into
/tmp/queue-shots/ for a human to look at."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import User

from approvals.models import ApprovalRequest
from approvals.services.decisions import request_decide
from approvals.services.policies import policy_create
from catalog.models import Agent, Catalog, ReferenceSource
from tests.approvals.builders import document, gate_raise
from tests.browser import page_audit, wait_until
from tests.browser import sign_in as browser_sign_in
from tests.factories import agent_with_token, import_documents, person

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery"

VAULT = """# Vault key rotation

Rotate the vault keys every ninety days.
Keep the root token offline, in the safe.
Two people unseal the vault together.
"""
RUNBOOK = """# Payments runbook

When the payment gateway times out, retry twice with backoff.
Page the on-call engineer after the third failure.
Never retry a capture that returned a decline.
"""


@dataclass
class Desk:
    catalog: Catalog
    vault: ReferenceSource
    runbook: ReferenceSource
    support: Agent
    deploy: Agent
    changed: int  # the request carrying a diff
    first: int  # the oldest pending request


def governed(catalog: Catalog, slug: str, name: str, text: str) -> ReferenceSource:
    source = import_documents(catalog=catalog, slug=slug, documents=[document(f"{slug}.md", text)])
    ReferenceSource.objects.filter(pk=source.pk).update(requires_approval=True, name=name,
                                                        description=f"{name} for the operations team.")
    source.refresh_from_db()
    return source


def ask(agent: Agent, source: ReferenceSource, via: str, context: str) -> int:
    request_id = gate_raise(agent=agent, sources=[source], via=via, context=context)[source.pk] \
        .request_id
    assert request_id is not None
    return request_id


@pytest.fixture
def desk(transactional_db) -> Desk:
    """Three pending requests (one carrying the diff of a content change) and one
    rejected, by two agents over two governed references."""
    person("rita", "reviewer", password=PASSWORD, email="rita@example.org")
    rob = person("rob", "reviewer", password=PASSWORD)
    cora = person("cora", "curator", password=PASSWORD)
    person("nobody", password=PASSWORD)
    catalog = Catalog.objects.create(slug="ops", name="Operations")
    vault = governed(catalog, "vault-rotation", "Vault key rotation", VAULT)
    runbook = governed(catalog, "payments-runbook", "Payments runbook", RUNBOOK)
    import_documents(catalog=catalog, slug="notes", documents=[document("notes.md", "Plain notes.\n")])
    support = agent_with_token(name="support-bot", catalogs=[catalog])[0]
    deploy = agent_with_token(name="deploy-bot", catalogs=[catalog])[0]
    policy_create(by=cora, source=runbook, required_approvals=1, description="payments need a reviewer")
    first = ask(support, vault, "enrichment", "enrich: how often do we rotate the vault keys and who holds the root "
                                              "token?")
    approved = ask(support, runbook, "select", "select: @payments-runbook")
    request_decide(request_id=approved, reviewer=rob, verdict="approve", comment="standard runbook")
    import_documents(catalog=catalog, slug="payments-runbook", documents=[document(
        "payments-runbook.md", RUNBOOK.replace("retry twice", "retry three times") + "Escalate to <finance> on "
                                                                                    "a double charge.\n")])
    changed = ApprovalRequest.objects.get(state="pending", previous_id=approved).pk
    rejected = ask(deploy, runbook, "search", "search: payment gateway timeouts")
    request_decide(request_id=rejected, reviewer=rob, verdict="reject", comment="deploy-bot has no business here")
    ask(deploy, vault, "search", "search: vault unseal procedure")
    return Desk(catalog, vault, runbook, support, deploy, changed, first)


def shot(page, name: str, **allowed) -> None:
    page_audit(page, f"approvals-{name}", **allowed)


def sign_in(page, base_url: str, username: str, next_path: str = "/approvals/") -> None:
    browser_sign_in(page, base_url, username, PASSWORD, next_path)


def badge(page) -> str:
    return page.locator("#pending-badge").inner_text().strip()


def test_a_reviewer_approves_a_changed_reference_and_the_count_drops(page, live_server, desk):
    page.goto(f"{live_server.url}/approvals/")
    assert "/accounts/login/?next=/approvals/" in page.url
    page.fill("input[name=username]", "rita")
    page.fill("input[name=password]", "wrong")
    page.click("button:has-text('Sign in')")
    assert "Please enter a correct username and password" in page.locator(".alert").inner_text()
    shot(page, "01-sign-in-error")

    sign_in(page, live_server.url, "rita")
    assert badge(page) == "3"
    rows = page.locator("table.queue tbody tr")
    assert rows.count() == 3
    assert "rita" in page.locator(".account").inner_text() and "reviewer" in page.locator(".roles").text_content()
    shot(page, "02-queue")

    page.click(f"a.req-link:has-text('#{desk.changed}')")
    page.wait_for_url(f"{live_server.url}/approvals/{desk.changed}/")
    assert page.locator("pre.diff .d-del").first.inner_text() == \
        "-When the payment gateway times out, retry twice with backoff."
    assert "+Escalate to <finance> on a double charge." in page.locator("pre.diff").inner_text()
    assert "retry three times" in page.locator("pre.doc-text").inner_text()
    assert "select: @payments-runbook" not in page.locator("blockquote.context").inner_text()  # the new one's
    shot(page, "03-request-with-diff")

    page.fill("#decision-panel textarea[name=comment]", "Escalation line reviewed with finance.")
    page.click("#decision-panel button:has-text('Approve')")
    page.wait_for_selector("#decision-panel .notice")

    assert page.url == f"{live_server.url}/approvals/{desk.changed}/", "the panel updates in place"
    assert "approved" in page.locator("#decision-panel .panel-head .state").inner_text()
    wait_until(page, "() => document.querySelector('#pending-badge').textContent.trim() === '2'")
    assert ApprovalRequest.objects.get(pk=desk.changed).state == "approved"
    shot(page, "04-request-approved")


def test_a_second_reviewer_is_told_when_someone_decided_first(page, live_server, desk):
    sign_in(page, live_server.url, "rita", f"/approvals/{desk.first}/")
    person_b = person("rhea", "reviewer")
    request_decide(request_id=desk.first, reviewer=person_b, verdict="reject", comment="not needed")

    page.fill("#decision-panel textarea[name=comment]", "fine")
    page.click("#decision-panel button:has-text('Approve')")
    alert = page.wait_for_selector("#decision-panel .alert")

    assert "Not recorded." in alert.inner_text() and "already rejected" in alert.inner_text()
    assert ApprovalRequest.objects.get(pk=desk.first).state == "rejected"
    shot(page, "05-request-conflict")


def test_bulk_decisions_report_each_request(page, live_server, desk):
    sign_in(page, live_server.url, "rita")
    page.check("th.pick input[type=checkbox]")
    page.fill("#bulk-form input[name=comment]", "Reviewed together this morning.")
    page.click("#bulk-form button:has-text('Approve selected')")
    report = page.wait_for_selector("#bulk-report .bulk-report")

    assert "3" in report.inner_text() and "approvals recorded" in report.inner_text()
    wait_until(page, "() => document.querySelector('#pending-badge').textContent.trim() === '0'")
    page.wait_for_selector("table.queue td.empty")
    shot(page, "06-bulk-report")


def test_history_audit_and_revocation_pages(page, live_server, desk):
    sign_in(page, live_server.url, "rita", f"/approvals/sources/ops/{desk.runbook.slug}/")
    assert page.locator("ol.timeline > li").count() == 3
    shot(page, "07-source-history")

    page.goto(f"{live_server.url}/approvals/agents/{desk.deploy.pk}/")
    assert "deploy-bot has no business here" in page.locator("ol.timeline").inner_text()
    shot(page, "08-agent-history")

    page.goto(f"{live_server.url}/audit/")
    assert page.locator("table.audit tbody tr").count() >= 8
    page.select_option("select[name=action]", "request.rejected")
    page.click("#audit-filters button[type=submit]")
    page.wait_for_url(re.compile(r"action=request\.rejected"))
    assert page.locator("table.audit tbody tr").count() == 1
    with page.expect_download() as download:
        page.click("a:has-text('Export CSV')")
    assert download.value.suggested_filename.endswith(".csv")
    page.goto(f"{live_server.url}/audit/")
    shot(page, "09-audit-log")

    request_decide(request_id=desk.first, reviewer=User.objects.get(username="rob"), verdict="approve")
    page.goto(f"{live_server.url}/approvals/{desk.first}/")
    page.fill("form.revoke textarea[name=reason]", "The root token procedure changed.")
    page.click("form.revoke button:has-text('Revoke approval')")
    page.wait_for_selector("#decision-panel .notice")
    assert "revoked" in page.locator("#decision-panel .panel-head .state").inner_text()
    shot(page, "10-request-revoked")


def test_the_queue_filters_in_place(page, live_server, desk):
    sign_in(page, live_server.url, "cora", "/approvals/")
    assert page.locator("#pending-badge").count() == 0  # curators see the queue, not the count
    page.select_option("#queue-filters select[name=agent]", str(desk.deploy.pk))
    page.wait_for_url(re.compile(rf"agent={desk.deploy.pk}"))
    wait_until(page, "() => document.querySelectorAll('table.queue tbody tr').length === 1")
    page.select_option("#queue-filters select[name=state]", "")
    wait_until(page, "() => document.querySelectorAll('table.queue tbody tr').length === 2")
    assert page.locator("th.pick").count() == 0  # no bulk controls for a curator
    shot(page, "11-queue-filtered-curator")


def test_a_person_without_a_role_meets_the_403_page(page, live_server, desk):
    sign_in(page, live_server.url, "nobody", "/")
    response = page.goto(f"{live_server.url}/approvals/")
    assert response is not None and response.status == 403
    assert "Not allowed" in page.locator("h1").inner_text()
    shot(page, "12-forbidden")

