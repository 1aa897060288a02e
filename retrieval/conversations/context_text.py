"""The `[context: a | b | c]` line, pure: each memory and passage escaped, so that
whatever an end user had remembered or a catalog holds, the line reads back as exactly
its items and stays one closed block on one line.

The facts line's rule (retrieval.conversations.facts_text: `\\`, `[`, `]`, line breaks,
`\\u{hex}` for what is not printable), with the context line's own separators: `\\|`
(items are `a | b`) and `\\@` where a memory's text begins with `@` (a passage is
`@ref: text`, so a memory reading `@policies: ...` would pass for a catalog's passage).
Nothing else is escaped: `,`, `=` and `:` mean nothing here, and the text stays as the
model would read it anyway (docs/api.md, "Conversations, facts and memory").
"""

from __future__ import annotations

from collections.abc import Iterable

from retrieval.conversations.facts_text import BLOCK_ESCAPES, escaped

CONTEXT_ITEM_CHARS = 600  # of one memory or passage: a longer one is cut, ending in "…"
_CONTEXT_ESCAPES = {**BLOCK_ESCAPES, "|": "\\|"}


def context_item(text: str, *, ref: str = "") -> str:
    """A passage (`@ref: text`) or a memory (no `ref`: its text alone) as the context
    line writes it."""
    if len(text) > CONTEXT_ITEM_CHARS:
        text = text[: CONTEXT_ITEM_CHARS - 1] + "…"
    written = escaped(text, _CONTEXT_ESCAPES)
    if ref:
        return f"@{escaped(ref, _CONTEXT_ESCAPES)}: {written}"
    return "\\" + written if written.startswith("@") else written


def context_text(items: Iterable[tuple[str, str]]) -> str:
    """`[context: a | b]` of (ref, text) pairs, a memory's ref '', in their order ('' for
    none)."""
    written = [context_item(text, ref=ref) for ref, text in items]
    return "[context: " + " | ".join(written) + "]" if written else ""
