"""The curator's dashboard without a browser: every write through its services with the
person as who changed it, refusals in place (the form with its errors and what was
typed; htmx gets the form, a plain POST the page) with nothing written, the live panel
that polls only while something runs, the runs history with errors in full, and what
reviewers see (every page, read-only, with the approval state the approvals layer adds)."""

from __future__ import annotations

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils.html import escape

from approvals.services.decisions import request_decide
from catalog.models import AuditEntry, Catalog, IndexRun, ReferenceSource, Tag, UploadedFile
from catalog.tags import tags_ensure
from tests.approvals.builders import raised
from tests.factories import agent_with_token

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def html(response) -> str:
    return response.content.decode()


# --- catalogs -------------------------------------------------------------------------------


def test_a_curator_creates_a_catalog_and_lands_on_it(curator):
    response = curator.post(reverse("catalogs-create"), {"slug": "kb", "name": "Knowledge", "description": "Ours.",
                                                         "chunk_size": 800, "chunk_overlap": 80}, headers=HTMX)

    assert response.status_code == 200 and response["HX-Redirect"] == "/catalogs/kb/"
    catalog = Catalog.objects.get(slug="kb")
    assert (catalog.name, catalog.chunk_size, catalog.chunk_overlap) == ("Knowledge", 800, 80)
    assert "Catalog kb created" in html(curator.get("/catalogs/kb/"))


@pytest.mark.parametrize("headers", [HTMX, {}], ids=["htmx", "plain"])
def test_a_refused_catalog_comes_back_with_its_errors_in_place_and_what_was_typed(curator, ops, headers):
    response = curator.post(reverse("catalogs-create"), {"slug": "ops", "name": "Typed name", "chunk_size": 300,
                                                         "chunk_overlap": 300}, headers=headers)

    page = html(response)
    assert response.status_code == 400
    assert ("<html" in page) is (headers == {})  # htmx swaps the form alone
    assert re.search(r'id="id_slug_error"[^>]*><p>Catalog with this Slug already exists.</p>', page)
    assert "Overlap must be smaller than the chunk size." in page
    assert 'value="Typed name"' in page and 'aria-invalid="true"' in page
    assert Catalog.objects.count() == 1


def test_changing_the_chunking_reindexes_every_source_in_full(curator, ops):
    response = curator.post(reverse("catalogs-edit", args=["ops"]), {
        "name": "Operations", "description": "", "chunk_size": 400, "chunk_overlap": 40})

    assert response.status_code == 302
    runs = IndexRun.objects.filter(catalog=ops.catalog, trigger="ui")
    assert runs.count() == 3 and all(run.full for run in runs)


def test_deleting_a_catalog_says_what_goes_and_takes_its_id_typed_again(curator, ops):
    agent = agent_with_token(name="bot", catalogs=[ops.catalog])[0]
    ReferenceSource.objects.filter(pk=ops.runbook.pk).update(requires_approval=True)
    raised(agent, ReferenceSource.objects.get(pk=ops.runbook.pk))

    page = html(curator.get(reverse("catalogs-delete", args=["ops"])))
    wrong = curator.post(reverse("catalogs-delete", args=["ops"]), {"confirm": "OPS"})
    right = curator.post(reverse("catalogs-delete", args=["ops"]), {"confirm": "ops"})

    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", page))
    for goes in ("3 sources", "3 documents and 3 chunks", "3 index runs", "1 approval request with their decisions",
                 "The audit log keeps every entry about it"):
        assert goes in text, goes
    assert wrong.status_code == 400 and "Type ops exactly to delete this catalog." in html(wrong)
    assert right.status_code == 302 and right["Location"] == "/catalogs/"
    assert not Catalog.objects.exists()


# --- sources --------------------------------------------------------------------------------


