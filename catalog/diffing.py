"""What changed in a source since it was indexed; pure Python.

Documents are matched by path (or external id) and compared by content sha256. A file
whose size and mtime match the stored document is taken as unchanged without reading
it (as git's stat cache does), so a scan of a large unchanged source reads no content.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class StoredDocument:
    pk: int
    path: str
    sha256: str
    size: int
    mtime: float | None


@dataclass
class Diff:
    added: list = field(default_factory=list)  # DocumentInput
    changed: list = field(default_factory=list)  # DocumentInput (same path, new content)
    removed: list[int] = field(default_factory=list)  # stored pks
    unchanged: int = 0
    restat: list[tuple[int, int, float | None]] = field(default_factory=list)  # same content, new size/mtime

    @property
    def to_index(self) -> list:
        return self.added + self.changed

    @property
    def stale_pks(self) -> list[int]:
        """Stored documents whose rows go: removed ones and the old versions of changed ones."""
        return self.removed + [doc.replaces for doc in self.changed]


def stat_unchanged(stored: StoredDocument | None, size: int, mtime: float | None) -> bool:
    return stored is not None and stored.size == size and stored.mtime is not None and stored.mtime == mtime


def diff_documents(stored: Iterable[StoredDocument], fresh: Iterable, *, full: bool = False) -> Diff:
    """Classify `fresh` documents (objects with path, sha256, size, mtime and a settable
    `replaces`) against `stored`. With `full`, every document is re-indexed."""
    by_path = {doc.path: doc for doc in stored}
    diff = Diff()
    seen = set()
    for doc in fresh:
        seen.add(doc.path)
        old = by_path.get(doc.path)
        if old is None:
            diff.added.append(doc)
        elif full or old.sha256 != doc.sha256:
            doc.replaces = old.pk
            diff.changed.append(doc)
        else:
            diff.unchanged += 1
            if (old.size, old.mtime) != (doc.size, doc.mtime):
                diff.restat.append((old.pk, doc.size, doc.mtime))
    diff.removed = [doc.pk for path, doc in by_path.items() if path not in seen]
    return diff
