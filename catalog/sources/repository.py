"""A git source's documents: the files of the commit its branch or tag names now
(catalog.sources.git), those its include and exclude globs select and Lectern reads.

A sync reads only the blobs that changed: a stored document whose blob id is the one
the new tree holds at its path is kept unread (as a glob's unchanged file is), so a
commit that changes one file of ten thousand reads and re-indexes that one file.
Renames and deletions fall out of the same comparison (the old path goes, the new one
is read); a submodule, a symbolic link and a Git LFS pointer are listed as skipped, with
why, and the rest of the source indexes.

The fingerprint is a hash of the (path, blob id) pairs indexed, not the commit: a
commit that touches no indexed file changes no content, so approvals bound to the
fingerprint stand; the commit is kept in the source's sync record and in each
document's locator.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.utils import timezone

from catalog.indexing.diffing import StoredDocument
from catalog.models import ReferenceSource
from catalog.sealing import unseal
from catalog.sources.extraction import ExtractionError, extract, file_format
from catalog.sources.git import (
    GitRemote,
    TreeFile,
    blobs_read,
    known_hosts_path,
    mirror_fetch,
    remote_commit,
    tree_files,
    web_link,
)
from catalog.sources.inputs import Collected, DocumentInput, document_input

SECRET_PURPOSE = "lectern.catalog.git-secret"
_LFS_POINTER = b"version https://git-lfs.github.com/spec/"


def source_remote(source: ReferenceSource) -> GitRemote:
    """The remote a git source reads, its secret opened."""
    secret = unseal(source.secret_sealed, purpose=SECRET_PURPOSE, what=f"the secret of source {source.slug!r}") \
        if source.secret_sealed else ""
    return GitRemote(source.location, source.ref.strip(), secret, str(known_hosts_path(source.pk)))


def globs(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A path glob as a regex: `**` any folders (none too), `*` and `?` within one name;
    a pattern without '/' matches a file name in any folder."""
    parts, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            parts.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            parts.append(".*")
            i += 2
        elif pattern[i] == "*":
            parts.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            parts.append("[^/]")
            i += 1
        else:
            parts.append(re.escape(pattern[i]))
            i += 1
    prefix = "" if "/" in pattern.strip("/") else "(?:.*/)?"
    return re.compile(prefix + "".join(parts).lstrip("/") + r"\Z")


def selected(path: str, include: list[str], exclude: list[str]) -> bool:
    """Whether the include globs (none: every path) take `path` and no exclude glob drops it."""
    if include and not any(_glob_regex(p).match(path) for p in include):
        return False
    return not any(_glob_regex(p).match(path) for p in exclude)


def filters_key(source: ReferenceSource) -> str:
    """What the source's selection depends on besides the commit."""
    return hashlib.sha256(f"{source.ref}\0{source.include}\0{source.exclude}".encode()).hexdigest()[:16]


def git_fingerprint_now(source: ReferenceSource) -> str:
    """What the scheduled scan compares with the stored fingerprint, read without
    fetching: the stored one while the remote's ref still names the commit last synced
    with the same selection; else one that differs from it, so a run is requested."""
    commit = remote_commit(source_remote(source))
    if source.sync.get("commit") == commit and source.sync.get("filters") == filters_key(source):
        return source.fingerprint
    return f"commit:{commit}"


def _skip_reason(entry: TreeFile) -> str | None:
    if not entry.path.isprintable() or any("\udc80" <= char <= "\udcff" for char in entry.path):
        return "its name is not printable UTF-8: rename it in the repository"
    if entry.kind == "commit":
        return f"a submodule (commit {entry.sha[:12]}): not followed; add its repository as a source of its own"
    if entry.mode == "120000":
        return "a symbolic link: not followed"
    if entry.size is not None and entry.size > settings.LECTERN_MAX_UPLOAD_BYTES:
        return f"{entry.size:,} bytes, more than LECTERN_MAX_UPLOAD_BYTES ({settings.LECTERN_MAX_UPLOAD_BYTES:,})"
    return None


def git_collect(source: ReferenceSource, stored: dict[str, StoredDocument]) -> Collected:
    """Fetch the source's commit and read the files that changed since the stored ones
    (see the module docstring)."""
    remote = source_remote(source)
    commit = mirror_fetch(source.pk, remote)
    include, exclude = globs(source.include), globs(source.exclude)
    documents: list[DocumentInput] = []
    skipped: list[tuple[str, str]] = []
    unread: list[TreeFile] = []
    failed_before = {path: (blob, reason) for path, (blob, reason) in source.sync.get("unreadable", {}).items()}
    tree = tree_files(source.pk, commit)
    other_types = 0
    for entry in tree:
        if not selected(entry.path, include, exclude):
            continue
        if (reason := _skip_reason(entry)) is not None:
            skipped.append((entry.path.encode("utf-8", "backslashreplace").decode(), reason))
            continue
        if file_format(entry.path) is None:
            other_types += 1  # code, images: a repository holds many; counted, not listed one by one
            continue
        known = stored.get(entry.path)
        refused = failed_before.get(entry.path)
        if refused is not None and refused[0] == entry.sha:  # the same bytes failed last time: not read again
            skipped.append((entry.path, refused[1]))
        elif known is not None and known.locator.get("blob") == entry.sha:
            documents.append(DocumentInput(entry.path, "", None, entry.size or 0, None, known.sha256,
                                           locator=known.locator))
        else:
            unread.append(entry)
    unreadable: dict[str, tuple[str, str]] = {}
    for entry, data in blobs_read(source.pk, unread):
        try:
            if data.startswith(_LFS_POINTER):
                raise ExtractionError("a Git LFS pointer: the file's content is not in the repository")
            document = document_input(entry.path, extract(entry.path, data), len(data))
        except ExtractionError as exc:
            skipped.append((entry.path, str(exc)))
            unreadable[entry.path] = (entry.sha, str(exc))
            continue
        document.locator |= _origin(remote.url, commit, entry)
        documents.append(document)
    digest = hashlib.sha256()
    for document in sorted(documents, key=lambda d: d.path):
        digest.update(f"{document.path}\0{document.locator.get('blob', '')}\n".encode())
    sync: dict[str, Any] = {"commit": commit, "ref": remote.ref or "HEAD", "filters": filters_key(source),
                            "files": len(tree), "indexed": len(documents), "read": len(unread),
                            "other_types": other_types, "skipped": len(skipped),
                            "synced_at": timezone.now().isoformat(timespec="seconds"),
                            # files that could not be read, by blob: the next sync skips them unread
                            "unreadable": {**{path: failed_before[path] for path, _ in skipped
                                              if path in failed_before}, **unreadable}}
    return Collected(documents, skipped, digest.hexdigest(), sync=sync)


def _origin(url: str, commit: str, entry: TreeFile) -> dict[str, Any]:
    """A git file's document locator: the commit it was read at, its blob id, and its
    forge page where the host is known."""
    origin: dict[str, Any] = {"commit": commit, "blob": entry.sha}
    if (link := web_link(url, commit, entry.path)) is not None:
        origin["link"], origin["forge"] = link
    return origin
