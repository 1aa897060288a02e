"""Where a query's terms occur in a passage, for a person to see (pure: no Django).

A word of the passage is marked when it analyses to one of the query's terms, as BM25
matched them (catalog.analysis: the same tokens, stop words and Porter stems), so
"failures" is marked for the query "failure" and "the" never is. The result is the
passage cut into (text, marked) parts in order; a template escapes each part and wraps
the marked ones, so nothing of the passage is ever emitted as markup.
"""

from __future__ import annotations

from catalog.analysis import analyze, words_with_terms

Part = tuple[str, bool]


def query_terms(query: str) -> frozenset[str]:
    """The query's distinct terms, as BM25 reads them."""
    return frozenset(analyze(query))


def marked_parts(text: str, terms: frozenset[str]) -> list[Part]:
    """`text` as consecutive (part, marked) pairs whose parts join back to `text`."""
    parts: list[Part] = []
    plain_from = 0
    if terms:
        for start, end, term in words_with_terms(text):
            if term not in terms:
                continue
            if start > plain_from:
                parts.append((text[plain_from:start], False))
            parts.append((text[start:end], True))
            plain_from = end
    if plain_from < len(text):
        parts.append((text[plain_from:], False))
    return parts
