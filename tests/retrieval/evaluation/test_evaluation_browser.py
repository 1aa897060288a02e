"""Issue 13's evaluation flow in Debian's chromium, with a real django-q2 worker
(`manage.py qcluster` on the test database, as tests/catalog/pages/
test_watch_indexing_browser.py runs it): a curator's upload refused in place and fixed,
the run watched while the worker has it (its progress bar, polled), its table and chart
once done, two modes compared by keyboard, the history, and the same test set run
again by keyboard alone, showing the change since the first run.

The worker is held at a barrier the test owns so the running state is seen whatever the
machine's speed: an ACCESS EXCLUSIVE lock on the chunks table, which every search reads
and none of the evaluation pages does; released, the worker goes on. Every wait is on a
condition; every page state shown is audited and photographed (tests.browser)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from retrieval.models import EvaluationRun
from tests.browser import page_audit, tab_to
from tests.catalog.pages.test_watch_indexing_browser import worker  # noqa: F401  the qcluster fixture
from tests.catalog.test_reindex_processes import second_connection
from tests.factories import person
from tests.retrieval.evaluation.builders import qrels_tsv, queries_jsonl

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery"
WORKER_WAIT_MS = 120_000  # a bound, not a pause: the worker starts, loads the model and searches


class ChunkBarrier:
    """Searches wait while this holds the chunks table; the pages do not read it."""

    def __init__(self) -> None:
        self.conn = second_connection("lectern-test-eval-barrier")

    def hold(self) -> None:
        self.conn.execute("LOCK TABLE catalog_chunk IN ACCESS EXCLUSIVE MODE")

    def release(self) -> None:
        self.conn.rollback()


@pytest.fixture
def barrier(transactional_db) -> Iterator[ChunkBarrier]:
    held = ChunkBarrier()
    try:
        yield held
    finally:
        held.release()
        held.conn.close()


def shot(page, name: str) -> None:
    """Audited and photographed from the top of the page."""
    page.evaluate("window.scrollTo(0, 0)")
    page_audit(page, f"evaluations-{name}")


# Some asked in the handbook's words, some only in their meaning: the modes part ways.
QUERIES = {
    "q1": "circuit breaker failing dependency",
    "q2": "stop hammering a service that keeps erroring",
    "q3": "wait longer between each new attempt",
    "q4": "users see stale data after an update",
    "q5": "keep passwords out of log output",
    "q6": "cache time to live",
    "q7": "structured format for diagnostics",
    "q8": "vault keys rotation",  # judged against a source only an approval lets through
}
QRELS = [("q1", "circuit-breaker.md", 2), ("q2", "circuit-breaker.md", 1), ("q3", "retries.md", 1),
         ("q4", "caching.md", 1), ("q5", "logging.md", 1), ("q6", "caching.md", 2), ("q7", "logging.md", 1),
         ("q8", "rotation.md", 1)]


def files(tmp_path: Path) -> dict[str, Path]:
    written = {"good": queries_jsonl(QUERIES), "bad": '{"_id": "q1", "text": "circuit breaker"}\n{"_id": "q2",\n',
               "qrels": qrels_tsv(QRELS)}
    paths = {}
    for name, text in written.items():
        paths[name] = tmp_path / (f"{name}.tsv" if name == "qrels" else f"{name}-queries.jsonl")
        paths[name].write_text(text, encoding="utf-8")
    return paths


def test_a_curator_evaluates_a_catalog_while_a_real_worker_runs_it(page, live_server, worker, barrier,  # noqa: F811
                                                                   governed_ops, tmp_path):
    person("cora", "curator", password=PASSWORD)
    upload = files(tmp_path)
    page.goto(f"{live_server.url}/evaluations/")
    page.fill("input[name=username]", "cora")
    page.fill("input[name=password]", PASSWORD)
    page.click("button:has-text('Sign in')")
    page.wait_for_url(f"{live_server.url}/evaluations/")
    expect(page.locator("nav.primary a[aria-current=page]")).to_have_text("Evaluations")
    expect(page.locator("#evaluation-history td.empty")).to_contain_text("No evaluation yet")
    expect(page.locator("#id_test_set_1")).to_be_checked()  # no stored set yet: upload is the choice
    expect(page.locator("#id_query_set")).to_be_hidden()
    shot(page, "01-empty")

    # A queries file with a broken line: refused beside its field, the rest kept.
    page.select_option("#id_catalog", "ops")
    page.fill("#id_name", "ops questions")
    page.set_input_files("#id_queries", str(upload["bad"]))
    page.set_input_files("#id_qrels", str(upload["qrels"]))
    page.click("#evaluation-form button[type=submit]")
    expect(page.locator("#id_queries_error")).to_contain_text("queries line 2: not valid JSON")
    expect(page.locator("#id_queries")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#id_name")).to_have_value("ops questions")
    expect(page.locator("#id_catalog")).to_have_value("ops")
    assert page.locator("#id_qrels").evaluate("input => input.files[0].name") == "qrels.tsv"  # still chosen
    assert not EvaluationRun.objects.exists()
    shot(page, "02-refused")

    barrier.hold()  # the worker will stop at its first search
    page.set_input_files("#id_queries", str(upload["good"]))
    page.click("#evaluation-form button[type=submit]")
    page.wait_for_url(re.compile(rf"{live_server.url}/evaluations/\d+/$"))
    run = EvaluationRun.objects.get()
    body = page.locator("#evaluation-run")
    expect(body).to_have_attribute("hx-trigger", "every 1s")
    expect(body.locator(".run-state")).to_have_text("running", timeout=WORKER_WAIT_MS)
    expect(body.locator("progress")).to_be_visible()
    expect(body).to_contain_text("bm25")
    expect(body).to_contain_text("of 24 searches")
    expect(body.locator(".governance-note")).to_contain_text("@vault")
    expect(page.locator(".messages")).to_contain_text(f"Evaluation #{run.pk} of ops on ops questions queued")
    shot(page, "03-running")

    barrier.release()

    expect(body.locator("table.metrics-table")).to_be_visible(timeout=WORKER_WAIT_MS)
    expect(body).not_to_have_attribute("hx-trigger", "every 1s")  # polling stopped
    expect(body.locator("table.metrics-table tbody tr")).to_have_count(3)
    expect(page.locator("svg#quality-chart, svg[aria-labelledby^='quality-chart']")).to_be_visible()
    expect(page.locator("#quality-chart-title")).to_have_text("Ranking quality by mode")
    expect(body).to_contain_text("The first run of this catalog and test set")
    expect(page.locator("#comparison .verdict-line")).to_contain_text("hybrid wins")
    run.refresh_from_db()
    assert (run.status, run.progress, run.withheld) == ("succeeded", 100, ["vault"])
    shot(page, "04-done")

    # Two other modes compared, by keyboard: each change swaps the comparison in place.
    tab_to(page, "#id_a")
    page.keyboard.press("ArrowUp")  # hybrid -> vector
    expect(page.locator("#comparison .verdict-line")).to_contain_text("vector wins")
    tab_to(page, "#id_metric")
    page.keyboard.press("ArrowDown")  # nDCG@10 -> Recall@100
    expect(page.locator("#comparison .verdict-line")).to_contain_text("on Recall@100")
    expect(page.locator("#comparison table.differing tbody tr").first).to_be_visible()
    shot(page, "05-compared")

    # The history, and the same test set run again by keyboard alone.
    page.goto(f"{live_server.url}/evaluations/")
    row = page.locator("#evaluation-history tbody tr").first
    expect(row).to_contain_text(f"#{run.pk}")
    expect(row.locator(".mode-figure")).to_have_count(3)
    expect(page.locator("#id_test_set_0")).to_be_checked()  # a stored set now exists: it is the choice
    tab_to(page, "#id_catalog")
    page.keyboard.press("ArrowDown")  # the one catalog
    tab_to(page, "#id_modes_1")
    page.keyboard.press("Space")  # vector off
    tab_to(page, "#id_modes_2")
    page.keyboard.press("Space")  # hybrid off: bm25 alone
    tab_to(page, "#id_query_set")
    page.keyboard.press("ArrowDown")
    tab_to(page, "#evaluation-form button[type=submit]")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(rf"{live_server.url}/evaluations/\d+/$"))
    again = EvaluationRun.objects.exclude(pk=run.pk).get()
    assert again.modes == ["bm25"] and again.query_set_id == run.query_set_id
    expect(page.locator("table.metrics-table")).to_be_visible(timeout=WORKER_WAIT_MS)
    expect(page.locator("#metrics-note")).to_contain_text(f"Change since run #{run.pk}")
    shot(page, "06-again")

    page.goto(f"{live_server.url}/evaluations/")
    expect(page.locator("#evaluation-history tbody tr")).to_have_count(2)
    shot(page, "07-history")


def test_a_failed_run_says_why_and_shows_no_figures(page, live_server, governed_ops):
    from tests.retrieval.evaluation.builders import ops_set

    person("cora", "curator", password=PASSWORD)
    run = EvaluationRun.objects.create(  # as the worker leaves a run whose mode has no model
        catalog=governed_ops, query_set=ops_set(), modes=["vector"], queries_total=5, created_by="cora",
        status="failed", error="vector: no embedding model (LECTERN_EMBEDDING_MODEL=none)", withheld=["vault"])
    page.goto(f"{live_server.url}/evaluations/{run.pk}/")
    page.fill("input[name=username]", "cora")
    page.fill("input[name=password]", PASSWORD)
    page.click("button:has-text('Sign in')")
    page.wait_for_url(f"{live_server.url}/evaluations/{run.pk}/")

    expect(page.locator("#failed-heading")).to_have_text("The run failed")
    expect(page.locator("pre.error-text")).to_contain_text("no embedding model")
    expect(page.locator("table.metrics-table")).to_have_count(0)
    shot(page, "08-failed")
