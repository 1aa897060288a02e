"""The text Lectern injects: hint blocks (seed 000's format), reference expansions,
reading context, startup instructions. Pure; every block can be found and stripped
again, so enriching an already enriched text does not stack injections."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

HINT_HEADER = "**Reference sources available** — use `selectReferences` with IDs or tags to select:"
_BLOCK = re.compile(
    r"\n*^---\n\*\*(?:Reference sources available\*\*|Reference @|Reading reference @)[^\n]*\n"
    r"(?:(?!---$).*\n)*?---$\n?",
    re.MULTILINE,
)

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


def expansion_block(reference: ReferenceText) -> str:
    lines = [f"---\n**Reference @{reference.source_id}: {one_line(reference.name)}** "
             "(selected; its files are authorised for reading)"]
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


def reading_block(reference: ReferenceText, path: str) -> str:
    """Context for a root-level markdown of a preselected reference being read."""
    lines = [f"---\n**Reading reference @{reference.source_id}: {one_line(reference.name)}** ({path})"]
    contents = contents_lines(reference)
    if contents:
        lines.append("This reference also has:")
        lines += contents
    return "\n".join(lines) + "\n---"


def strip_injections(text: str) -> str:
    """The text without any block this module produced (earlier enrichments)."""
    stripped = _BLOCK.sub("", text)
    return stripped.rstrip("\n") if stripped != text else text


def append_blocks(text: str, blocks: list[str]) -> str:
    blocks = [block for block in blocks if block]
    if not blocks:
        return text
    return text.rstrip("\n") + "\n\n" + "\n\n".join(blocks) + "\n"
