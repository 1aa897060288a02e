"""The diff a reviewer reads when approved content changed (pure: no Django): the
approved documents against the new ones, file by file, as one unified diff, bounded."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

DIFF_MAX_CHARS = 64_000
CONTEXT_LINES = 3


@dataclass(frozen=True)
class DocumentText:
    sha256: str
    text: str | None  # None: not kept (past the size an approval keeps)
    commit: str = ""  # a git file's: the commit its text was read at


@dataclass(frozen=True)
class ContentDiff:
    text: str
    added: list[str]
    removed: list[str]
    changed: list[str]
    truncated: bool

    @property
    def summary(self) -> dict[str, object]:
        return {"added": self.added, "removed": self.removed, "changed": self.changed, "truncated": self.truncated}


def _lines(document: DocumentText | None) -> list[str]:
    if document is None or document.text is None:
        return []
    return document.text.splitlines(keepends=True)


def _file_diff(path: str, old: DocumentText | None, new: DocumentText | None) -> str:
    if (old is not None and old.text is None) or (new is not None and new.text is None):
        return f"--- a/{path}\n+++ b/{path}\n@@ text not kept: sha256 {old.sha256 if old else '-'} -> " \
               f"{new.sha256 if new else '-'} @@\n"
    lines = difflib.unified_diff(_lines(old), _lines(new), fromfile="/dev/null" if old is None else f"a/{path}",
                                 tofile="/dev/null" if new is None else f"b/{path}", n=CONTEXT_LINES,
                                 fromfiledate=_at(old), tofiledate=_at(new))
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def _at(document: DocumentText | None) -> str:
    """What a diff's file line says after the name: the commit a git file was read at."""
    return f"commit {document.commit}" if document is not None and document.commit else ""


def content_diff(old: Mapping[str, DocumentText], new: Mapping[str, DocumentText], *,
                 max_chars: int = DIFF_MAX_CHARS) -> ContentDiff:
    """Unified diff from `old` (path -> document) to `new`, paths in order; cut at
    `max_chars` on a line boundary, with a last line saying so."""
    added = sorted(set(new) - set(old))
    removed = sorted(set(old) - set(new))
    changed = sorted(path for path in set(old) & set(new) if old[path].sha256 != new[path].sha256)
    parts, size, truncated = [], 0, False
    for path in sorted({*added, *removed, *changed}):
        for line in _file_diff(path, old.get(path), new.get(path)).splitlines(keepends=True):
            if size + len(line) > max_chars:
                truncated = True
                break
            parts.append(line)
            size += len(line)
        if truncated:
            parts.append("... diff cut here: longer than the request keeps\n")
            break
    return ContentDiff("".join(parts), added, removed, changed, truncated)