def test_an_inline_source_is_created_tagged_indexed_and_its_changer_recorded(curator, cora, ops):
    tags_ensure(names=["Incident Response"])
    response = curator.post(reverse("catalogs-source-create", args=["ops"]) + "?kind=inline", {
        "slug": "oncall", "name": "On call", "mode": "auto", "requires_approval": "on",
        "content": "Answer pages within five minutes.", "tags": ["incident response"], "tags_new": "paging, Paging"})

    assert response.status_code == 302 and response["Location"] == "/catalogs/ops/sources/oncall/"
    source = ReferenceSource.objects.get(slug="oncall")
    assert (source.kind, source.mode, source.requires_approval, source.changed_by) == ("inline", "auto", True, cora)
    assert sorted(source.tags.values_list("name", flat=True)) == ["Incident Response", "paging"]
    assert IndexRun.objects.filter(source=source, trigger="ui").exists()


def test_an_upload_source_is_created_from_files_and_a_bad_file_is_refused_in_place(curator, ops, settings):
    settings.LECTERN_MAX_UPLOAD_BYTES = 2048
    url = reverse("catalogs-source-create", args=["ops"]) + "?kind=upload"
    fields = {"slug": "faq", "name": "FAQ", "mode": "selectable", "description": "Questions people ask."}

    refused = curator.post(url, {**fields, "uploads": [
        SimpleUploadedFile("q1.md", b"# Refunds\n\nFive days."), SimpleUploadedFile("logo.png", b"\x89PNG"),
        SimpleUploadedFile("big.txt", b"x" * 4096)]}, headers=HTMX)
    created = curator.post(url, {**fields, "uploads": [SimpleUploadedFile("q1.md", b"# Refunds\n\nFive days."),
                                                       SimpleUploadedFile("q2.txt", b"Parcels ship on weekdays.")]})

    page = html(refused)
    assert refused.status_code == 400 and "<html" not in page
    assert "logo.png: is not a file type Lectern indexes" in page and "big.txt: is 4.0 KB" in page
    assert 'value="Questions people ask."' not in page and "Questions people ask." in page  # a textarea keeps it
    assert created.status_code == 302
    files = UploadedFile.objects.filter(source__slug="faq").order_by("path")
    assert [(f.path, f.title) for f in files] == [("q1.md", "Refunds"), ("q2.txt", "q2")]


def test_a_glob_outside_the_source_roots_is_refused_and_the_preview_says_what_matches(curator, ops):
    url = reverse("catalogs-source-create", args=["ops"]) + "?kind=glob"

    refused = curator.post(url, {"slug": "etc", "name": "Etc", "mode": "selectable", "location": "/etc/*.conf"},
                           headers=HTMX)
    preview = curator.get(reverse("catalogs-glob-preview") + "?location=guides/*.md")
    climbing = curator.get(reverse("catalogs-glob-preview") + "?location=../*.md")

    assert refused.status_code == 400 and "outside the configured source roots" in html(refused)
    assert not ReferenceSource.objects.filter(slug="etc").exists()
    assert "<strong>1</strong> file to index match now" in html(preview) and "guides/deploy.md" in html(preview)
    assert "may not contain &#x27;..&#x27;" in html(climbing)


def test_editing_settings_applies_at_once_and_editing_content_reindexes(curator, ops, cora):
    edit = reverse("catalogs-source-edit", args=["ops", "runbook"])
    base = {"name": "Runbook", "mode": "selectable", "content": ops.runbook.content}

    settings_only = curator.post(edit, {**base, "mode": "preselected", "tags_new": "ops"})
    runs = IndexRun.objects.filter(source=ops.runbook).count()
    content = curator.post(edit, {**base, "mode": "preselected", "tags": ["ops"], "content": "Restart twice."})

    ops.runbook.refresh_from_db()
    assert settings_only.status_code == content.status_code == 302
    assert (ops.runbook.mode, ops.runbook.content, ops.runbook.changed_by) == ("preselected", "Restart twice.", cora)
    assert list(ops.runbook.tags.values_list("name", flat=True)) == ["ops"]
    assert runs == 1 and IndexRun.objects.filter(source=ops.runbook).count() == 2
    assert [e.payload["fields"] for e in AuditEntry.objects.filter(source_id=ops.runbook.pk).order_by("seq")] == [
        ["mode", "tags"], ["content"]]


