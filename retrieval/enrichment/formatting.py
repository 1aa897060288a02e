"""The text Lectern injects: hint blocks (seed 000's format), reference expansions,
reading context, startup instructions. Pure.

What enrichment appends to a text (an injection: its blocks) ends with a signed marker,
`<!-- lectern S N MAC -->`: S newlines before the blocks, N characters of blocks, and an
HMAC-SHA256 (128 bits) over both under a server key. Stripping removes exactly the
injections whose marker verifies, byte for byte, so enriching an enriched text does not
stack them; anything else, however much it looks like a block, is the user's and stays.
Nobody without the key can make a marker that verifies, and a changed injection no
longer verifies (it is then kept whole, as the user's)."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

HINT_HEADER = "**Reference sources available** — use `selectReferences` with IDs or tags to select:"
_MARKER = re.compile(r"\n<!-- lectern ([0-2]) ([0-9]{1,9}) ([0-9a-f]{32}) -->")

# What each conventional sub-folder of a reference holds, and what to do with it
# (seed 000's `contents` annotations: directives, not just file lists).
CONTENT_KINDS = {
    "templates": "start from these files and keep their structure",
    "validation": "check your result against these before you finish",
    "policies": "rules that apply to this work; follow them",
    "scripts": "helpers to run; read each one before running it",
}


@dataclass
class HintLine:
    source_id: str  # as the agent writes it: `id`, or `catalog/id` for an agent reading several catalogs
    name: str
    matched: list[str]
    via: str
    score: float | None = None
    withheld_reason: str = ""
    note: str = ""  # for a mention hinted rather than expanded: why, and what to write


@dataclass
class ReferenceText:
    """Everything an expansion says about one reference."""

    source_id: str  # as the agent writes it (see HintLine)
    name: str
    description: str
    paths: list[str]
    contents: dict[str, list[str]] = field(default_factory=dict)  # kind -> paths
    related: list[str] = field(default_factory=list)
    base_dir: str = ""


def one_line(text: str) -> str:
    return " ".join(text.split())


def hint_block(hints: Iterable[HintLine]) -> str:
    lines = []
    for hint in hints:
        if hint.withheld_reason:
            lines.append(f"- @{hint.source_id}: {one_line(hint.name)} (withheld: {hint.withheld_reason})")
        elif hint.via == "mention":
            lines.append(f"- @{hint.source_id}: {one_line(hint.name)} ({hint.note})")
        elif hint.via == "tag":
            lines.append(f"- @{hint.source_id}: {one_line(hint.name)} (matched: {', '.join(hint.matched)})")
        elif hint.via == "semantic":
            lines.append(f"- @{hint.source_id}: {one_line(hint.name)} (related in meaning, score {hint.score:.2f})")
        else:
            lines.append(f"- @{hint.source_id}: {one_line(hint.name)} (linked from {', '.join(hint.matched)})")
    if not lines:
        return ""
    return "---\n" + HINT_HEADER + "\n\n" + "\n".join(lines) + "\n---"


def contents_lines(reference: ReferenceText) -> list[str]:
    lines = []
    for kind, directive in CONTENT_KINDS.items():
        paths = reference.contents.get(kind)
        if paths:
            folder = f"{reference.base_dir}{kind}/"
            count = f"{len(paths)} file" + ("s" if len(paths) != 1 else "")
            lines.append(f"- {kind} ({folder}, {count}): {directive}")
    return lines


SELECTED = "selected; its files are authorised for reading"
LISTED = "listed, not loaded: read its files when you need them"


def expansion_block(reference: ReferenceText, *, status: str = SELECTED) -> str:
    """A reference with its files: selected or expanded (`SELECTED`), or listed in the
    startup instructions (`LISTED`)."""
    lines = [f"---\n**Reference @{reference.source_id}: {one_line(reference.name)}** ({status})"]
    if reference.description:
        lines.append(one_line(reference.description))
    if reference.paths:
        lines.append("Files:")
        lines += [f"- {path}" for path in reference.paths]
    contents = contents_lines(reference)
    if contents:
        lines.append("Contents:")
        lines += contents
    if reference.related:
        lines.append("Related: " + ", ".join(f"@{ident}" for ident in reference.related))
    return "\n".join(lines) + "\n---"


def brief_listing(ref: str, name: str) -> str:
    """A listed reference without its files (the startup text ran out of budget)."""
    return f"**Reference @{ref}: {one_line(name)}** (listed without its files: select it to see them)"


def omitted_line(refs: list[str], *, count_only: bool) -> str:
    """Names the references the startup text had no room for."""
    if count_only:
        return f"Left out for the token budget: {len(refs)} more references (listReferences names them)."
    return "Left out for the token budget: " + ", ".join(f"@{ref}" for ref in refs) + "."


def reading_block(reference: ReferenceText, path: str) -> str:
    """Context for a root-level markdown of a preselected reference being read."""
    lines = [f"---\n**Reading reference @{reference.source_id}: {one_line(reference.name)}** ({path})"]
    contents = contents_lines(reference)
    if contents:
        lines.append("This reference also has:")
        lines += contents
    return "\n".join(lines) + "\n---"


def _mac(key: bytes, separator: str, body: str) -> str:
    message = f"lectern injection {len(separator)} {len(body)}\n{separator}{body}"
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()[:32]


def append_blocks(text: str, blocks: list[str], *, key: bytes) -> str:
    """`text` as it is, then the blocks (a blank line apart from it) and their marker,
    signed with `key`. The text's own ending is kept, so stripping gives it back whole."""
    body = "\n\n".join(block for block in blocks if block)
    if not body:
        return text
    separator = "" if not text or text.endswith("\n\n") else "\n" if text.endswith("\n") else "\n\n"
    marker = f"<!-- lectern {len(separator)} {len(body)} {_mac(key, separator, body)} -->"
    return f"{text}{separator}{body}\n{marker}"


def strip_injections(text: str, *, keys: Sequence[bytes]) -> str:
    """The text without the injections `append_blocks` made under any of `keys` (the
    current key, then earlier ones), and with everything else exactly as it was."""
    kept, cursor = [], 0
    for match in _MARKER.finditer(text):
        body_start = match.start() - int(match[2])
        start = body_start - int(match[1])
        if start < cursor:  # runs into an injection already removed, or past the start
            continue
        separator, body = text[start:body_start], text[body_start:match.start()]
        if separator.strip("\n") or not any(hmac.compare_digest(_mac(key, separator, body), match[3])
                                            for key in keys):
            continue
        kept.append(text[cursor:start])
        cursor = match.end()
    kept.append(text[cursor:])
    return "".join(kept)
