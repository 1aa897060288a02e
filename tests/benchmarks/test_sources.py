"""The source benchmarks run end to end, small: a git repository indexed and re-synced
after one-file commits (each reading that one file), and every format extracted."""

from __future__ import annotations

import pytest

from benchmarks.formats import run_formats_bench
from benchmarks.git_sync import run_git_bench
from catalog.models import Chunk

pytestmark = pytest.mark.django_db


def test_the_git_benchmark_reads_only_the_changed_file_on_each_resync(tmp_path, settings):
    settings.LECTERN_SOURCE_ROOTS = [tmp_path.resolve()]
    settings.LECTERN_GIT_DIR = tmp_path / "mirrors"

    figures = run_git_bench(count=30, edits=2, log=lambda line: None)

    assert figures.files_read == [1, 1] and len(figures.resync_s) == 2
    assert Chunk.objects.filter(source__slug="repo").count() >= 30
    assert figures.mirror_bytes > 0


def test_the_formats_benchmark_extracts_every_format():
    figures = run_formats_bench(repeat=2, log=lambda line: None)

    assert [f.format for f in figures] == ["markdown", "html", "pdf", "docx", "pptx"]
    assert all(f.text_chars > 1000 and f.documents_per_s > 0 for f in figures)
