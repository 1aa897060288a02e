"""Issue 12 end to end, as in production: a web server (pytest-django's live server), a
django-q2 worker (`manage.py qcluster` on the test database), a file-backed reference
that needs approval, an agent calling the REST API over HTTP with its Bearer token, and
a reviewer in Debian's chromium.

A prompt is enriched with the reference withheld (a request is raised); the reviewer
signs in, reads the text in the queue and approves it; the same prompt injects the
reference and its file reads as approved; the file changes on disk (until the reindex
the agent still reads only the approved text); the scan the worker runs on its schedule
reindexes it, the approval lapses, and the agent is refused the reference again (a new
request, neither the old text nor the new one in any answer) while the queue shows the
new request with the diff against the approved text.

Every wait is on a condition (Playwright's, or django-q2's wait for a task's result),
bounded; each step is audited (tests.browser.page_audit: console, accessibility, 1280 and 390 px) and photographed."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django_q.conf import Conf
from django_q.models import Schedule
from django_q.tasks import async_task, result, result_group
from playwright.sync_api import expect

from catalog.indexing.runs import TASK_NAME
from catalog.models import Catalog, IndexRun, ReferenceSource
from tests.browser import page_audit
from tests.config.servers import qcluster
from tests.factories import agent_with_token, person

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BASE_DIR = Path(__file__).resolve().parents[3]
PASSWORD = "correct horse battery"
WORKER_WAIT_MS = 120_000  # a bound, not a pause: the worker starts, loads the model and indexes

SOURCE, FILE = "vault-rotation", "vault/rotation.md"
DESCRIPTION = "How the operations team rotates and unseals the vault."
PROMPT = "When are the vault keys due again? Follow @vault-rotation."
APPROVED = """# Rotating the vault keys

Rotate the vault keys every ninety days.
Keep the root token offline, in the safe.
Two people unseal the vault together.
"""
CHANGED = """# Rotating the vault keys

Rotate the vault keys every thirty days.
Keep the root token offline, in the safe.
Two people unseal the vault together.
Record every unseal in the vault log.
"""
# What an agent must not receive while the reference is withheld: any line of its text,
# as approved or as changed. (Its name and description are not governed: listReferences
# shows them either way.)
GOVERNED = sorted({line for line in (APPROVED + CHANGED).splitlines() if line})


# --- the agent: HTTP to the live server with its token ---------------------------------------


@dataclass
class AgentClient:
    base_url: str
    token: str

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(
            self.base_url + path, method=method, data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def enrich(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the answer, its hint for the reference) for the prompt."""
        status, body = self.call("POST", "/api/v1/enrich", {"text": PROMPT, "surface": "prompt"})
        assert status == 200, body
        (hint,) = [h for h in body["hints"] if h["source_id"] == SOURCE]
        return body, hint

    def read_file(self) -> tuple[int, dict[str, Any]]:
        return self.call("GET", f"/api/v1/references/ops/{SOURCE}/file?path={FILE}")

    def requests(self) -> list[dict[str, Any]]:
        status, body = self.call("GET", "/api/v1/approvals")
        assert status == 200, body
        return body["results"]


def assert_withheld(agent: AgentClient, reason: str) -> int:
    """The reference is withheld from the agent: the enrich answer names it with the
    request for its content now, a file read is refused naming the same request, and
    neither answer carries any of its text. The request's id."""
    body, hint = agent.enrich()
    request_id = hint["request_id"]
    assert (hint["withheld"], hint["injected"], hint["via"]) == (True, "none", "mention"), hint
    assert isinstance(request_id, int) and hint["reason"] == reason.format(request_id)
    assert f"@{SOURCE}: Vault key rotation (withheld: {hint['reason']})" in body["text"]
    assert f"**Reference @{SOURCE}" not in body["text"]
    status, refused = agent.read_file()
    assert (status, refused["error"]["code"]) == (403, "withheld"), refused
    assert refused["error"]["details"] == {"state": "pending", "request_id": request_id}
    answers = json.dumps([body, refused])
    assert [text for text in GOVERNED if text in answers] == []
    return request_id


def assert_injected(agent: AgentClient) -> str:
    """The reference is injected: the expansion block names it with its description and
    file, and the file reads; the text the agent reads."""
    body, hint = agent.enrich()
    assert (hint["withheld"], hint["injected"], hint["request_id"]) == (False, "expand", None), hint
    block = f"**Reference @{SOURCE}: Vault key rotation** (selected; its files are authorised for reading)\n" \
            f"{DESCRIPTION}\nFiles:\n- {FILE}\n---"
    assert block in body["text"]
    status, read = agent.read_file()
    assert status == 200, read
    return read["text"]


