"""The chunker cuts text into exact, overlapping, size-bounded slices that start at a
sentence or block boundary wherever one exists, none lying inside its neighbours (pure,
no DB)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.embedder import get_embedder
from catalog.indexing.chunker import Chunk, boundaries, chunk_text, fit_to_model

DEMO = Path(__file__).resolve().parents[2] / "catalog" / "demo"

# Letters of 1 to 4 UTF-8 bytes, so byte offsets and character offsets differ.
LETTERS = "abcxyzéöß日本語😀"
WORDS = st.text(alphabet=LETTERS, min_size=1, max_size=8)
# Arbitrary text: words, sentence ends, closing quotes, several kinds of whitespace;
# and text padded with runs of blanks (tables, aligned columns), where raw windows
# start inside whitespace.
ARBITRARY = st.text(alphabet=LETTERS + " \n\t.!?\"')。！？｡．」", max_size=600)
PADDED = st.lists(st.tuples(st.text(alphabet=LETTERS, min_size=1, max_size=6), st.text(" \t", min_size=1, max_size=16)),
                  max_size=40).map(lambda parts: "".join(word + blank for word, blank in parts))
TEXTS = st.one_of(ARBITRARY, PADDED)


def sentence(words: list[str], end: str) -> str:
    return " ".join(words) + end


SENTENCES = st.builds(sentence, st.lists(WORDS, min_size=1, max_size=6), st.sampled_from(".!?"))


@st.composite
def size_and_overlap(draw):
    size = draw(st.one_of(st.integers(min_value=1, max_value=12), st.integers(min_value=1, max_value=300)))
    return size, draw(st.integers(min_value=0, max_value=size - 1))


def word_count(texts: list[str]) -> list[int]:
    return [len(t.split()) for t in texts]


def assert_exact_slices(text: str, chunks: list[Chunk]) -> None:
    data = text.encode("utf-8")
    for ordinal, c in enumerate(chunks):
        assert c.ordinal == ordinal
        assert c.content == text[c.start : c.end]
        assert data[c.byte_offset : c.byte_offset + len(c.content.encode())].decode("utf-8") == c.content
        assert c.byte_offset == len(text[: c.start].encode("utf-8"))
        assert c.content and c.content == c.content.strip()


def assert_covers(text: str, chunks: list[Chunk]) -> None:
    covered: set[int] = set()
    for c in chunks:
        covered.update(range(c.start, c.end))
    lost = [i for i, ch in enumerate(text) if not ch.isspace() and i not in covered]
    assert lost == [], f"characters lost: {[text[i] for i in lost]}"


def assert_none_redundant(text: str, chunks: list[Chunk]) -> None:
    """No chunk inside another, and none whose every non-space character its two
    neighbours together already hold: such a chunk adds only a duplicate hit."""
    for a in chunks:
        for b in chunks:
            assert a is b or not (a.start <= b.start and b.end <= a.end), f"{b} lies inside {a}"
    for before, chunk, after in zip(chunks, chunks[1:], chunks[2:], strict=False):
        held = set(range(before.start, before.end)) | set(range(after.start, after.end))
        own = [i for i in range(chunk.start, chunk.end) if not text[i].isspace() and i not in held]
        assert own, f"chunk at {chunk.start} lies wholly inside its neighbours"


def assert_starts_at_boundaries(chunks: list[Chunk], starts: set[int]) -> None:
    """Every chunk starts at one of `starts` unless none lies in its window: after the
    previous chunk's start and before its own end (a raw piece of a segment longer
    than the chunk size, which has none inside it)."""
    for before, chunk in zip([None, *chunks], chunks, strict=False):
        if chunk.start in starts:
            continue
        lowest = before.start if before else -1
        inside = sorted(b for b in starts if lowest < b < chunk.end)
        assert inside == [], f"chunk at {chunk.start} could have started at {inside}"


# --- chunk_text ---------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(text=TEXTS, bounds=size_and_overlap())
def test_every_chunk_is_an_exact_slice_of_the_text_in_chars_and_utf8_bytes(text, bounds):
    size, overlap = bounds

    chunks = chunk_text(text, size=size, overlap=overlap)

    assert_exact_slices(text, chunks)


@settings(max_examples=300, deadline=None)
@given(text=TEXTS, bounds=size_and_overlap())
def test_chunks_respect_size_and_overlap_and_lose_no_text(text, bounds):
    size, overlap = bounds

    chunks = chunk_text(text, size=size, overlap=overlap)

    assert all(len(c.content) <= size for c in chunks)
    for prev, nxt in zip(chunks, chunks[1:], strict=False):
        assert nxt.start > prev.start, "each chunk must move forward"
        assert prev.end - nxt.start <= overlap
    assert_covers(text, chunks)
    assert_none_redundant(text, chunks)
    assert_starts_at_boundaries(chunks, set(boundaries(text)))


class Markdown:
    """Text built piece by piece, remembering where each sentence and block starts."""

    def __init__(self) -> None:
        self.text, self.starts = "", {0}

    def __repr__(self) -> str:
        return f"Markdown({self.text!r}, {sorted(self.starts)})"

    def add(self, piece: str, *, starts: bool = False) -> None:
        if starts:
            self.starts.add(len(self.text))
        self.text += piece


@st.composite
def sentences_into(draw, doc: Markdown, *, wrap: str) -> None:
    """Sentences of words, wrapped at random single line breaks (`wrap`), one space or
    one line break apart: a wrap is no boundary, a sentence start is."""
    for k in range(draw(st.integers(1, 4))):
        if k:
            doc.add(draw(st.sampled_from([" ", wrap])))
        words = draw(st.lists(WORDS, min_size=1, max_size=14))
        for w, word in enumerate(words):
            doc.add(word, starts=k > 0 and w == 0)
            if w + 1 < len(words):
                doc.add(draw(st.sampled_from([" ", " ", " ", wrap])))
        doc.add(draw(st.sampled_from(".!?")))


@st.composite
def markdown_texts(draw) -> Markdown:
    """Paragraphs, headings (a paragraph may follow on the next line), list items and
    table rows, blank lines apart."""
    doc = Markdown()
    for b in range(draw(st.integers(1, 8))):
        if b:
            doc.add(draw(st.sampled_from(["\n\n", "\n\n\n", "\n \n"])))
        kind = draw(st.sampled_from(["paragraph", "paragraph", "heading", "list", "table"]))
        if kind == "paragraph":
            doc.add("", starts=True)
            draw(sentences_into(doc, wrap="\n"))
        elif kind == "heading":
            doc.add("#" * draw(st.integers(1, 3)) + " " + " ".join(draw(st.lists(WORDS, min_size=1, max_size=5))),
                    starts=True)
            if draw(st.booleans()):
                doc.add("\n")
                doc.add("", starts=True)
                draw(sentences_into(doc, wrap="\n"))
        elif kind == "list":
            for i in range(draw(st.integers(1, 4))):
                doc.add("\n" if i else "")
                doc.add(draw(st.sampled_from(["- ", "* ", "1. "])), starts=True)
                draw(sentences_into(doc, wrap="\n  "))
        else:
            for i in range(draw(st.integers(1, 4))):
                doc.add("\n" if i else "")
                doc.add("| " + " | ".join(draw(st.lists(WORDS, min_size=1, max_size=4))) + " |", starts=True)
    doc.add(draw(st.sampled_from(["", "\n"])))
    return doc


@settings(max_examples=400, deadline=None)
@given(doc=markdown_texts(), bounds=st.integers(20, 400).flatmap(
    lambda size: st.tuples(st.just(size), st.integers(0, size - 1))))
def test_markdown_chunks_start_at_sentences_and_blocks_and_none_lies_inside_its_neighbours(doc, bounds):
    # given: markdown-ish text whose sentence and block starts are known
    size, overlap = bounds

    chunks = chunk_text(doc.text, size=size, overlap=overlap)

    # then: the chunker finds exactly those boundaries (a wrap is none), every chunk
    # starts at one wherever one lies in its window, and every chunk adds something
    assert boundaries(doc.text) == sorted(doc.starts), repr(doc.text)
    assert_exact_slices(doc.text, chunks)
    assert_covers(doc.text, chunks)
    assert all(len(c.content) <= size for c in chunks)
    assert all(prev.end - nxt.start <= overlap for prev, nxt in zip(chunks, chunks[1:], strict=False))
    assert_none_redundant(doc.text, chunks)
    assert_starts_at_boundaries(chunks, doc.starts)


def test_text_of_only_whitespace_yields_no_chunks():
    assert chunk_text("", size=10, overlap=0) == []
    assert chunk_text(" \n\t \n", size=10, overlap=2) == []


def test_multibyte_text_has_byte_offsets_past_its_character_offsets():
    # given: three-byte and four-byte characters before the later chunks
    text = "日本語の文。😀 絵文字です! Plain ascii closes it."

    chunks = chunk_text(text, size=12, overlap=0)

    assert len(chunks) > 1
    assert_exact_slices(text, chunks)
    assert chunks[-1].byte_offset > chunks[-1].start


@settings(max_examples=200, deadline=None)
@given(sentences=st.lists(SENTENCES, min_size=1, max_size=25), data=st.data())
def test_chunks_end_at_sentence_ends_when_every_sentence_fits(sentences, data):
    # given: sentences joined by one space, the longest within the chunk size
    text = " ".join(sentences)
    starts, pos = [], 0
    for s in sentences:
        starts.append(pos)
        pos += len(s) + 1
    size = data.draw(st.integers(min_value=max(map(len, sentences)), max_value=400))
    overlap = data.draw(st.integers(min_value=0, max_value=size - 1))

    chunks = chunk_text(text, size=size, overlap=overlap)

    # then: every chunk is whole sentences, packed until the next would not fit
    for i, c in enumerate(chunks):
        assert c.start in starts
        assert c.content[-1] in ".!?"
        assert c.end == len(text) or text[c.end] == " "
        if i + 1 < len(chunks):
            following = starts.index(c.end + 1)
            next_end = min(starts[following] + len(sentences[following]) + 1, len(text))
            assert next_end - c.start > size, "a chunk stopped short although the next sentence fit"
    assert_covers(text, chunks)


def test_closing_quotes_and_brackets_stay_with_their_sentence():
    text = 'He said "stop." (Then he left.) Next one starts here.'

    chunks = chunk_text(text, size=21, overlap=0)

    assert [c.content for c in chunks] == ['He said "stop."', "(Then he left.)", "Next one starts here."]


def test_cjk_sentence_ends_are_boundaries_without_a_space_after_them():
    # given: Japanese sentences, each ending in 。！ or ？ with no space before the next
    text = "今日は晴れです。明日は雨が降るでしょう！本当ですか？はい。"

    chunks = chunk_text(text, size=12, overlap=0)

    # then: chunks end at sentence ends (before, 12-character windows cut mid-sentence)
    assert [c.content for c in chunks] == ["今日は晴れです。", "明日は雨が降るでしょう！", "本当ですか？はい。"]
    assert [c.byte_offset for c in chunks] == [0, 8 * 3, 20 * 3]  # three UTF-8 bytes per character
    assert_exact_slices(text, chunks)


@pytest.mark.parametrize(("text", "expected"), [
    ("中文句子结束了。下一个句子开始？", ["中文句子结束了。", "下一个句子开始？"]),
    ("「止まれ。」次の文です。", ["「止まれ。」", "次の文です。"]),  # the closing bracket stays with its sentence
    ("半角句点｡全角ピリオド．最後！？", ["半角句点｡", "全角ピリオド．", "最後！？"]),  # a run of ends is one end
    ("日本語の文。 Then English. 😀 また日本語。", ["日本語の文。", "Then English.", "😀 また日本語。"]),
])
def test_each_cjk_sentence_end_and_its_closers_end_a_chunk(text, expected):
    chunks = chunk_text(text, size=max(map(len, expected)) + 2, overlap=0)  # no two sentences fit

    assert [c.content for c in chunks] == expected
    assert_exact_slices(text, chunks)


def test_a_line_break_inside_a_paragraph_is_no_boundary_but_a_blank_line_is():
    # given: a sentence wrapped over two lines, then a paragraph without a stop
    text = "A sentence wrapped\nover two lines (see\n@caching), ends here.\n\nlast paragraph without a stop"

    chunks = chunk_text(text, size=45, overlap=20)

    # then: the wrapped sentence is cut raw (no boundary inside it), never started at a wrap
    # as if one were; the paragraph after the blank line starts a chunk
    assert [c.content for c in chunks][-1] == "last paragraph without a stop"
    assert not any(c.content.startswith("@caching") for c in chunks)
    assert boundaries(text) == [0, text.index("last")]


def test_the_lines_of_a_text_without_stops_are_where_raw_pieces_end():
    text = "first line without a stop\nsecond line without one\nthird line"

    chunks = chunk_text(text, size=30, overlap=0)

    assert [c.content for c in chunks] == ["first line without a stop", "second line without one", "third line"]


def test_a_sentence_that_fits_is_not_cut_because_of_blank_lines_after_it():
    # given: a 94-character sentence, then blank lines that would push it past 96
    sentence = "word " * 18 + "end."
    text = sentence + "\n" * 7 + "Next paragraph."

    chunks = chunk_text(text, size=96, overlap=10)

    assert [c.content for c in chunks] == [sentence, "Next paragraph."]


def test_overlap_rewinds_to_a_sentence_start_within_the_overlap():
    # given: sentences of 9 characters plus a space, three to a chunk
    text = "Aaaa bbb. Cccc ddd. Eeee fff. Gggg hhh. Iiii jjj. Kkkk lll. Mmmm nnn."

    chunks = chunk_text(text, size=29, overlap=10)

    # then: each next chunk repeats the previous chunk's last sentence
    assert [c.content for c in chunks] == ["Aaaa bbb. Cccc ddd. Eeee fff.", "Eeee fff. Gggg hhh. Iiii jjj.",
                                           "Iiii jjj. Kkkk lll. Mmmm nnn."]


def test_overlap_never_leaves_a_chunk_inside_its_neighbours():
    # given: two sentences to a chunk and an overlap of one: the middle chunk of
    # "A C", "C E", "E G" would hold nothing its neighbours do not
    text = "Aaaa bbb. Cccc ddd. Eeee fff. Gggg hhh."

    chunks = chunk_text(text, size=20, overlap=10)

    assert [c.content for c in chunks] == ["Aaaa bbb. Cccc ddd.", "Cccc ddd. Eeee fff.", "Gggg hhh."]
    assert_none_redundant(text, chunks)


@settings(max_examples=200, deadline=None)
@given(words=st.lists(WORDS, min_size=2, max_size=80), data=st.data())
def test_raw_fallback_cuts_a_long_sentence_at_whitespace(words, data):
    # given: one "sentence" without punctuation or line break, longer than size
    text = " ".join(words)
    size = data.draw(st.integers(min_value=2 * max(map(len, words)) + 2, max_value=120))
    overlap = data.draw(st.integers(min_value=0, max_value=size - 1))
    if len(text) <= size:
        text = " ".join(words * (size // len(text) + 2))

    chunks = chunk_text(text, size=size, overlap=overlap)

    assert len(chunks) > 1
    assert all(len(c.content) <= size for c in chunks)
    assert all(c.end == len(text) or text[c.end] == " " for c in chunks), "a chunk ended mid-word"
    assert_exact_slices(text, chunks)
    assert_covers(text, chunks)


@pytest.mark.parametrize(("text", "size", "overlap", "expected"), [
    (" ba", 2, 1, [(1, "ba")]),
    ("id name        x  status value", 20, 10, [(0, "id name        x"), (15, "x  status value")]),  # padded row
])
def test_a_window_starting_in_whitespace_does_not_repeat_the_previous_chunks_start(text, size, overlap, expected):
    # A raw window that begins in whitespace strips back to where the previous chunk
    # began: two chunks with one byte offset would share a chunk key. The longer stays.
    chunks = chunk_text(text, size=size, overlap=overlap)

    assert [(c.start, c.content) for c in chunks] == expected
    assert_exact_slices(text, chunks)


def test_raw_fallback_without_any_whitespace_uses_fixed_windows():
    text = "é" * 25

    chunks = chunk_text(text, size=10, overlap=3)

    assert [(c.start, c.end) for c in chunks] == [(0, 10), (7, 17), (14, 24), (21, 25)]
    assert [c.byte_offset for c in chunks] == [0, 14, 28, 42]


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (-5, 0), (10, -1), (10, 10), (10, 11)])
def test_invalid_size_or_overlap_raises_value_error(size, overlap):
    with pytest.raises(ValueError, match="size"):
        chunk_text("Some text.", size=size, overlap=overlap)


# --- fit_to_model -------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(sentences=st.lists(SENTENCES, min_size=1, max_size=20), max_tokens=st.integers(1, 12),
       overlap=st.integers(0, 40))
def test_fit_to_model_resplits_chunks_over_the_token_limit_with_exact_offsets(sentences, max_tokens, overlap):
    # given: chunks far larger than the (fake, word-count) model limit
    text = "\n".join(sentences)
    chunks = chunk_text(text, size=300, overlap=overlap)

    fitted = fit_to_model(text, chunks, count_tokens=word_count, max_tokens=max_tokens, overlap=overlap)

    pieces = [c for c, _ in fitted]
    assert all(n <= max_tokens for _, n in fitted)
    starts = [c.start for c in pieces]
    assert starts == sorted(set(starts)), "chunk keys hold the byte offset: no two pieces may share a start"
    assert [n for _, n in fitted] == word_count([c.content for c in pieces])
    assert_exact_slices(text, pieces)
    assert_covers(text, pieces)
    assert_none_redundant(text, pieces)


def test_fit_to_model_keeps_chunks_within_the_limit_untouched():
    text = "One two three. Four five six. Seven eight nine."
    chunks = chunk_text(text, size=17, overlap=0)

    fitted = fit_to_model(text, chunks, count_tokens=word_count, max_tokens=3, overlap=0)

    assert fitted == [(c, 3) for c in chunks]


def test_fit_to_model_splits_one_oversized_chunk_and_renumbers():
    # given: the middle chunk holds 12 words, over a limit of 4
    text = "Short one.\n" + " ".join(f"w{i}" for i in range(12)) + ".\nShort two."
    chunks = chunk_text(text, size=40, overlap=0)
    assert [len(c.content.split()) for c in chunks] == [2, 12, 2]

    fitted = fit_to_model(text, chunks, count_tokens=word_count, max_tokens=4, overlap=0)

    assert fitted[0] == (chunks[0], 2)
    assert fitted[-1][0].content == "Short two."
    assert [c.ordinal for c, _ in fitted] == list(range(len(fitted)))
    assert len(fitted) >= 5
    assert all(n <= 4 for _, n in fitted)
    assert_exact_slices(text, [c for c, _ in fitted])
    assert_covers(text, [c for c, _ in fitted])


# --- the demo's documents -------------------------------------------------------------------


def starts_a_sentence_or_block(text: str, pos: int) -> bool:
    """Read as a person would: the text's start, after a blank line, a sentence end or a
    heading line, or the first character of a list item, table row, quote or fence."""
    before, line = text[:pos], text[text.rfind("\n", 0, pos) + 1:pos]
    return (not before.strip() or bool(re.search(r"\n[ \t]*\n\s*$", before))
            or bool(re.search(r"[.!?][\"')\]*_`]*\s+$", before))
            or bool(re.search(r"(^|\n)#{1,6} [^\n]*\n\s*$", before))
            or (not line.strip() and bool(re.match(r"#{1,6} |[-*+] |\d+[.)] |[|>]|```", text[pos:]))))


def test_the_circuit_breaker_demo_is_cut_at_sentences_and_blocks_not_at_a_wrapped_line():
    # given: the demo document whose chunk at byte 925 began "@caching), a default..."
    text = (DEMO / "circuit-breaker.md").read_text(encoding="utf-8")

    chunks = chunk_text(text, size=1000, overlap=100)

    assert not any(c.content.startswith("@caching") for c in chunks)
    assert all(starts_a_sentence_or_block(text, c.start) for c in chunks), [
        c.content[:40] for c in chunks if not starts_a_sentence_or_block(text, c.start)]
    assert_exact_slices(text, chunks)
    assert_covers(text, chunks)
    assert_none_redundant(text, chunks)


@pytest.mark.parametrize("name", sorted(p.name for p in DEMO.glob("*.md")))
def test_no_demo_chunk_fitted_to_the_model_lies_inside_its_neighbours(name):
    # given: each demo document cut as the demo catalog indexes it (1000/100, then
    # re-split to the model's 256 tokens: retry-backoff.md had an 88-byte chunk inside
    # its neighbours)
    embedder = get_embedder()
    assert embedder is not None
    text = (DEMO / name).read_text(encoding="utf-8")

    fitted = fit_to_model(text, chunk_text(text, size=1000, overlap=100), count_tokens=embedder.count_tokens,
                          max_tokens=embedder.max_tokens, overlap=100)

    pieces = [c for c, _ in fitted]
    assert all(n <= embedder.max_tokens for _, n in fitted)
    assert_exact_slices(text, pieces)
    assert_covers(text, pieces)
    assert_none_redundant(text, pieces)
    assert_starts_at_boundaries(pieces, {p for p in range(len(text)) if starts_a_sentence_or_block(text, p)})
