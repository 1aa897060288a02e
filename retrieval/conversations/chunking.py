"""A conversation's markdown cut into query chunks, pure.

Whole paragraphs (text between blank lines) are packed into chunks of at most
`max_tokens` model tokens, what the embedding model reads whole, so that every word of
the conversation is read by some query. A heading stays with the paragraph after it
(a message's "## Message N / **Role:**" lines never end a chunk), and each chunk begins
with the last whole paragraphs of the one before that fit in `overlap_tokens`: a
message cut from its neighbour is still read beside it. A paragraph longer than the
model reads is cut as stored documents are (catalog.indexing.chunker: sentences and
lines packed to `size` characters, re-cut to `max_tokens`), each piece a chunk.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from catalog.indexing.chunker import chunk_text, fit_to_model

CountTokens = Callable[[list[str]], list[int]]  # model tokens per text, [CLS] and [SEP] included
SPECIAL_TOKENS = 2  # [CLS] and [SEP]: counted once per chunk, not once per paragraph
_BLANK_LINE = re.compile(r"\n[ \t]*\n")


@dataclass(frozen=True)
class Piece:
    text: str
    tokens: int  # without [CLS] and [SEP]


def paragraphs(markdown: str) -> list[str]:
    """The paragraphs of `markdown`, each stripped, a heading joined to the one after it."""
    parts = [part.strip() for part in _BLANK_LINE.split(markdown)]
    joined: list[str] = []
    for part in filter(None, parts):
        if joined and joined[-1].startswith("#") and "\n\n" not in joined[-1]:
            joined[-1] = f"{joined[-1]}\n\n{part}"
        else:
            joined.append(part)
    return joined


def conversation_chunks(markdown: str, *, count_tokens: CountTokens, max_tokens: int, overlap_tokens: int,
                        size: int, overlap: int) -> list[str]:
    """The query chunks of `markdown`, in order; see the module docstring. `size` and
    `overlap` (characters) cut an over-long paragraph as the catalog's chunker does."""
    units = paragraphs(markdown)
    pieces = [Piece(text, n - SPECIAL_TOKENS) for text, n in zip(units, count_tokens(units), strict=True)]
    budget = max_tokens - SPECIAL_TOKENS
    chunks: list[str] = []
    current: list[Piece] = []
    for piece in pieces:
        if piece.tokens > budget:
            chunks.extend(_joined(current))
            chunks.extend(_cut(piece.text, count_tokens=count_tokens, max_tokens=max_tokens, size=size,
                               overlap=overlap))
            current = []
            continue
        if current and _tokens(current) + piece.tokens > budget:
            chunks.extend(_joined(current))
            current = _tail(current, overlap_tokens, room=budget - piece.tokens)
        current.append(piece)
    chunks.extend(_joined(current))
    return chunks


def _tokens(pieces: list[Piece]) -> int:
    return sum(piece.tokens for piece in pieces)


def _joined(pieces: list[Piece]) -> list[str]:
    return ["\n\n".join(piece.text for piece in pieces)] if pieces else []


def _tail(pieces: list[Piece], overlap_tokens: int, *, room: int) -> list[Piece]:
    """The last whole pieces of a full chunk that the next one repeats: at most
    `overlap_tokens` and `room`, never the whole chunk."""
    tail: list[Piece] = []
    for piece in reversed(pieces[1:]):
        if _tokens(tail) + piece.tokens > min(overlap_tokens, room):
            break
        tail.insert(0, piece)
    return tail


def _cut(text: str, *, count_tokens: CountTokens, max_tokens: int, size: int, overlap: int) -> list[str]:
    """A paragraph too long for one chunk, cut by the storage chunker."""
    pieces = chunk_text(text, size=size, overlap=overlap)
    return [chunk.content for chunk, _ in fit_to_model(text, pieces, count_tokens=count_tokens,
                                                        max_tokens=max_tokens, overlap=overlap)]