# --- the worker: a django-q2 cluster on the test database ------------------------------------


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def scan(self, source: ReferenceSource) -> IndexRun:
        """What the worker's schedule does every LECTERN_SCAN_MINUTES, now rather than at
        the scheduler's next minute: the scan task, which queues a run for each source whose
        files moved, then the run the worker executes. That run, finished."""
        before = IndexRun.objects.filter(source=source).order_by("-pk").values_list("pk", flat=True).first() or 0
        scanned = result(async_task("catalog.tasks.scan"), wait=WORKER_WAIT_MS)
        assert scanned == 1, f"the scan queued {scanned!r} runs\n{self.output()}"
        run = IndexRun.objects.get(source=source, pk__gt=before)
        status = result(TASK_NAME.format(run.pk), wait=WORKER_WAIT_MS)
        run.refresh_from_db()
        assert status == run.status == IndexRun.Status.SUCCEEDED, f"{status!r}: {run.error}\n{self.output()}"
        assert run.trigger == IndexRun.Trigger.SCHEDULE
        return run

    def mails(self, count: int) -> str:
        """The worker's log once it has e-mailed the reviewers `count` times, a mail per
        request raised (the console backend writes each one there)."""
        sent = result_group("notify-reviewers", wait=WORKER_WAIT_MS, count=count)
        assert list(sent or []) == [1] * count, f"{sent!r}\n{self.output()}"
        return self.log.read_text(errors="replace")


@pytest.fixture
def files(settings, tmp_path) -> Path:
    """The source root the web server and the worker read glob sources from."""
    root = tmp_path / "sources"
    (root / "vault").mkdir(parents=True)
    settings.LECTERN_SOURCE_ROOTS = [root]
    return root


@pytest.fixture
def worker(transactional_db, files, tmp_path, monkeypatch) -> Iterator[Worker]:
    """`manage.py qcluster` with production settings on the test database, as `make
    serve` runs one beside the web server; this process enqueues for it, as the web
    server does (no synchronous queue). E-mail goes to its log. The schedules are
    removed: the test runs the scan when the scenario needs it."""
    Schedule.objects.all().delete()
    log = tmp_path / "qcluster.log"
    monkeypatch.setattr(Conf, "SYNC", False)
    with qcluster(log, LECTERN_SOURCE_ROOTS=str(files), LECTERN_DECISION_DIR=str(tmp_path / "decisions"),
                  EMAIL_BACKEND="django.core.mail.backends.console.EmailBackend") as process:
        yield Worker(process, log)


# --- the reviewer: pages in the browser ------------------------------------------------------


def shot(page, name: str) -> None:
    page_audit(page, f"e2e-{name}")


def open_request(page, request_id: int) -> None:
    page.click(f"table.queue a.req-link:has-text('#{request_id}')")
    page.wait_for_url(re.compile(rf"/approvals/{request_id}/$"))


# --- the scenario ----------------------------------------------------------------------------


