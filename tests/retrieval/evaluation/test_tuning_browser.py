"""Tuning in Debian's chromium, with a real django-q2 worker: a curator starts a tuning
run of a catalog's test set, follows it until the worker is done, reads the held-out
figures; a run with a held-out gain is applied with one click and the catalog's Ranking
panel shows what changed; the ranking form refuses a bad value beside its field and
saves a good one. Every wait is on a condition; every page state is audited and
photographed (tests.browser)."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from catalog.models import AuditEntry, Catalog
from catalog.ranking import RankingSettings
from retrieval.models import TuningRun
from tests.browser import page_audit
from tests.catalog.pages.test_watch_indexing_browser import worker  # noqa: F401  the qcluster fixture
from tests.factories import person
from tests.retrieval.evaluation.builders import ops_set

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery"
WORKER_WAIT_MS = 240_000  # a bound, not a pause: the worker starts, loads the model, tries every setting


def shot(page, name: str) -> None:
    page.evaluate("window.scrollTo(0, 0)")
    page_audit(page, f"tuning-{name}")


def sign_in(page, url: str) -> None:
    page.goto(url)
    page.fill("input[name=username]", "cora")
    page.fill("input[name=password]", PASSWORD)
    page.click("button:has-text('Sign in')")
    page.wait_for_url(url)


def test_a_curator_tunes_a_catalog_with_a_real_worker_and_reads_the_held_out_figures(
        page, live_server, worker, governed_ops):  # noqa: F811
    person("cora", "curator", password=PASSWORD)
    query_set = ops_set()
    sign_in(page, f"{live_server.url}/tuning/")
    expect(page.locator("#runs-heading + p")).to_contain_text("No tuning run yet")
    shot(page, "01-empty")

    page.select_option("#id_query_set", str(query_set.pk))
    page.fill("#id_folds", "2")
    page.click("#tuning-form button[type=submit]")
    page.wait_for_url(re.compile(rf"{live_server.url}/tuning/\d+/$"))
    body = page.locator("#tuning-run")
    expect(body.locator("#gain-heading")).to_be_visible(timeout=WORKER_WAIT_MS)
    expect(body).not_to_have_attribute("hx-trigger", "every 1s")  # polling stopped
    run = TuningRun.objects.get()
    assert run.status == "succeeded" and run.report["candidates"] > 1000
    expect(body.locator("table.metrics-table tbody tr")).to_have_count(3)
    expect(body).to_contain_text("settings tried")
    expect(body.locator("#settings-heading ~ ol li")).to_have_count(2)  # a choice per fold
    if run.gain is not None and run.gain <= 0:
        expect(body.locator(".alert")).to_contain_text("not positive")
    shot(page, "02-done")


def test_a_run_with_a_held_out_gain_is_applied_with_one_click(page, live_server, governed_ops):
    person("cora", "curator", password=PASSWORD)
    current = governed_ops.ranking_settings
    chosen = current.with_values({"k1": 0.9, "rrf_k": 10, "vector_feedback": 3})
    run = TuningRun.objects.create(
        catalog=governed_ops, query_set=ops_set(), folds=2, status="succeeded", created_by="cora",
        current=current.__dict__, chosen=chosen.__dict__, finished_at=timezone.now(), report={
            "candidates": 3382, "in_sample": 0.81, "counts": {"won": 2, "lost": 1, "tied": 2},
            "seconds": {"grid": 4.0, "held_out": 1.0},
            "metrics": {"ndcg_at_10": {"current": 0.7, "tuned": 0.74, "gain": 0.04},
                        "recall_at_100": {"current": 1.0, "tuned": 1.0, "gain": 0.0},
                        "mrr_at_10": {"current": 0.8, "tuned": 0.83, "gain": 0.03}},
            "folds": [{"changes": current.changes(chosen), "queries": 3, "current": 0.6, "tuned": 0.66},
                      {"changes": {"k1": [1.2, 0.9]}, "queries": 2, "current": 0.8, "tuned": 0.82}],
            "won": [{"query_id": "q2", "text": "cache time to live", "current": 0.5, "tuned": 1.0}],
            "lost": [{"query_id": "q4", "text": "log secrets", "current": 1.0, "tuned": 0.63}]})
    sign_in(page, f"{live_server.url}/tuning/{run.pk}/")
    expect(page.locator("#tuning-run")).to_contain_text("+0.0400")
    shot(page, "03-gain")

    page.click("button:has-text('Apply to ops')")
    page.wait_for_url(f"{live_server.url}/catalogs/ops/#ranking")
    panel = page.locator("#ranking")
    expect(panel).to_contain_text("rrf, k 10")
    expect(panel).to_contain_text("best 3 chunks, weight 0.5")
    expect(panel).to_contain_text("Changed from the defaults: k1, rrf_k, vector_feedback")
    expect(page.locator(".messages")).to_contain_text("Applied to ops")
    assert Catalog.objects.get(slug="ops").ranking == {"k1": 0.9, "rrf_k": 10, "vector_feedback": 3}
    assert AuditEntry.objects.filter(action="catalog.ranking_changed", payload__tuning_run=run.pk).count() == 1
    shot(page, "04-applied")


def test_the_ranking_form_refuses_a_bad_value_beside_its_field_and_saves_a_good_one(page, live_server,
                                                                                   governed_ops):
    person("cora", "curator", password=PASSWORD)
    sign_in(page, f"{live_server.url}/catalogs/ops/ranking")
    page.fill("#id_b", "1.5")  # beyond the field's range: the browser itself refuses to send it
    page.click("#ranking-form button[type=submit]")
    assert page.locator("#id_b").evaluate("input => input.validationMessage")
    page.fill("#id_b", "0.5")
    page.fill("#id_bm25_weight", "0")
    page.fill("#id_vector_weight", "0")  # each in range, together refused by the server
    page.click("#ranking-form button[type=submit]")
    expect(page.locator("#id_vector_weight_error")).to_contain_text("At least one weight must be positive")
    expect(page.locator("#ranking-form .alert")).to_contain_text("Not saved")
    assert Catalog.objects.get(slug="ops").ranking == {}
    shot(page, "05-refused")

    page.fill("#id_vector_weight", "1")
    page.fill("#id_bm25_weight", "1")
    page.select_option("#id_fusion", "convex")
    page.fill("#id_bm25_feedback", "10")
    page.click("#ranking-form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/catalogs/ops/#ranking")
    expect(page.locator("#ranking")).to_contain_text("convex, minmax")
    expect(page.locator("#ranking")).to_contain_text("10 terms from the best 10 chunks, weight 0.5")
    assert Catalog.objects.get(slug="ops").ranking_settings == RankingSettings(b=0.5, fusion="convex",
                                                                               bm25_feedback=10)
    shot(page, "07-ranking-panel")


def test_a_better_chunking_on_a_shadow_is_applied_with_one_click(page, live_server, governed_ops):
    from retrieval.evaluation.shadows import shadow_create

    person("cora", "curator", password=PASSWORD)
    run = TuningRun.objects.create(
        catalog=governed_ops, query_set=ops_set(), kind="chunking", status="succeeded", created_by="cora",
        proposal={"chunk_size": 500, "chunk_overlap": 50}, current={"chunk_size": 1000, "chunk_overlap": 100},
        chosen={"chunk_size": 500, "chunk_overlap": 50}, finished_at=timezone.now(), report={
            "documents": 4, "mode": "hybrid", "counts": {"won": 2, "lost": 0, "tied": 3},
            "seconds": {"shadow": 3.2, "compare": 0.4},
            "metrics": {"ndcg_at_10": {"current": 0.72, "tuned": 0.78, "gain": 0.06},
                        "recall_at_100": {"current": 1.0, "tuned": 1.0, "gain": 0.0},
                        "mrr_at_10": {"current": 0.8, "tuned": 0.86, "gain": 0.06}},
            "won": [{"query_id": "q2", "text": "cache time to live", "current": 0.5, "tuned": 1.0}], "lost": []})
    TuningRun.objects.filter(pk=run.pk).update(shadow=shadow_create(catalog=governed_ops, run=run))
    sign_in(page, f"{live_server.url}/tuning/{run.pk}/")
    body = page.locator("#tuning-run")
    expect(body).to_contain_text("chunking 500/50 on a shadow of 4 documents")
    expect(body).to_contain_text("The shadow waits")
    shot(page, "06-chunking")

    page.click("button:has-text('Apply to ops')")
    page.wait_for_url(f"{live_server.url}/catalogs/ops/#ranking")
    expect(page.locator(".stats")).to_contain_text("500 / 50")
    assert not Catalog.objects.exclude(shadow_of=None).exists()
