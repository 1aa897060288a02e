"""What changed in a source since it was indexed; pure Python.

Documents are matched by path (or external id) and compared by content sha256. A file
whose size and mtime match the stored document is taken as unchanged without reading
it (as git's stat cache does), so a scan of a large unchanged source reads no content.
A document whose chunks were cut otherwise than the run would cut them (its stamp is
not one the run holds as current: catalog.indexing.chunks.CurrentCut) is re-indexed as
if it had changed: a change of chunk size, overlap, model or chunker reaches every
document at the next run, full or not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar


@dataclass(frozen=True)
class StoredDocument:
    pk: int
    path: str
    sha256: str
    size: int
    mtime: float | None
    chunking: str  # how its chunks were cut (catalog.indexing.chunks.chunking_stamp)
    locator: dict[str, Any] = field(default_factory=dict, hash=False)  # a git file's blob id, among others


class FreshDocument(Protocol):
    """A document as a source holds it now (catalog.sources.documents.DocumentInput)."""

    path: str
    sha256: str
    size: int
    mtime: float | None
    replaces: int | None  # set by diff_documents: the stored document it supersedes
    locator: dict[str, Any]


Fresh = TypeVar("Fresh", bound=FreshDocument)


@dataclass
class Diff(Generic[Fresh]):
    added: list[Fresh] = field(default_factory=list)
    changed: list[Fresh] = field(default_factory=list)  # same path, new content (or cut otherwise)
    removed: list[int] = field(default_factory=list)  # stored pks
    replaced: list[int] = field(default_factory=list)  # stored pks of the changed documents' old versions
    unchanged: int = 0
    restat: list[tuple[int, int, float | None]] = field(default_factory=list)  # same content, new size/mtime
    # Same content read from elsewhere: a git file at a new blob, a web page with new
    # validators or links. Its locator moves so the next sync compares with this one.
    relocated: list[tuple[int, dict[str, Any]]] = field(default_factory=list)

    @property
    def to_index(self) -> list[Fresh]:
        return self.added + self.changed

    @property
    def stale_pks(self) -> list[int]:
        """Stored documents whose rows go: removed ones and the old versions of changed ones."""
        return self.removed + self.replaced


def stat_unchanged(stored: StoredDocument, size: int, mtime: float | None) -> bool:
    return stored.size == size and stored.mtime is not None and stored.mtime == mtime


def diff_documents(stored: Iterable[StoredDocument], fresh: Iterable[Fresh], *, cut_as_now: Callable[[str], bool],
                   full: bool = False) -> Diff[Fresh]:
    """Classify `fresh` documents against `stored`, setting `replaces` on the changed
    ones: new content, or chunks whose stamp `cut_as_now` does not hold as current. With
    `full`, every document is re-indexed."""
    by_path = {doc.path: doc for doc in stored}
    diff: Diff[Fresh] = Diff()
    seen: set[str] = set()
    for doc in fresh:
        seen.add(doc.path)
        old = by_path.get(doc.path)
        if old is None:
            diff.added.append(doc)
        elif full or old.sha256 != doc.sha256 or not cut_as_now(old.chunking):
            doc.replaces = old.pk
            diff.changed.append(doc)
            diff.replaced.append(old.pk)
        else:
            diff.unchanged += 1
            if (old.size, old.mtime) != (doc.size, doc.mtime):
                diff.restat.append((old.pk, doc.size, doc.mtime))
            if doc.locator and doc.locator != old.locator:
                diff.relocated.append((old.pk, doc.locator))
    diff.removed = [doc.pk for path, doc in by_path.items() if path not in seen]
    return diff
