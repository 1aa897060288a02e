"""The curator's dashboard in a real browser (Debian's chromium driven by Playwright): a
catalog created after a refusal shown in place; sources of every kind created (files
uploaded with a progress bar, a glob with its preview, an inline text tagged in the tag
editor), edited, reindexed, their runs read, deleted after a confirmation that says what
goes; a reviewer reading the same pages without the means to change them. The main
actions are done by keyboard. Indexing runs in the request here (the test settings'
synchronous queue); tests/catalog/pages/test_watch_indexing_browser.py watches a real
worker. Every page state shown is audited (tests.browser.page_audit) and photographed."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from approvals.services.decisions import request_decide
from catalog.models import Catalog, IndexRun, ReferenceSource
from catalog.tags import tags_ensure
from tests.approvals.builders import raised
from tests.browser import page_audit, tab_to, wait_until
from tests.browser import sign_in as browser_sign_in
from tests.catalog.pages.conftest import build_ops
from tests.factories import agent_with_token, person

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery"


@pytest.fixture
def cora(transactional_db):
    return person("cora", "curator", password=PASSWORD)


@pytest.fixture
def ops(transactional_db, root):
    return build_ops(root)


def shot(page, name: str, **allowed) -> None:
    page.evaluate("window.scrollTo(0, 0)")  # the sticky header at the top of the whole-page photograph
    page_audit(page, f"catalogs-{name}", **allowed)


def sign_in(page, base_url: str, username: str, next_path: str = "/catalogs/") -> None:
    browser_sign_in(page, base_url, username, PASSWORD, next_path)




def test_a_curator_creates_a_catalog_after_fixing_what_was_refused_in_place(page, live_server, cora):
    sign_in(page, live_server.url, "cora")
    expect(page.locator("table.catalogs td.empty")).to_contain_text("No catalogs yet.")
    expect(page.locator("nav.primary a[aria-current=page]")).to_have_text("Catalogs")
    shot(page, "01-list-empty")

    tab_to(page, "a.button:has-text('New catalog')")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/catalogs/new")
    page.fill("#id_slug", "handbooks")
    page.fill("#id_name", "Team handbooks")
    page.fill("#id_description", "What every team writes down.")
    page.fill("#id_chunk_size", "300")
    page.fill("#id_chunk_overlap", "300")
    tab_to(page, "#catalog-form button[type=submit]")
    page.keyboard.press("Enter")

    expect(page.locator("#catalog-form .alert")).to_contain_text("Not saved.")
    expect(page.locator("#id_chunk_overlap_error")).to_have_text("Overlap must be smaller than the chunk size.")
    expect(page.locator("#id_name")).to_have_value("Team handbooks")  # nothing typed is lost
    assert page.url == f"{live_server.url}/catalogs/new", "refused in place, not by navigating"
    shot(page, "02-new-catalog-refused")

    page.fill("#id_chunk_overlap", "30")
    page.click("#catalog-form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/catalogs/handbooks/")
    expect(page.locator(".messages")).to_contain_text("Catalog handbooks created.")
    expect(page.locator("table.sources td.empty")).to_contain_text("No sources yet.")
    assert Catalog.objects.get(slug="handbooks").chunk_overlap == 30
    shot(page, "03-catalog-empty")


def test_sources_of_every_kind_are_created_the_refusals_shown_in_place(page, live_server, cora, ops, tmp_path):
    tags_ensure(names=["incident-response"])
    sign_in(page, live_server.url, "cora", "/catalogs/ops/")

    # Files on the server: the preview says what a glob finds; one outside the roots is refused.
    page.click("a.button:has-text('Files on the server')")
    page.fill("#id_slug", "guides")
    page.fill("#id_name", "Guides")
    page.fill("#id_location", "../*.md")
    expect(page.locator("#glob-preview")).to_contain_text("may not contain '..'")
    page.fill("#id_location", "guides/**/*.md")
    expect(page.locator("#glob-preview")).to_contain_text("1 file to index match now")
    expect(page.locator("#glob-preview")).to_contain_text("guides/deploy.md")
    shot(page, "04-new-glob-preview")
    page.fill("#id_location", "/etc/*.conf")
    page.click("#source-form button[type=submit]")
    expect(page.locator("#source-form .field.has-error")).to_contain_text("outside the configured source roots")
    expect(page.locator("#id_name")).to_have_value("Guides")
    shot(page, "05-new-glob-refused")
    page.fill("#id_location", "guides/**/*.md")
    page.click("#source-form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/catalogs/ops/sources/guides/")
    expect(page.locator("#documents tbody")).to_contain_text("guides/deploy.md")

    # Inline text, tagged in the editor: an existing tag suggested and chosen by keyboard,
    # a new one added with Enter, one unchecked again.
    page.goto(f"{live_server.url}/catalogs/ops/sources/new?kind=inline")
    page.fill("#id_slug", "oncall")
    page.fill("#id_name", "On-call rota")
    page.fill("#id_content", "# On call\n\nAnswer a page within five minutes. Hand over on Mondays.\n")
    page.check("input[name=mode][value=auto]")
    page.click("#tag-input")
    page.keyboard.type("incid")
    suggestion = page.locator("#tag-suggestions button.suggestion")
    expect(suggestion).to_have_count(1)
    expect(suggestion).to_contain_text("incident-response")
    shot(page, "06-tag-suggestions")
    tab_to(page, "#tag-suggestions button.suggestion")
    page.keyboard.press("Enter")
    expect(page.locator("#tag-chips label.tag-chip")).to_have_count(1)
    expect(page.locator("#tag-input")).to_be_focused()
    page.keyboard.type("paging")
    page.keyboard.press("Enter")
    expect(page.locator("#tag-chips label.tag-chip")).to_have_count(2)
    expect(page.locator("#tag-input")).to_have_value("")
    page.keyboard.type("rota")
    page.keyboard.press("Enter")
    expect(page.locator("#tag-chips label.tag-chip")).to_have_text(["incident-response", "paging", "rota"])
    page.locator("#tag-chips input[value=rota]").focus()
    page.keyboard.press("Space")
    expect(page.locator("#tag-chips input[value=rota]")).not_to_be_checked()
    page.fill("#tag-input", "--")
    page.press("#tag-input", "Enter")
    expect(page.locator("#tag-error")).to_contain_text("a tag needs at least one letter or digit")
    page.fill("#tag-input", "")
    shot(page, "07-new-inline-tags")
    page.click("#source-form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/catalogs/ops/sources/oncall/")
    oncall = ReferenceSource.objects.get(slug="oncall")
    assert sorted(oncall.tags.values_list("name", flat=True)) == ["incident-response", "paging"]
    assert (oncall.mode, oncall.changed_by) == ("auto", cora)
    expect(page.locator("#chunks li.chunk")).to_have_count(1)
    expect(page.locator("#chunks .chunk-head")).to_contain_text("bytes 0–")
    shot(page, "08-source-inline")

    # Uploaded files: the browser names a file it will not send; the server refuses one
    # that is not UTF-8; then the upload goes, its progress shown, and lands indexed.
    page.goto(f"{live_server.url}/catalogs/ops/sources/new?kind=upload")
    page.fill("#id_slug", "faq")
    page.fill("#id_name", "FAQ")
    logo = tmp_path / "logo.png"
    logo.write_bytes(b"\x89PNG\r\n")
    page.set_input_files("#id_uploads", str(logo))
    expect(page.locator("#id_uploads-check")).to_contain_text("logo.png: not a file type Lectern indexes")
    latin = tmp_path / "latin.md"
    latin.write_bytes("Café au lait.".encode("latin-1"))
    page.set_input_files("#id_uploads", str(latin))
    expect(page.locator("#id_uploads-check")).to_have_text("")
    page.click("#source-form button[type=submit]")
    expect(page.locator("#source-form .field.has-error")).to_contain_text("latin.md: is not UTF-8 text (byte 3)")
    expect(page.locator("#id_name")).to_have_value("FAQ")
    shot(page, "09-new-upload-refused")
    files = []
    for i in range(3):
        path = tmp_path / f"question-{i}.md"
        path.write_text(f"# Question {i}\n\n" + f"Answer number {i} is in the handbook. " * 200, encoding="utf-8")
        files.append(str(path))
    page.set_input_files("#id_uploads", files)
    cdp = page.context.new_cdp_session(page)  # a slow line, so the upload takes long enough to watch
    cdp.send("Network.enable")
    cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": 20, "downloadThroughput": -1,
                                                  "uploadThroughput": 8 * 1024})
    page.click("#source-form button[type=submit]")
    wait_until(page, "() => { const bar = document.querySelector('.upload-progress progress');"
                           " return bar && !bar.closest('[hidden]') && bar.value > 0 && bar.value < 100 }")
    cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": 0, "downloadThroughput": -1,
                                                  "uploadThroughput": -1})
    page.wait_for_url(f"{live_server.url}/catalogs/ops/sources/faq/")
    expect(page.locator("#files tbody tr")).to_have_count(3)
    expect(page.locator("#documents tbody tr")).to_have_count(3)
    expect(page.locator("#activity")).to_contain_text("succeeded")
    shot(page, "10-source-upload")


def test_a_source_is_edited_reindexed_and_its_runs_read(page, live_server, cora, ops):
    broken = ReferenceSource.objects.create(catalog=ops.catalog, slug="broken", name="Broken", kind="glob",
                                            location="../outside/*.md")
    sign_in(page, live_server.url, "cora", "/catalogs/ops/sources/runbook/")

    page.click("a.button:has-text('Edit')")
    page.wait_for_url(f"{live_server.url}/catalogs/ops/sources/runbook/edit")
    page.fill("#id_content", "# Runbook\n\nRestart the worker twice, then page the lead.\n")
    page.check("#id_requires_approval")
    shot(page, "11-edit-source")
    tab_to(page, "#source-form button[type=submit]")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/catalogs/ops/sources/runbook/")
    expect(page.locator(".messages")).to_contain_text("its content changed, so it is being reindexed")
    expect(page.locator("#chunks pre.chunk-text")).to_contain_text("Restart the worker twice")
    expect(page.locator(".source-side")).to_contain_text("Its own “requires approval” flag")

    # Reindex the whole catalog in full, from the keyboard: the live panel answers in place.
    page.goto(f"{live_server.url}/catalogs/ops/")
    tab_to(page, "button:has-text('Reindex in full')")
    page.keyboard.press("Enter")
    expect(page.locator("#activity .notice")).to_have_text("4 sources queued for reindexing.")
    expect(page.locator("#activity")).to_contain_text("failed")
    assert IndexRun.objects.filter(full=True, status="succeeded").count() == 3
    page.reload()
    expect(page.locator("table.sources")).to_contain_text("Error")
    shot(page, "12-catalog-reindexed")

    page.click("a:has-text('Runs history')")
    page.wait_for_url(f"{live_server.url}/catalogs/ops/runs/")
    page.select_option("select[name=status]", "failed")
    page.click("form.filters button[type=submit]")
    page.wait_for_url(re.compile(r"status=failed"))
    expect(page.locator("table.runs-table tbody tr")).to_have_count(1)
    expect(page.locator("table.runs-table pre.error-text")).to_contain_text("may not contain '..'")
    shot(page, "13-runs-failed")
    run = IndexRun.objects.get(source=broken, status="failed")
    page.click(f"a.req-link:has-text('#{run.pk}')")
    page.wait_for_url(f"{live_server.url}/catalogs/ops/runs/{run.pk}/")
    expect(page.locator("#run-progress pre.error-text")).to_have_text(run.error)
    expect(page.locator("#run-progress")).not_to_have_attribute("hx-trigger", "every 1s")
    shot(page, "14-run-failed")


def test_deleting_asks_first_and_says_what_goes(page, live_server, cora, ops):
    sign_in(page, live_server.url, "cora", "/catalogs/ops/sources/handbook/")

    # Removing one file asks first, naming what goes; dismissed, nothing goes.
    asked: list[str] = []

    def dismiss(dialog) -> None:
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    page.click("#files button:has-text('Remove')")
    expect(page.locator("#files tbody tr")).to_have_count(1)
    assert asked == ["Remove handbook.md from this source? Its document and chunks go at the next run."]
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#files button:has-text('Remove')")
    expect(page.locator(".messages")).to_contain_text("Removed handbook.md; the source is being reindexed.")
    expect(page.locator("#files td.empty")).to_have_text("No files yet.")
    expect(page.locator("#documents td.empty")).to_have_text("Nothing indexed yet.")

    page.goto(f"{live_server.url}/catalogs/ops/sources/guide/")
    page.click("a:has-text('Delete…')")
    page.wait_for_url(f"{live_server.url}/catalogs/ops/sources/guide/delete")
    goes = page.locator("ul.goes")
    for text in ("1 document and 1 chunk", "1 index run", "The audit log keeps every entry"):
        expect(goes).to_contain_text(text)
    expect(page.locator("main")).to_contain_text("Its files under the source root stay on disk.")
    shot(page, "15-delete-source")
    page.click("button:has-text('Delete this source')")
    page.wait_for_url(f"{live_server.url}/catalogs/ops/")
    expect(page.locator(".messages")).to_contain_text("Source guide deleted.")
    assert (ops.root / "guides" / "deploy.md").exists()
    expect(page.locator("table.sources tbody tr")).to_have_count(2)

    page.click("a:has-text('Delete…')")
    page.fill("#id_confirm", "Operations")
    page.click("button:has-text('Delete this catalog')")
    expect(page.locator("#id_confirm_error")).to_have_text("Type ops exactly to delete this catalog.")
    expect(page.locator("ul.goes")).to_contain_text("2 sources")
    shot(page, "16-delete-catalog-refused")
    page.fill("#id_confirm", "ops")
    tab_to(page, "button:has-text('Delete this catalog')")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/catalogs/")
    expect(page.locator(".messages")).to_contain_text("Catalog ops deleted")
    assert not Catalog.objects.exists()


def test_a_reviewer_reads_sources_and_their_approval_state_but_changes_nothing(page, live_server, ops):
    rita = person("rita", "reviewer", password=PASSWORD)
    agent = agent_with_token(name="support-bot", catalogs=[ops.catalog])[0]
    ReferenceSource.objects.filter(pk=ops.handbook.pk).update(requires_approval=True)
    first = raised(agent, ReferenceSource.objects.get(pk=ops.handbook.pk))
    request_decide(request_id=first, reviewer=rita, verdict="approve", comment="checked")
    raised(agent_with_token(name="deploy-bot", catalogs=[ops.catalog])[0], ReferenceSource.objects.get(
        pk=ops.handbook.pk))
    sign_in(page, live_server.url, "rita", "/catalogs/ops/")

    expect(page.locator("a.button:has-text('Upload files')")).to_have_count(0)
    expect(page.locator("button:has-text('Reindex')")).to_have_count(0)
    shot(page, "17-catalog-reviewer")
    page.click("table.sources a:has-text('handbook')")
    page.wait_for_url(f"{live_server.url}/catalogs/ops/sources/handbook/")
    panel = page.locator("section[aria-labelledby=approvals-title]")
    expect(panel).to_contain_text("1 approved")
    expect(panel).to_contain_text("1 pending")
    expect(panel).to_contain_text("approved by rita")
    expect(panel.locator("a:has-text('1 in the queue')")).to_have_attribute(
        "href", f"/approvals/?source={ops.handbook.pk}")
    expect(page.locator("section[aria-labelledby=discovery-title]")).to_contain_text("@runbook")
    expect(page.locator("#upload-form")).to_have_count(0)
    shot(page, "18-source-reviewer")
    panel.locator("a:has-text('Full approval history')").click()
    page.wait_for_url(f"{live_server.url}/approvals/sources/ops/handbook/")
    expect(page.locator("ol.timeline > li")).to_have_count(2)
