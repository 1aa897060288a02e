"""The text an approval covers, and the diff of a later change against it.

When a request is approved, the source's documents at that fingerprint are kept
(ApprovedContent, one per source and fingerprint), so that when a reindex changes the
content the new request can carry what changed against what a reviewer approved."""

from __future__ import annotations

from typing import Any

from approvals.diffs import ContentDiff, DocumentText, content_diff
from approvals.models import ApprovedContent
from catalog.models import Document

# What one approval keeps of a source's text; past it, documents are kept by hash only.
KEPT_TEXT_MAX_CHARS = 4_000_000


def documents_now(source_id: int) -> list[dict[str, Any]]:
    """The source's indexed documents as they are in this transaction."""
    rows = Document.objects.filter(source_id=source_id).order_by("path").values_list(
        "path", "content_sha256", "title", "text", "locator")
    documents, kept = [], 0
    for path, sha256, title, text, locator in rows:
        keep = kept + len(text) <= KEPT_TEXT_MAX_CHARS
        kept += len(text) if keep else 0
        document = {"path": path, "sha256": sha256, "title": title, "text": text if keep else None}
        if commit := locator.get("commit"):
            document["commit"] = commit  # a git file's: the diff and the review page name it
        documents.append(document)
    return documents


def approved_content_keep(*, source_id: int, fingerprint: str) -> ApprovedContent:
    """The kept text of `source_id` at `fingerprint`, kept now from its documents when it
    is not yet. The caller holds the source row locked, so the documents read are the
    fingerprint's (a switch to new content waits)."""
    kept = ApprovedContent.objects.filter(source_id=source_id, fingerprint=fingerprint).first()
    if kept is not None:
        return kept
    kept, _ = ApprovedContent.objects.get_or_create(source_id=source_id, fingerprint=fingerprint,
                                                    defaults={"documents": documents_now(source_id)})
    return kept


def as_texts(documents: list[dict[str, Any]]) -> dict[str, DocumentText]:
    return {d["path"]: DocumentText(d["sha256"], d["text"], d.get("commit", "")) for d in documents}


def diff_against(approved: ApprovedContent | None, documents: list[dict[str, Any]]) -> ContentDiff:
    """What changed from the approved text (nothing approved: everything is added)."""
    return content_diff(as_texts(approved.documents) if approved else {}, as_texts(documents))
