"""The fingerprints that say whether a source changed (pure: no Django): sha256 over its
files' paths, sizes and mtimes (glob), over its files' content hashes (uploads), or over
its text (inline)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def fingerprint(entries: Iterable[tuple[str, int, float | None]]) -> str:
    """sha256 over the sorted (relative path, size, mtime in microseconds) of a source's files."""
    digest = hashlib.sha256()
    for path, size, mtime in sorted(entries):
        digest.update(f"{path}\0{size}\0{int((mtime or 0) * 1_000_000)}\n".encode())
    return digest.hexdigest()


def uploads_fingerprint(entries: Iterable[tuple[str, str]]) -> str:
    """sha256 over the sorted (path, content sha256) of an upload source's files."""
    entries = sorted(entries)
    if not entries:
        return ""
    digest = hashlib.sha256()
    for path, sha in entries:
        digest.update(f"{path}\0{sha}\n".encode())
    return digest.hexdigest()