def test_the_edit_forms_show_what_is_there_now(curator, ops):
    ops.runbook.tags.add(*tags_ensure(names=["ops", "restarts"]))

    source = html(curator.get(reverse("catalogs-source-edit", args=["ops", "runbook"])))
    catalog = html(curator.get(reverse("catalogs-edit", args=["ops"])))

    assert 'value="Runbook"' in source and "Restart the worker, then check the queue depth." in source
    assert re.findall(r'name="tags" value="([^"]+)" checked', source) == ["ops", "restarts"]
    assert 'name="slug"' not in source and 'name="uploads"' not in source
    assert 'value="Operations"' in catalog and 'value="1000"' in catalog and 'name="slug"' not in catalog


def test_more_files_are_uploaded_to_a_source_and_one_removed(curator, ops, cora):
    files = reverse("catalogs-source-files", args=["ops", "handbook"])

    added = curator.post(files, {"uploads": [SimpleUploadedFile("escalation.md", b"# Escalation\n\nCall the lead.")]},
                         headers=HTMX)
    wrong_kind = curator.post(reverse("catalogs-source-files", args=["ops", "runbook"]),
                              {"uploads": [SimpleUploadedFile("x.md", b"x")]})
    removed = curator.post(reverse("catalogs-source-file-delete", args=["ops", "handbook"]), {"path": "handbook.md"})
    missing = curator.post(reverse("catalogs-source-file-delete", args=["ops", "handbook"]), {"path": "nope.md"})

    assert added["HX-Redirect"] == "/catalogs/ops/sources/handbook/"
    assert wrong_kind.status_code == 409 and "only upload sources take files" in html(wrong_kind)
    assert removed.status_code == 302 and missing.status_code == 404
    assert list(UploadedFile.objects.filter(source=ops.handbook).values_list("path", flat=True)) == ["escalation.md"]
    ops.handbook.refresh_from_db()
    assert ops.handbook.changed_by == cora


def test_deleting_a_source_says_what_goes_then_does_it(curator, ops):
    page = html(curator.get(reverse("catalogs-source-delete", args=["ops", "handbook"])))
    deleted = curator.post(reverse("catalogs-source-delete", args=["ops", "handbook"]))

    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", page))
    assert "1 uploaded file" in text and "1 document and 1 chunk" in text and "1 index run" in text
    assert deleted.status_code == 302 and deleted["Location"] == "/catalogs/ops/"
    assert not ReferenceSource.objects.filter(slug="handbook").exists()


# --- the tag editor --------------------------------------------------------------------------


def test_the_tag_editor_suggests_existing_tags_except_those_chosen_and_refuses_a_bad_one(curator, ops):
    ops.handbook.tags.add(*tags_ensure(names=["incident-response", "incidents"]))
    tags_ensure(names=["deploys"])

    suggested = html(curator.get(reverse("catalogs-tag-suggest") + "?tags_new=inci&tags=incidents"))
    chips = curator.get(reverse("catalogs-tag-chips") + "?tags_new=Paging,%20ops&tags=ops")
    bad = curator.get(reverse("catalogs-tag-chips") + "?tags_new=---")

    assert "incident-response" in suggested and "incidents" not in suggested.replace("incident-response", "")
    assert re.findall(r'name="tags" value="([^"]+)"', html(chips)) == ["Paging"]
    assert bad.status_code == 400 and bad["HX-Retarget"] == "#tag-error"
    assert "a tag needs at least one letter or digit" in html(bad)
    assert Tag.objects.filter(key="paging").count() == 0  # chips are only shown; saving the form makes tags


# --- indexing: the live panel, runs ---------------------------------------------------------


def test_the_live_panel_polls_while_a_run_is_queued_and_stops_once_none_is(curator, ops):
    run = IndexRun.objects.create(catalog=ops.catalog, source=ops.guide, trigger="ui")
    IndexRun.objects.filter(pk=run.pk).update(status="running", stage="embed", progress=40,
                                              counts={"stage_done": 3, "stage_total": 8})
    activity = reverse("catalogs-activity", args=["ops"])

    busy = curator.get(activity + "?source=guide", headers=HTMX)
    IndexRun.objects.filter(pk=run.pk).update(status="succeeded", stage="done", progress=100, counts={
        "documents_added": 0, "documents_changed": 1, "documents_removed": 0, "documents_unchanged": 0,
        "chunks_embedded": 2, "chunks_reused": 1, "chunks_written": 3})
    idle = curator.get(activity + "?source=guide", headers=HTMX)

    assert 'hx-trigger="every 1s"' in html(busy) and "HX-Trigger" not in busy
    assert 'value="40"' in html(busy) and "embed: 3 of 8 chunks embedded" in html(busy)
    assert 'hx-trigger="every 1s"' not in html(idle) and json.loads(idle["HX-Trigger"]) == {"index-finished": {}}
    assert "3 written (2 embedded, 1 from the cache)" in html(idle)


