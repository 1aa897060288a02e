"""The crawl benchmark runs end to end on a small generated site: the first crawl reads
every page, the re-crawl reads none (each answers 304), and nothing is written."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from benchmarks.commands import command_load
from benchmarks.web import crawl_timings, depth_for
from catalog.models import ReferenceSource


def test_a_first_crawl_reads_every_page_and_a_recrawl_none(db):
    results = crawl_timings(20)

    first, again = results["first"], results["again"]
    assert (first.pages, first.read, again.pages, again.read) == (20, 20, 20, 0)
    assert first.requests == again.requests == 21  # each page, and robots.txt
    assert first.pages_per_second > 0 and again.pages_per_second > 0
    assert not ReferenceSource.objects.exists()


def test_the_command_reports_both_crawls_and_writes_json(db, tmp_path, capsys):
    call_command(command_load("bench_web"), "--pages", "9", "--json", str(tmp_path / "web.json"))

    out = capsys.readouterr().out
    assert "first crawl" in out and "re-crawl (304)" in out and "pages/s" in out
    written = json.loads((tmp_path / "web.json").read_text())
    assert written["first"]["read"] == 9 and written["again"]["read"] == 0


@pytest.mark.parametrize(("pages", "depth"), [(1, 0), (9, 1), (73, 2), (74, 3), (300, 3)])
def test_the_crawl_goes_as_deep_as_the_generated_tree(pages, depth):
    assert depth_for(pages) == depth
