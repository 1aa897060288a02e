"""A document as a source holds it now, before it is indexed (DocumentInput), and all of
a source's documents as one read found them (Collected); pure: no Django."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from catalog.sources.extraction import Extracted
from catalog.sources.fingerprints import text_sha256


@dataclass
class DocumentInput:
    path: str
    title: str
    text: str | None  # None: not read, unchanged by size and mtime (see catalog.indexing.diffing)
    size: int
    mtime: float | None = None
    sha256: str = ""
    replaces: int | None = None  # the stored document this one supersedes
    # Where it was read from (catalog.sources.locators): its format, a git file's commit
    # and link, a web page's URL; its chunks' locators add their position to it.
    locator: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.sha256 and self.text is not None:
            self.sha256 = text_sha256(self.text)

    @property
    def loaded_text(self) -> str:
        """The text of a document being indexed or stored: always read by then (a full
        rebuild first reads what the stat cache skipped: _read_unread)."""
        if self.text is None:
            raise RuntimeError(f"{self.path}: its text was never read")
        return self.text


@dataclass
class Collected:
    documents: list[DocumentInput]
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    fingerprint: str = ""
    edits: int = 0  # how many content edits of the source it holds (catalog.sources.editors)
    sync: dict[str, Any] = field(default_factory=dict)  # what a git sync found, for the source page


def title_of(path: str, text: str) -> str:
    """A document's title: its first level-one markdown heading, else its file name."""
    for line in text.splitlines()[:50]:
        if line.startswith("# "):
            return line[2:].strip()[:500]
    return PurePosixPath(path).stem.replace("-", " ").replace("_", " ")[:500]


def document_input(path: str, extracted: Extracted, size: int, mtime: float | None = None) -> DocumentInput:
    """The document a file read as `extracted` becomes: titled by the file's own title,
    else its first level-one heading, else its name."""
    title = extracted.title or title_of(path, extracted.text)
    return DocumentInput(path, title, extracted.text, size, mtime, locator={"format": extracted.format})


