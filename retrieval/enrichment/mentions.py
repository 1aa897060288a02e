"""What a text points at: `@reference-id` mentions, bare reference ids, markdown link
targets and file paths. Pure functions; the detection passes decide what they mean."""

from __future__ import annotations

import posixpath
import re
from urllib.parse import unquote

# Bump when what `content_ids` finds changes: extractions stored under an older rule
# are redone (retrieval.enrichment.detection.source_mentions).
EXTRACTION_RULES = 2
# `@id` not glued to a word, an address or a path on either side: "see @circuit-breaker."
# and "(@caching)", not "me@host", "@caching/redis-adapter", "@caching.cached(" or
# "@caching.io". The guard after the id is the tag matcher's (retrieval/tagmatch.py): no
# [\w/-], nor a "." followed by [\w/]; a period that ends a sentence is fine.
# `@catalog/id` names the catalog too (an agent reading several catalogs is hinted so).
_AT_ID = re.compile(r"(?<![\w@./-])@(?:([A-Za-z0-9_-]+)/)?([A-Za-z0-9][A-Za-z0-9_-]*)(?![\w/-])(?!\.[\w/])")
# Bare ids worth following in content: compound tokens (with - or _), guarded like tags.
_BARE_ID = re.compile(r"(?<![\w@./-])([A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)+)(?![\w/-])(?!\.[\w/])")
_INLINE_LINK = re.compile(r"\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'][^\"'\n]*[\"'])?\s*\)")
_REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]\n]+\]:\s*<?(\S+?)>?(?:\s+[\"'(].*)?$", re.MULTILINE)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# A whole run of path characters holding a "/" or a "." (only those can be paths): the
# scan skips plain words, 2.5x faster on prose than taking every run and filtering.
_PATH_TOKEN = re.compile(r"(?<![\w.~/-])[\w.~-]*[./][\w.~/-]*")
_FILE_NAME = re.compile(r"[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,7}$")
MAX_PATHS = 200


def at_mentions(text: str) -> list[str]:
    """Distinct `@id` and `@catalog/id` mentions in order of appearance, lowercased,
    trailing - and _ dropped."""
    seen: dict[str, None] = {}
    for match in _AT_ID.finditer(text):
        catalog, ident = match.group(1), match.group(2).rstrip("-_").lower()
        if ident:
            seen.setdefault(f"{catalog.lower()}/{ident}" if catalog else ident, None)
    return list(seen)


def content_ids(text: str) -> set[str]:
    """Every token of a reference's content that may be another reference's id:
    `@id` mentions and compound identifiers (a single plain word is too common to
    count as a mention unless written `@word`)."""
    ids = set(at_mentions(text))
    ids.update(match.group(1).lower() for match in _BARE_ID.finditer(text))
    return ids


def resolve_link(target: str, document_path: str) -> str | None:
    """A markdown link target as a path relative to the source root, or None for
    external URLs, anchors and targets that climb out of the root. A directory
    target keeps its trailing slash."""
    target = unquote(target.split("#", 1)[0].split("?", 1)[0]).strip()
    if not target or _SCHEME.match(target) or target.startswith("//"):
        return None
    directory = target.endswith("/")
    if target.startswith("/"):
        joined = target.lstrip("/")
    else:
        joined = posixpath.join(posixpath.dirname(document_path), target)
    resolved = posixpath.normpath(joined)
    if resolved in (".", "") or resolved == ".." or resolved.startswith("../"):
        return None
    return resolved + "/" if directory else resolved


def markdown_links(text: str, document_path: str) -> set[str]:
    """Targets of inline and reference-style markdown links, resolved against the
    document's own path."""
    targets = [m.group(1) for m in _INLINE_LINK.finditer(text)]
    targets += [m.group(1) for m in _REFERENCE_LINK.finditer(text)]
    resolved = (resolve_link(target, document_path) for target in targets)
    return {path for path in resolved if path}


def path_candidates(text: str) -> list[str]:
    """Tokens of a tool result that look like file paths (`dir/file`, `file.ext`),
    in order, at most MAX_PATHS. Trailing punctuation is dropped; `./` is not kept."""
    found: dict[str, None] = {}
    for match in _PATH_TOKEN.finditer(text):
        token = match.group(0).rstrip(".")
        if "/" not in token and not _FILE_NAME.search(token):
            continue
        if token.startswith("./"):
            token = token[2:]
        if token and token not in ("/", "~"):
            found.setdefault(token, None)
            if len(found) >= MAX_PATHS:
                break
    return list(found)
