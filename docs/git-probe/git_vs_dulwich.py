"""The probe behind decision 0052: the git command against dulwich on a 10,000-file
repository (list the tree, read every blob, read one blob, a one-commit fetch).

Not part of the product or its dependencies: install dulwich beside it first,
    pip install --target /tmp/dulwich-pkg dulwich==1.2.21
make the repository (10,000 markdown files of ~1.3 KB in folders of 100, committed,
cloned bare to /tmp/gbench/b.git), then run this file with the project's Python."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

sys.path.insert(0, "/tmp/dulwich-pkg")
from dulwich import porcelain  # noqa: E402 - after the path it is installed under
from dulwich.object_store import iter_tree_contents  # noqa: E402
from dulwich.repo import Repo  # noqa: E402

BARE = "/tmp/gbench/b.git"


def median_s(action: Callable[[], object], runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def git(*args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(["git", *args], capture_output=True, check=True, input=stdin).stdout


def main() -> None:
    head = git("-C", BARE, "rev-parse", "HEAD").decode().strip()
    entries = [e for e in git("-C", BARE, "ls-tree", "-r", "-z", "--long", "--full-tree", head).split(b"\0") if e]
    shas = [entry.split()[2].decode() for entry in entries]
    repo = Repo(BARE)

    def dulwich_all() -> None:
        for sha in shas:
            _ = repo[sha.encode()].data

    def cli_fetch() -> None:
        shutil.rmtree("/tmp/gbench/m1", ignore_errors=True)
        git("init", "-q", "--bare", "/tmp/gbench/m1")
        git("-C", "/tmp/gbench/m1", "fetch", "-q", "--depth=1", f"file://{BARE}", "+HEAD:refs/x")

    def dulwich_fetch() -> None:
        shutil.rmtree("/tmp/gbench/m2", ignore_errors=True)
        with open(os.devnull, "wb") as quiet:
            porcelain.clone(f"file://{BARE}", "/tmp/gbench/m2", bare=True, depth=1, errstream=quiet)

    probes: list[tuple[str, Callable[[], object]]] = [
        ("list the tree: git ls-tree -r --long", lambda: git("-C", BARE, "ls-tree", "-r", "-z", "--long", head)),
        ("list the tree: dulwich", lambda: list(iter_tree_contents(repo.object_store, repo[head.encode()].tree))),
        ("read every blob: git cat-file --batch",
         lambda: git("-C", BARE, "cat-file", "--batch", stdin="".join(f"{s}\n" for s in shas).encode())),
        ("read every blob: dulwich", dulwich_all),
        ("read one blob: git cat-file",
         lambda: git("-C", BARE, "cat-file", "--batch", stdin=f"{shas[5000]}\n".encode())),
        ("read one blob: dulwich (repository opened)", lambda: Repo(BARE)[shas[5000].encode()].data),
        ("one-commit fetch: git", cli_fetch),
        ("one-commit clone: dulwich", dulwich_fetch),
    ]
    for name, action in probes:
        print(f"{name:<44} {median_s(action) * 1000:9.1f} ms")


if __name__ == "__main__":
    main()