def test_a_withheld_reference_is_approved_injected_changed_on_disk_and_withheld_again(
        page, live_server, files, worker):
    person("rita", "reviewer", password=PASSWORD, email="rita@example.org")
    (files / FILE).write_text(APPROVED, encoding="utf-8")
    catalog = Catalog.objects.create(slug="ops", name="Operations")
    source = ReferenceSource.objects.create(catalog=catalog, slug=SOURCE, name="Vault key rotation",
                                            description=DESCRIPTION, kind=ReferenceSource.Kind.GLOB,
                                            location="vault/*.md", requires_approval=True)
    assert worker.scan(source).counts["documents_added"] == 1  # a new source: the scan indexes it
    _, token = agent_with_token(name="support-bot", catalogs=[catalog])
    agent = AgentClient(live_server.url, token)

    # The prompt is enriched with the reference withheld: a request is raised for it, and
    # the worker e-mails the reviewers.
    first = assert_withheld(agent, "requires approval; request {} awaits a reviewer")
    assert f"Subject: Lectern: support-bot asks to read ops/{SOURCE} (request {first})" in worker.mails(1)

    # The reviewer signs in, finds the request in the queue and reads the text it lets through.
    page.goto(f"{live_server.url}/approvals/")
    page.wait_for_url(re.compile(r"/accounts/login/\?next=/approvals/$"))
    page.fill("input[name=username]", "rita")
    page.fill("input[name=password]", PASSWORD)
    shot(page, "01-sign-in")
    page.click("button:has-text('Sign in')")
    page.wait_for_url(f"{live_server.url}/approvals/")
    expect(page.locator("#pending-badge")).to_have_text("1")
    row = page.locator("table.queue tbody tr")
    expect(row).to_have_count(1)
    for text in (f"#{first}", "support-bot", f"ops/{SOURCE}", "via enrichment", "Follow @vault-rotation"):
        expect(row).to_contain_text(text)
    shot(page, "02-queue-pending")

    open_request(page, first)
    expect(page.locator("h1")).to_contain_text(f"support-bot asks to read ops/{SOURCE}")
    assert page.locator("details.document summary code").all_inner_texts() == [FILE]
    assert page.locator("pre.doc-text").text_content() == APPROVED  # exactly what the agent will read
    expect(page.locator("pre.diff")).to_have_count(0)  # nothing approved before: no diff
    shot(page, "03-request-text")

    # It is approved with a comment, in place (htmx swaps the decision panel).
    page.fill("#decision-panel textarea[name=comment]", "Rotation procedure checked against the runbook.")
    page.click("#decision-panel button:has-text('Approve')")
    expect(page.locator("#decision-panel .notice")).to_be_visible()
    assert page.url == f"{live_server.url}/approvals/{first}/"
    expect(page.locator("#decision-panel .panel-head .state")).to_have_text("approved")
    expect(page.locator("#decision-panel ol.decisions")).to_contain_text("approved by rita")
    expect(page.locator("#decision-panel ol.decisions blockquote")).to_have_text(
        "Rotation procedure checked against the runbook.")
    expect(page.locator("#pending-badge")).to_have_text("0")
    shot(page, "04-request-approved")

    # The same prompt now injects the reference, and its file reads as the reviewer read it.
    assert assert_injected(agent) == APPROVED

    # The file changes on disk. Until it is reindexed, a read is refused as changed: the
    # agent gets neither the new text, which no one has approved, nor the old one as if
    # it were still the file's.
    (files / FILE).write_text(CHANGED, encoding="utf-8")
    assert len(CHANGED.encode()) != len(APPROVED.encode())  # the scan sees sizes and mtimes, not contents
    status, refused = agent.read_file()
    assert (status, refused["error"]["code"]) == (409, "reference_changed"), refused
    assert [text for text in GOVERNED if text in json.dumps(refused)] == []

    # The scheduled scan reindexes it; the switch lapses the approval and raises a request
    # for the new content.
    assert worker.scan(source).counts["documents_changed"] == 1
    lapsed, raised = sorted(agent.requests(), key=lambda r: r["id"])
    assert (lapsed["id"], lapsed["state"]) == (first, "lapsed")
    assert (raised["state"], raised["raised_via"], raised["previous_id"]) == ("pending", "reindex", first)

    # The same prompt is refused again, naming the new request; no text, old or new. The
    # reviewers are e-mailed about the new request.
    assert assert_withheld(
        agent, "requires approval; its content changed since it was last approved or requested; request {} awaits "
               "a reviewer") == raised["id"]
    mails = worker.mails(2)
    assert f"(request {raised['id']})" in mails and f"It follows request {first}: the content changed since." in mails

    # The queue shows the new request, and its page the diff against the approved text.
    page.goto(f"{live_server.url}/approvals/")
    expect(page.locator("#pending-badge")).to_have_text("1")
    row = page.locator("table.queue tbody tr")
    expect(row).to_have_count(1)
    for text in (f"#{raised['id']}", "support-bot", f"ops/{SOURCE}", "via reindex · content changed"):
        expect(row).to_contain_text(text)
    shot(page, "05-queue-after-reindex")

    open_request(page, raised["id"])
    expect(page.locator(".request-main dl.facts")).to_contain_text(f"request #{first} (the content changed)")
    assert page.locator("pre.diff .d-del").all_inner_texts() == ["-Rotate the vault keys every ninety days."]
    assert page.locator("pre.diff .d-add").all_inner_texts() == [
        "+Rotate the vault keys every thirty days.", "+Record every unseal in the vault log."]
    assert f"--- a/{FILE}" in page.locator("pre.diff").inner_text()
    assert page.locator("pre.doc-text").text_content() == CHANGED
    expect(page.locator("#decision-panel .panel-head .state")).to_have_text("pending")
    expect(page.locator("#decision-panel button:has-text('Approve')")).to_be_visible()
    shot(page, "06-request-diff")

    page.click(f".request-main dl.facts a:has-text('request #{first}')")
    page.wait_for_url(f"{live_server.url}/approvals/{first}/")
    expect(page.locator("#decision-panel .panel-head .state")).to_have_text("lapsed")
    expect(page.locator(".request-main dl.facts a", has_text=f"request #{raised['id']}")).to_be_visible()
    assert page.locator("pre.doc-text").text_content() == APPROVED  # the text that was approved, kept
    shot(page, "07-old-request-lapsed")