def test_reindex_buttons_queue_runs_and_answer_with_the_live_panel(curator, ops):
    catalog_wide = curator.post(reverse("catalogs-reindex", args=["ops"]), {"full": "on"}, headers=HTMX)
    one = curator.post(reverse("catalogs-source-reindex", args=["ops", "guide"]))

    assert catalog_wide.status_code == 200 and "3 sources queued for reindexing." in html(catalog_wide)
    assert 'hx-trigger="every 1s"' in html(catalog_wide)
    assert one.status_code == 302 and one["Location"] == "/catalogs/ops/sources/guide/"
    assert IndexRun.objects.filter(status="queued", full=True).count() == 3  # the guide's queued full run is reused


def test_the_runs_history_shows_a_failed_runs_error_in_full(curator, reviewer, ops):
    error = "SourceError: glob 'x' is outside the configured source roots\n" + "line of detail\n" * 30
    failed = IndexRun.objects.create(catalog=ops.catalog, source=ops.guide, trigger="schedule", status="failed",
                                     error=error)

    history = html(reviewer.get(reverse("catalogs-runs", args=["ops"]) + "?status=failed"))
    run = html(curator.get(reverse("catalogs-run", args=["ops", failed.pk])))
    by_source = html(curator.get(reverse("catalogs-runs", args=["ops"]) + "?source=runbook"))

    assert f"#{failed.pk}" in history and escape(error.strip()) in history and "the scheduled scan" in history
    assert escape(error.strip()) in run
    assert "runbook" in by_source and f"#{failed.pk}<" not in by_source


# --- reviewers: read-only, with the approval state -------------------------------------------


def test_a_reviewer_reads_a_source_with_its_approval_state_and_cannot_change_it(reviewer, rita, ops):
    agent = agent_with_token(name="support-bot", catalogs=[ops.catalog])[0]
    ReferenceSource.objects.filter(pk=ops.handbook.pk).update(requires_approval=True)
    handbook = ReferenceSource.objects.get(pk=ops.handbook.pk)
    request_id = raised(agent, handbook)
    request_decide(request_id=request_id, reviewer=rita, verdict="approve", comment="fine")

    page = html(reviewer.get(reverse("catalogs-source", args=["ops", "handbook"])))
    edit = reviewer.get(reverse("catalogs-source-edit", args=["ops", "handbook"]))

    assert "Its own “requires approval” flag" in page and "1 approved" in page
    assert f'href="/approvals/{request_id}/"' in page and "approved</span> by rita" in page
    assert 'href="/approvals/sources/ops/handbook/"' in page and "in the queue" not in page  # none pending
    assert reviewer.get(f"/audit/?source={handbook.pk}").status_code == 200
    assert 'href="/catalogs/ops/sources/runbook/"><code>@runbook</code>' in page  # mentioned and linked
    assert "runbook.md" in page and "https://example.com/vendor" in page
    assert "/edit" not in page and "Reindex</button>" not in page and 'name="uploads"' not in page
    assert edit.status_code == 403


def test_the_scan_line_says_when_the_worker_last_scanned_and_when_it_is_overdue(curator, ops):
    from datetime import timedelta

    from django.utils import timezone
    from django_q.models import Schedule

    Schedule.objects.filter(name="lectern-scan-sources").update(next_run=timezone.now() - timedelta(minutes=30))

    page = html(curator.get(reverse("catalogs-list")))

    assert "scans every source every 1 minute" in page and "No scan has run yet." in page
    assert "The scan is overdue" in page
