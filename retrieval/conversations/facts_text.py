"""The `[facts: key=value, ...]` line, pure: each key and value escaped, so that
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

# What every injected block escapes: the escape itself, what opens or closes a block, and
# line breaks; each block adds its own separators.
BLOCK_ESCAPES = {"\\": "\\\\", "[": "\\[", "]": "\\]", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_FACT_ESCAPES = {**BLOCK_ESCAPES, ",": "\\,", "=": "\\="}


def escaped(text: str, escapes: dict[str, str]) -> str:
    """`text` with each character of `escapes` replaced, and any other character that is
    not printable written `\\u{hex}`."""
    return "".join(escapes.get(char) or (char if char.isprintable() else f"\\u{{{ord(char):x}}}") for char in text)


def fact_escaped(text: str) -> str:
    """A key or value as the facts line writes it."""
    return escaped(text, _FACT_ESCAPES)


def facts_text(facts: Iterable[tuple[str, str]]) -> str:
    """`[facts: key=value, ...]` of (key, value) pairs, in their order ('' for none)."""
    pairs = [f"{fact_escaped(key)}={fact_escaped(value)}" for key, value in facts]
    return "[facts: " + ", ".join(pairs) + "]" if pairs else ""
