"""Issue 13's "create a catalog from an upload and watch it index", as in production: a
web server (pytest-django's live server) queueing to a django-q2 worker (`manage.py
qcluster` on the test database), a curator in Debian's chromium.

The curator creates a catalog, uploads two files as its first source and lands on the
source's page, where the live panel polls the run: queued, then running in its embed
stage with a progress bar and how many chunks are embedded so far, then succeeded with
its counts, the panel stops polling and the documents and chunks appear without a
reload. The worker is held in the embed stage at a barrier the test owns (an uncommitted
embedding-cache row the worker's insert must wait for: tests/catalog/test_reindex_processes.py),
so the running state is seen whatever the machine's speed; every wait is on a condition."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django_q.conf import Conf
from django_q.models import Schedule
from playwright.sync_api import expect

from catalog.models import Catalog, IndexRun, ReferenceSource
from catalog.sources.uploads import upload_text
from tests.browser import console_watch, page_audit
from tests.catalog.test_reindex_processes import Barrier, second_connection
from tests.config.servers import qcluster
from tests.factories import person

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BASE_DIR = Path(__file__).resolve().parents[3]
PASSWORD = "correct horse battery"
WORKER_WAIT_MS = 120_000  # a bound, not a pause: the worker starts, loads the model and indexes
WORDS = ("harbor lantern meadow orchard pebble quarry ribbon saddle thimble velvet walnut yarrow anchor beacon "
         "cobble dune ember fjord glacier hollow inlet juniper kelp lagoon marsh").split()


@pytest.fixture
def worker(transactional_db, tmp_path, monkeypatch) -> Iterator[Path]:
    """`manage.py qcluster` with production settings on the test database; this process
    (the live server) enqueues for it. The schedules are removed: only the runs the
    curator asks for are done. Its log's path."""
    Schedule.objects.all().delete()
    log = tmp_path / "qcluster.log"
    monkeypatch.setattr(Conf, "SYNC", False)
    with qcluster(log):
        yield log


@pytest.fixture
def barrier(transactional_db) -> Iterator[Barrier]:
    conn = second_connection("lectern-test-barrier")
    try:
        yield Barrier(conn)
    finally:
        conn.close()


def playbook(tmp_path: Path, name: str, seed: int, tag: str) -> Path:
    """A markdown file of about 60 chunks of 200 characters, its text this test's own (no
    other run's embedding cache can stand in for the worker's embedder)."""
    lines = [f"# Playbook {name} {tag}", ""]
    for i in range(120):
        words = [WORDS[(seed * 7 + i * 3 + k) % len(WORDS)] for k in range(9)]
        lines.append(f"Step {i} of {name}: " + " ".join(words).capitalize() + ".")
    path = tmp_path / f"{name}.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def shot(page, name: str) -> None:
    page.evaluate("window.scrollTo(0, 0)")
    page_audit(page, f"catalogs-watch-{name}")


def test_a_catalog_created_from_an_upload_is_watched_while_it_indexes(page, live_server, worker, barrier, tmp_path):
    cora = person("cora", "curator", password=PASSWORD)
    tag = uuid.uuid4().hex[:8]
    files = [playbook(tmp_path, "failover", 1, tag), playbook(tmp_path, "rollback", 2, tag)]

    page.goto(f"{live_server.url}/catalogs/")
    page.fill("input[name=username]", "cora")
    page.fill("input[name=password]", PASSWORD)
    page.click("button:has-text('Sign in')")
    page.wait_for_url(f"{live_server.url}/catalogs/")
    page.click("a:has-text('New catalog')")
    page.fill("#id_slug", "playbooks")
    page.fill("#id_name", "Playbooks")
    page.fill("#id_chunk_size", "200")
    page.fill("#id_chunk_overlap", "20")
    page.click("#catalog-form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/catalogs/playbooks/")

    # The worker will stop in its embed stage until the test lets it go on.
    catalog = Catalog.objects.get(slug="playbooks")
    texts = barrier.hold(catalog, [upload_text(name=f.name, data=f.read_bytes()) for f in files])
    assert len(texts) > 64, "two groups to embed: the first done while the worker waits in the second"

    page.click("a.button:has-text('Upload files')")
    page.fill("#id_slug", "incident-playbooks")
    page.fill("#id_name", "Incident playbooks")
    page.set_input_files("#id_uploads", [str(f) for f in files])
    page.click("#source-form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/catalogs/playbooks/sources/incident-playbooks/")

    activity = page.locator("#activity")
    expect(activity).to_have_attribute("hx-trigger", "every 1s")  # it polls while the run waits or works
    expect(activity.locator("li.run .run-state")).to_have_text("running", timeout=WORKER_WAIT_MS)
    expect(activity.locator("li.run .run-progress")).to_contain_text("embed", timeout=WORKER_WAIT_MS)
    expect(activity.locator("li.run p.counts")).to_contain_text(
        re.compile(rf"embed: \d+ of {len(texts)} chunks embedded"))
    progress = int(activity.locator("li.run progress").get_attribute("value") or "0")
    assert 15 <= progress < 90, progress  # the embed stage's share of the bar
    expect(page.locator("#documents td.empty")).to_have_text("Nothing indexed yet.")
    shot(page, "01-indexing")

    # The run's own page, in a second tab, polls the same run.
    run = IndexRun.objects.get(source__slug="incident-playbooks")
    tab = page.context.new_page()
    console_watch(tab)
    tab.goto(f"{live_server.url}/catalogs/playbooks/runs/{run.pk}/")
    expect(tab.locator("#run-progress")).to_have_attribute("hx-trigger", "every 1s")
    expect(tab.locator("#run-progress .run-state")).to_have_text("running")
    expect(tab.locator("#run-progress dl.facts")).to_contain_text("embed")
    shot(tab, "02-run-running")

    barrier.release()

    expect(tab.locator("#run-progress .run-state")).to_have_text("succeeded", timeout=WORKER_WAIT_MS)
    expect(tab.locator("#run-progress")).not_to_have_attribute("hx-trigger", "every 1s")
    expect(tab.locator("#run-progress")).to_contain_text("Seconds per stage")
    shot(tab, "03-run-done")
    tab.close()

    expect(activity.locator("li.run .run-state").first).to_have_text("succeeded", timeout=WORKER_WAIT_MS)
    expect(activity).not_to_have_attribute("hx-trigger", "every 1s")  # polling stopped
    expect(activity).to_contain_text("Nothing is being indexed now.")
    expect(activity.locator("dl.counts")).to_contain_text(f"{len(texts)} written")
    expect(page.locator("#documents tbody tr")).to_have_count(2)  # refreshed by index-finished, no reload
    expect(page.locator("#chunks h2")).to_contain_text(f"({len(texts)})")
    expect(page.locator(".source-side")).to_contain_text("2 documents")  # the sidebar too
    run.refresh_from_db()
    assert (run.status, run.trigger, run.counts["documents_added"]) == ("succeeded", "ui", 2)
    assert ReferenceSource.objects.get(slug="incident-playbooks").changed_by == cora
    shot(page, "04-indexed")
