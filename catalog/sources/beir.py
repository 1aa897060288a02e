"""A BEIR corpus (JSON lines) as the documents of an upload source (`manage.py import_jsonl`)."""

from __future__ import annotations

import json
from collections.abc import Iterable

from catalog.sources.documents import DocumentInput
from catalog.sources.errors import SourceError


def parse_beir_jsonl(lines: Iterable[str]) -> list[DocumentInput]:
    """BEIR corpus lines ({"_id", "title"?, "text"}) as documents; the title is
    prepended to the text so that both are searchable. Raises SourceError naming the
    first bad line."""
    documents, seen = [], set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SourceError(f"line {number}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict) or not isinstance(row.get("_id"), str) or not row["_id"]:
            raise SourceError(f"line {number}: needs a non-empty string '_id'")
        title, text = row.get("title") or "", row.get("text") or ""
        if not isinstance(title, str) or not isinstance(text, str):
            raise SourceError(f"line {number}: 'title' and 'text' must be strings")
        if row["_id"] in seen:
            raise SourceError(f"line {number}: duplicate _id {row['_id']!r}")
        seen.add(row["_id"])
        body = f"{title}\n\n{text}" if title and text else title or text
        documents.append(DocumentInput(row["_id"], title[:500], body, len(body.encode("utf-8"))))
    return documents
