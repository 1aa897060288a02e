"""Sentence- and block-aware chunking with byte offsets, pure Python.

A chunk may start only at a boundary: after a sentence end (. ! ? and their closing
quotes, brackets or emphasis, then whitespace, a line break included; a CJK end needs
no space), after a blank line (a paragraph), at a line that opens a markdown block (a
heading, a list item, a table row, a quote, a code fence) and after a heading line. A
single line break inside a paragraph is no boundary: text wrapped at 80 columns reads
on, so no chunk begins mid-sentence at a wrap.

The text between two boundaries is a segment. Whole segments are packed into chunks of
at most `size` characters, and each next chunk rewinds by up to `overlap` characters to
a boundary, but never back to the end of the chunk before the previous one: overlap
never leaves a chunk lying wholly inside its neighbours. A segment longer than `size`
has no boundary inside it; it is split raw, preferring a line break, then a space. Every
chunk is an exact slice of the input, so `byte_offset` locates it in the UTF-8 bytes of
the file. `fit_to_model` then re-splits any chunk whose token count exceeds what the
embedding model reads whole: no text is ever silently truncated.

CHUNKER_VERSION names these rules: chunks record it (with the size, the overlap and the
model) so that an index cut by other rules is rebuilt (catalog.indexing.chunks).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import cycle, islice
from typing import TypeVar

# 1: every line break was a sentence end; 2: chunks carried no locator (the cut is
# unchanged: the version moved so that the next scan re-cuts every document and its
# chunks gain their lines, pages or heading path; vectors come from the embedding cache)
CHUNKER_VERSION = 3

# A sentence ends at . ! ? followed by closing quotes, brackets or markdown emphasis and
# whitespace; or at a CJK end (。！？, halfwidth ｡, fullwidth ．), where no space follows,
# after the last of a run of them (！？) and its closing brackets (。」).
_CJK_ENDS = "。！？｡．"
_CJK_CLOSERS = "」』）］｝〕〗〙】〉》”’\"')\\]"
_CLOSERS = "\"')\\]*_`’”"
_SENTENCE_END = re.compile(rf"(?<=[.!?])[{_CLOSERS}]*\s+|(?<=[{_CJK_ENDS}])(?![{_CJK_ENDS}])[{_CJK_CLOSERS}]*\s*")
_LIST_NUMBER = re.compile(r"^[ \t]*\d{1,9}[.)](?=[ \t])", re.MULTILINE)  # "1. ": no sentence ends there
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_HEADING_LINE = re.compile(r"^[ \t]{0,3}#{1,6}[ \t][^\n]*\n", re.MULTILINE)
# A line opening a block: heading, list item (- * + or 1. 1)), table row, quote.
_BLOCK_START = re.compile(r"^(?=[ \t]*(?:#{1,6}[ \t]|[-*+][ \t]|\d{1,9}[.)][ \t]|[|>]))", re.MULTILINE)
# Code fences open (a boundary before the line) and close (a boundary after it) in turn.
_FENCE = re.compile(r"^[ \t]*(?:```|~~~)[^\n]*\n?", re.MULTILINE)
_NOT_SPACE = re.compile(r"\S")


@dataclass(frozen=True)
class Chunk:
    ordinal: int
    start: int  # character offset in the text
    end: int
    byte_offset: int
    content: str


def boundaries(text: str) -> list[int]:
    """Where a chunk may start, ascending: 0 and the first non-space character after
    each sentence end, blank line, heading line or closing code fence, or of each line
    opening a block or a code fence."""
    found = {0}
    found.update(m.end() if odd else m.start() for m, odd in zip(_FENCE.finditer(text), cycle((False, True))))
    numbers = {m.end() for m in _LIST_NUMBER.finditer(text)}
    found.update(m.end() for m in _SENTENCE_END.finditer(text) if m.start() not in numbers)
    found.update(m.end() for m in _BLANK_LINE.finditer(text))
    found.update(m.end() for m in _HEADING_LINE.finditer(text))
    found.update(m.start() for m in _BLOCK_START.finditer(text))
    starts = set()
    for position in found:
        first = _NOT_SPACE.search(text, position)
        if first is not None:
            starts.add(first.start())
    return sorted(starts | {0})


def _segments(text: str) -> list[tuple[int, int]]:
    """Spans that tile `text`, from each boundary to the next."""
    cuts = [b for b in boundaries(text) if b > 0] + [len(text)]
    spans, start = [], 0
    for cut in cuts:
        if cut > start:
            spans.append((start, cut))
            start = cut
    return spans


def _raw_cut(text: str, start: int, stop: int, size: int) -> int:
    """Where a raw window from `start` ends: after the last line break in its last half,
    else after the last space there, else at `stop`."""
    for blank in ("\n", " "):
        cut = text.rfind(blank, start + size // 2, stop)
        if cut > start:
            return cut + 1
    return stop


def _raw_split(text: str, start: int, end: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """Character windows over [start, end), a segment with no boundary inside it, each
    next one rewound by `overlap`. A window inside its neighbours (a long overlap) is
    dropped by chunk_text."""
    windows = []
    while start < end:
        stop = min(start + size, end)
        if stop < end:
            stop = _raw_cut(text, start, stop, size)
        windows.append((start, stop))
        if stop >= end:
            break
        start = max(stop - overlap, start + 1)
    return windows


def _rewind(segments: list[tuple[int, int]], ends: list[int], first: int, last: int, *, size: int,
            overlap: int, floor: int) -> int:
    """The segment the chunk after segments[first..last] starts at: the earliest after
    `first` within `overlap` characters of the chunk's end, provided that the chunk it
    starts can still reach past this one's end (else it would only repeat text) and that
    it starts after `floor`, the end of the chunk before this one."""
    following, reach = last + 1, ends[last + 1]
    while (following - 1 > first and segments[last][1] - segments[following - 1][0] <= overlap
           and reach - segments[following - 1][0] <= size and segments[following - 1][0] > floor):
        following -= 1
    return following


def _spans(text: str, size: int, overlap: int) -> list[tuple[int, int]]:
    """Chunk spans of `text`; none crosses a form feed (a page or slide break, as
    catalog.sources.extraction writes them), so a chunk cites the pages it is on."""
    if "\f" not in text:
        return _page_spans(text, size, overlap)
    spans, start = [], 0
    for page in text.split("\f"):
        spans += [(start + s, start + e) for s, e in _page_spans(page, size, overlap)]
        start += len(page) + 1
    return spans


def _page_spans(text: str, size: int, overlap: int) -> list[tuple[int, int]]:
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
        i = _rewind(segments, ends, i, j, size=size, overlap=overlap,
                    floor=spans[-2][1] if len(spans) > 1 else -1)
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
        chunks.append(Chunk(0, start, end, byte_pos, stripped))
    return [_numbered(c, i) for i, c in enumerate(_drop_redundant(text, chunks, lambda c: c))]


def _numbered(chunk: Chunk, ordinal: int) -> Chunk:
    return Chunk(ordinal, chunk.start, chunk.end, chunk.byte_offset, chunk.content)


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
    kept = _drop_redundant(text, fitted, lambda pair: pair[0])
    return [(_numbered(c, i), n) for i, (c, n) in enumerate(kept)]


Item = TypeVar("Item")


def _drop_redundant(text: str, items: list[Item], chunk_of: Callable[[Item], Chunk]) -> list[Item]:
    """`items` by start, without those whose chunk adds nothing: one inside the chunk
    before it (a window that began in whitespace strips back to the previous chunk's
    start, or re-splitting one chunk yields a piece inside its overlapping neighbour),
    or one whose every non-space character the kept chunk before it and the next chunk
    reaching further already hold. Dropping one keeps every character covered."""
    ordered = sorted(items, key=lambda item: (chunk_of(item).start, -chunk_of(item).end))
    kept: list[Item] = []
    for index, item in enumerate(ordered):
        chunk = chunk_of(item)
        before = chunk_of(kept[-1]) if kept else None
        if before is not None and chunk.end <= before.end:
            continue
        after = next((chunk_of(o) for o in islice(ordered, index + 1, None) if chunk_of(o).end > chunk.end), None)
        if before is not None and after is not None and _covered(text, chunk, before, after):
            continue
        kept.append(item)
    return kept


def _covered(text: str, chunk: Chunk, before: Chunk, after: Chunk) -> bool:
    """Whether `before` and `after` hold every non-space character of `chunk`."""
    gap = text[max(before.end, chunk.start):min(after.start, chunk.end)]
    return not gap.strip()
