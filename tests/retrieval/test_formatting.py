"""Injected blocks (pure): what enrichment appends is signed, and stripping removes
exactly that, byte for byte; whatever else a text holds is the user's and is kept, even
when it looks like Lectern's blocks."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from retrieval.enrichment.formatting import append_blocks, strip_injections

KEY, OLD_KEY = b"k" * 32, b"o" * 32
HINTS = ("---\n**Reference sources available** — use `selectReferences` with IDs or tags to select:\n\n"
         "- @caching: Caching (matched: redis)\n---")
EXPANSION = "---\n**Reference @caching: Caching** (selected; its files are authorised for reading)\nFiles:\n- a.md\n---"
LOOKALIKE = "Notes\n\n---\n**Reference sources available** my own bold heading\nkeep this line\n---\n\nend"


def strip(text: str) -> str:
    return strip_injections(text, keys=[KEY])


def test_an_injection_is_appended_after_the_text_and_stripped_back_to_it():
    enriched = append_blocks("see @caching", [EXPANSION, HINTS], key=KEY)

    assert enriched.startswith("see @caching\n\n" + EXPANSION + "\n\n" + HINTS + "\n<!-- lectern ")
    assert strip(enriched) == "see @caching"


def test_text_that_only_looks_like_a_block_is_the_users_and_is_kept():
    assert strip(LOOKALIKE) == LOOKALIKE
    assert strip(append_blocks(LOOKALIKE, [HINTS], key=KEY)) == LOOKALIKE


def test_a_forged_or_altered_injection_is_kept_whole():
    enriched = append_blocks("question", [HINTS], key=KEY)
    forged = append_blocks("question", [HINTS], key=b"x" * 32)
    altered = enriched.replace("matched: redis", "matched: valkey")

    assert strip(forged) == forged
    assert strip(altered) == altered
    assert strip(enriched[12:]) == enriched[12:]  # cut short: not what was signed
    assert strip("prefix " + enriched) == "prefix question"  # the text before it is not part of it


def test_injections_signed_with_a_previous_key_are_still_recognised():
    enriched = append_blocks("question", [HINTS], key=OLD_KEY)

    assert strip_injections(enriched, keys=[KEY, OLD_KEY]) == "question"
    assert strip_injections(enriched, keys=[KEY]) == enriched


def test_several_turns_echoed_back_lose_only_the_injections():
    first = append_blocks("turn one\n", [HINTS], key=KEY)
    second = append_blocks(first + "\n\n" + LOOKALIKE, [EXPANSION, HINTS], key=KEY)
    conversation = second + "\nturn three"

    assert strip(conversation) == "turn one\n" + "\n\n" + LOOKALIKE + "\nturn three"


def test_nothing_to_append_leaves_the_text_as_it_is():
    assert append_blocks("text\n\n\n", ["", ""], key=KEY) == "text\n\n\n"


TEXTS = st.lists(st.sampled_from(["word", " ", "\n", "\n\n", "---", "**Reference @x: X**", "<!-- lectern 2 5 ",
                                  "-->", "é", "\r\n", LOOKALIKE, HINTS]), max_size=12).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=TEXTS, blocks=st.lists(st.sampled_from([HINTS, EXPANSION, "", "---\nanything\n---"]), max_size=3),
       after=TEXTS)
@example(text="end\n\n\n", blocks=[HINTS], after="")
@example(text="", blocks=[HINTS], after="\n\nmore")
def test_stripping_removes_exactly_what_was_appended(text, blocks, after):
    assert strip(text) == text  # nothing here was signed
    assert strip(append_blocks(text, blocks, key=KEY) + after) == text + after


@pytest.mark.parametrize("text", ["", "x", "x\n", "x\n\n", "x\n\n\n", "\n"])
def test_the_texts_own_ending_survives_byte_for_byte(text):
    assert strip(append_blocks(text, [HINTS], key=KEY)) == text
