"""Git source benchmark: a repository of N markdown files, first indexed, then re-synced
after one-file commits, timed end to end (what the scan and the worker do).

Measures, on one git source reading a bare repository under a source root (the git
command over file://, as over https: the same fetch, ls-tree and cat-file):
  - the first index (fetch of one commit, every file read, chunked, embedded, written),
  - a scan of the unchanged source (ls-remote only),
  - per edit: a one-file commit detected by the scan and re-synced (fetch, tree
    compared by blob id, one file read, re-indexed), with the files it read counted,
  - the mirror's size on disk after the syncs (one commit's objects).
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from benchmarks.reindex import _page
from catalog.indexing.runs import source_index_now
from catalog.models import Catalog, IndexRun, ReferenceSource
from catalog.sources.documents import source_fingerprint
from catalog.sources.git import mirror_path

_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
        "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.com", "LC_ALL": "C"}


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=_ENV, capture_output=True, check=True).stdout.decode().strip()


@dataclass
class GitSyncFigures:
    files: int
    first_index_s: float
    scan_unchanged_s: list[float]
    resync_s: list[float]  # a one-file commit: scan, fetch, compare, read, re-index
    files_read: list[int]  # per re-sync: how many files it read (1: only the changed one)
    mirror_bytes: int

    def as_dict(self) -> dict[str, object]:
        return {"files": self.files, "first_index_s": round(self.first_index_s, 2),
                "scan_unchanged_median_s": round(statistics.median(self.scan_unchanged_s), 3),
                "resync_median_s": round(statistics.median(self.resync_s), 2),
                "resync_max_s": round(max(self.resync_s), 2),
                "files_read_per_resync": sorted(set(self.files_read)),
                "mirror_mb": round(self.mirror_bytes / 1e6, 1)}


def repository_ensure(root: Path, count: int) -> Path:
    """A work tree of `count` markdown files in folders of 100, and its bare copy; made
    once (a later run reuses them and its commits go on from there)."""
    work, bare = root / f"git-bench-{count}", root / f"git-bench-{count}.git"
    if not bare.exists():
        work.mkdir(parents=True, exist_ok=True)
        _git("init", "--quiet", "--initial-branch=main", cwd=work)
        rng = random.Random(count)
        for number in range(count):
            path = work / f"docs/section-{number // 100:03d}/page-{number:05d}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(_page(rng, number), encoding="utf-8")
        _git("add", "--all", cwd=work)
        _git("commit", "--quiet", "-m", "the corpus", cwd=work)
        _git("clone", "--quiet", "--bare", str(work), str(bare), cwd=root)
    return bare


def _commit_one(bare: Path, count: int, note: str) -> None:
    work = bare.with_suffix("")
    path = work / f"docs/section-{random.randrange(count) // 100:03d}"
    target = sorted(path.iterdir())[0]
    target.write_text(target.read_text(encoding="utf-8") + f"\n{note}: a new runbook note.\n", encoding="utf-8")
    _git("commit", "--quiet", "-am", note, cwd=work)
    _git("push", "--quiet", str(bare), "main", cwd=work)


def _timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def run_git_bench(*, count: int = 10_000, edits: int = 5, log: Callable[[str], object] = print) -> GitSyncFigures:
    root = Path(settings.LECTERN_SOURCE_ROOTS[-1])
    bare = repository_ensure(root, count)
    catalog, _ = Catalog.objects.get_or_create(slug=f"bench-git-{count}", defaults={"name": f"{count} files (git)"})
    ReferenceSource.objects.filter(catalog=catalog, slug="repo").delete()  # a first index every run
    source = ReferenceSource.objects.create(catalog=catalog, slug="repo", name="Repository", kind="git",
                                            location=str(bare), ref="main")
    first = _timed(lambda: source_index_now(source=source, trigger=IndexRun.Trigger.COMMAND))
    log(f"first index of {count} files: {first:.1f}s")
    source.refresh_from_db()
    scans = [_timed(lambda: source_fingerprint(source=source)) for _ in range(5)]
    log(f"scan of the unchanged source: median {statistics.median(scans):.3f}s")
    resyncs, read = [], []
    for i in range(edits):
        _commit_one(bare, count, f"edit {time.time_ns()} {i}")

        def detect_and_sync() -> None:
            source.refresh_from_db()
            assert source_fingerprint(source=source) != source.fingerprint, "the commit was not detected"
            source_index_now(source=source, trigger=IndexRun.Trigger.SCHEDULE)

        resyncs.append(_timed(detect_and_sync))
        source.refresh_from_db()
        read.append(int(source.sync["read"]))
        log(f"commit {i + 1}: detected and re-synced in {resyncs[-1]:.2f}s, {read[-1]} file(s) read")
    return GitSyncFigures(count, first, scans, resyncs, read, _size(mirror_path(source.pk)))
