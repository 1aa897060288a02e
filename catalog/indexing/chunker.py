"""Sentence-aware chunking with byte offsets (seed 003), pure Python.

Text is cut into segments at sentence ends (Latin and CJK) and line breaks; whole segments are packed
into chunks of at most `size` characters, and each next chunk rewinds by up to `overlap`
characters to a segment boundary. A segment longer than `size` is split raw, preferring
whitespace. Every chunk is an exact slice of the input, so `byte_offset` locates it in
the UTF-8 bytes of the file. `fit_to_model` then re-splits any chunk whose token count
exceeds what the embedding model reads whole: no text is ever silently truncated.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# A sentence ends at . ! ? followed by closing quotes or brackets and whitespace; or at
# a CJK end (。！？, halfwidth ｡, fullwidth ．), where no space follows, after the last
# of a run of them (！？) and its closing brackets (。」); or at line breaks.
_CJK_ENDS = "。！？｡．"
_CJK_CLOSERS = "」』）］｝〕〗〙】〉》”’\"')\\]"
_BOUNDARY = re.compile(rf"(?<=[.!?])[\"')\]]*\s+|(?<=[{_CJK_ENDS}])(?![{_CJK_ENDS}])[{_CJK_CLOSERS}]*\s*|\n+")


@dataclass(frozen=True)
class Chunk:
    ordinal: int
    start: int  # character offset in the text
    end: int
    byte_offset: int
    content: str


def _segments(text: str) -> list[tuple[int, int]]:
    """Spans that tile `text`: each sentence or line with its trailing whitespace."""
    spans, start = [], 0
    for match in _BOUNDARY.finditer(text):
        if match.end() > start:
            spans.append((start, match.end()))
            start = match.end()
    if start < len(text):
        spans.append((start, len(text)))
    return spans


def _raw_split(text: str, start: int, end: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """Character windows over [start, end), cut at whitespace in the window's last half."""
    windows = []
    while start < end:
        stop = min(start + size, end)
        if stop < end:
            cut = text.rfind(" ", start + size // 2, stop)
            stop = cut + 1 if cut > start else stop
        windows.append((start, stop))
        if stop >= end:
            break
        start = max(stop - overlap, start + 1)
    return windows


def _spans(text: str, size: int, overlap: int) -> list[tuple[int, int]]:
    segments, spans, i = _segments(text), [], 0
    # Chunks are stripped, so a segment's trailing whitespace counts toward no size.
    ends = [start + len(text[start:end].rstrip()) for start, end in segments]
    while i < len(segments):
        seg_start, seg_end = segments[i]
        if ends[i] - seg_start > size:
            spans.extend(_raw_split(text, seg_start, seg_end, size, overlap))
            i += 1
            continue
        j = i
        while j + 1 < len(segments) and ends[j + 1] - seg_start <= size:
            j += 1
        spans.append((seg_start, segments[j][1]))
        if j + 1 >= len(segments):
            break
        # Rewind: the next chunk starts at the earliest segment after i that lies
        # within `overlap` characters of this chunk's end, provided that chunk can
        # still reach past this one's end (else it would only repeat text).
        nxt, reach = j + 1, ends[j + 1]
        while (nxt - 1 > i and segments[j][1] - segments[nxt - 1][0] <= overlap
               and reach - segments[nxt - 1][0] <= size):
            nxt -= 1
        i = nxt
    return spans


def chunk_text(text: str, *, size: int, overlap: int) -> list[Chunk]:
    """Chunks of `text`, whitespace-trimmed, with character and byte offsets."""
    if size <= 0 or not 0 <= overlap < size:
        raise ValueError(f"need size > 0 and 0 <= overlap < size (got {size}/{overlap})")
    chunks: list[Chunk] = []
    byte_pos, char_pos = 0, 0
    for start, end in _spans(text, size, overlap):
        piece = text[start:end]
        stripped = piece.strip()
        if not stripped:
            continue
        start += len(piece) - len(piece.lstrip())
        end = start + len(stripped)
        byte_pos += len(text[char_pos:start].encode("utf-8"))
        char_pos = start
        if chunks and chunks[-1].start == start:
            # A window that began in whitespace stripped back to the previous chunk's
            # start (same byte offset, same chunk key): keep whichever reaches further.
            if end <= chunks[-1].end:
                continue
            chunks.pop()
        chunks.append(Chunk(len(chunks), start, end, byte_pos, stripped))
    return chunks


def fit_to_model(
    text: str,
    chunks: Sequence[Chunk],
    *,
    count_tokens: Callable[[list[str]], list[int]],
    max_tokens: int,
    overlap: int,
) -> list[tuple[Chunk, int]]:
    """(chunk, token count) pairs, every one within `max_tokens`.

    A chunk over the limit is re-chunked at a proportionally smaller size, recursively,
    so the model sees all of it; offsets stay relative to the whole text.
    """
    counts = count_tokens([c.content for c in chunks])
    fitted: list[tuple[Chunk, int]] = []
    for chunk, tokens in zip(chunks, counts, strict=True):
        if tokens <= max_tokens or len(chunk.content) < 2:
            fitted.append((chunk, tokens))
            continue
        size = max(1, len(chunk.content) * max_tokens // (tokens + 1) - 1)
        sub = chunk_text(chunk.content, size=size, overlap=min(overlap, size // 4))
        base = len(text[: chunk.start].encode("utf-8"))
        relocated = [
            Chunk(0, chunk.start + s.start, chunk.start + s.end, base + s.byte_offset, s.content) for s in sub
        ]
        fitted.extend(fit_to_model(text, relocated, count_tokens=count_tokens, max_tokens=max_tokens,
                                   overlap=overlap))
    kept = _drop_contained(fitted)
    return [(Chunk(i, c.start, c.end, c.byte_offset, c.content), n) for i, (c, n) in enumerate(kept)]


def _drop_contained(chunks: list[tuple[Chunk, int]]) -> list[tuple[Chunk, int]]:
    """Re-splitting one chunk can yield a piece lying wholly inside its overlapping
    neighbour (same start offset, hence the same chunk id): such pieces add nothing."""
    ordered = sorted(chunks, key=lambda pair: (pair[0].start, -pair[0].end))
    kept: list[tuple[Chunk, int]] = []
    for pair in ordered:
        if kept and pair[0].end <= kept[-1][0].end:
            continue
        kept.append(pair)
    return kept
