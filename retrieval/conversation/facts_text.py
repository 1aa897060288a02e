"""Seed 001's `[facts: key=value, ...]` line, pure: each key and value escaped, so that
whatever an agent stored as a fact, the line reads back as exactly its facts and stays
one closed block on one line.

Escapes (docs/api.md, "Conversations, facts and memory"): `\\` `\\,` `\\=` `\\[` `\\]`
for the characters that separate facts, keys from values, and open or close a block;
`\\n` `\\r` `\\t`; `\\u{hex}` for any other character that is not printable (control and
format characters, line and paragraph separators, spaces other than U+0020). Escaped
rather than refused at write: `Smith, Jane` or a value of two lines is a fair fact, and
facts stored before the rule are injected safely too.
"""

from __future__ import annotations

from collections.abc import Iterable

_ESCAPES = {"\\": "\\\\", ",": "\\,", "=": "\\=", "[": "\\[", "]": "\\]", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def fact_escaped(text: str) -> str:
    """A key or value as the facts line writes it."""
    return "".join(_ESCAPES.get(char) or (char if char.isprintable() else f"\\u{{{ord(char):x}}}") for char in text)


def facts_text(facts: Iterable[tuple[str, str]]) -> str:
    """`[facts: key=value, ...]` of (key, value) pairs, in their order ('' for none)."""
    pairs = [f"{fact_escaped(key)}={fact_escaped(value)}" for key, value in facts]
    return "[facts: " + ", ".join(pairs) + "]" if pairs else ""
