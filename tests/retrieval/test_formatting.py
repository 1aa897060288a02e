"""Injected blocks (pure): what enrichment appends is signed for whom it was placed and
for the text it was appended to, and stripping removes exactly that, byte for byte, and
only there (at the end of that text, for that agent and end user); whatever else a text
holds is the user's and is kept, even when it looks like Lectern's blocks, or is one."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from retrieval.enrichment.formatting import InjectionSigner, append_blocks, strip_injection

KEY, OLD_KEY = b"k" * 32, b"o" * 32
STEVE = InjectionSigner(keys=[KEY], scopes=["agent 1\nend user steve"])
ANA = InjectionSigner(keys=[KEY], scopes=["agent 1\nend user ana"])
OTHER_AGENT = InjectionSigner(keys=[KEY], scopes=["agent 2\nend user steve"])
AGENT_ALONE = InjectionSigner(keys=[KEY], scopes=["agent 1\nend user "])  # enrich: no end user
HINTS = ("---\n**Reference sources available** — use `selectReferences` with IDs or tags to select:\n\n"
         "- @caching: Caching (matched: redis)\n---")
EXPANSION = "---\n**Reference @caching: Caching** (selected; its files are authorised for reading)\nFiles:\n- a.md\n---"
LOOKALIKE = "Notes\n\n---\n**Reference sources available** my own bold heading\nkeep this line\n---\n\nend"


def strip(text: str, signer: InjectionSigner = STEVE) -> str:
    return strip_injection(text, signer=signer)


def injection(text: str, blocks: list[str], signer: InjectionSigner = STEVE) -> str:
    """What Lectern appended to `text`: the part after it."""
    return append_blocks(text, blocks, signer=signer)[len(text):]


def test_an_injection_is_appended_after_the_text_and_stripped_back_to_it():
    enriched = append_blocks("see @caching", [EXPANSION, HINTS], signer=STEVE)

    assert enriched.startswith("see @caching\n\n" + EXPANSION + "\n\n" + HINTS + "\n<!-- lectern ")
    assert strip(enriched) == "see @caching"


def test_text_that_only_looks_like_a_block_is_the_users_and_is_kept():
    assert strip(LOOKALIKE) == LOOKALIKE
    assert strip(append_blocks(LOOKALIKE, [HINTS], signer=STEVE)) == LOOKALIKE


def test_a_forged_or_altered_injection_is_kept_whole():
    enriched = append_blocks("question", [HINTS], signer=STEVE)
    forged = append_blocks("question", [HINTS], signer=InjectionSigner(keys=[b"x" * 32], scopes=STEVE.scopes))
    altered = enriched.replace("matched: redis", "matched: valkey")

    assert strip(forged) == forged
    assert strip(altered) == altered
    assert strip(enriched[12:]) == enriched[12:]  # cut short: not what was signed
    assert strip(enriched + " more") == enriched + " more"  # no longer at the end


def test_a_block_pasted_into_the_middle_of_a_text_is_the_users():
    block = injection("question", [HINTS])
    pasted = "AAA" + block + "BBB"

    assert strip(pasted) == pasted
    assert strip("AAA" + block + "\n\nBBB") == "AAA" + block + "\n\nBBB"


def test_a_block_at_the_end_of_a_text_lectern_did_not_append_it_to_is_the_users():
    block = injection("question", [HINTS])

    for text in ("another question", "prefix question", "question "):
        assert strip(text + block) == text + block
    assert strip("question" + block) == "question"  # where it was placed


def test_a_block_placed_for_another_end_user_or_agent_is_the_users():
    for placed_for in (ANA, OTHER_AGENT):
        enriched = append_blocks("question", [HINTS], signer=placed_for)

        assert strip(enriched) == enriched
        assert strip(enriched, placed_for) == "question"


def test_injections_signed_with_a_previous_key_are_still_recognised():
    enriched = append_blocks("question", [HINTS], signer=InjectionSigner(keys=[OLD_KEY], scopes=STEVE.scopes))

    assert strip(enriched, InjectionSigner(keys=[KEY, OLD_KEY], scopes=STEVE.scopes)) == "question"
    assert strip(enriched) == enriched


def test_several_turns_in_one_text_keep_every_injection_but_the_last():
    """A client that pastes the whole conversation into one text: the earlier injection
    is no longer at the end of what it was appended to, so it is the user's."""
    first = append_blocks("turn one\n", [HINTS], signer=STEVE)
    second = append_blocks(first + "\n\n" + LOOKALIKE, [EXPANSION, HINTS], signer=STEVE)

    assert strip(second) == first + "\n\n" + LOOKALIKE
    assert strip(second + "\nturn three") == second + "\nturn three"


def test_nothing_to_append_leaves_the_text_as_it_is():
    assert append_blocks("text\n\n\n", ["", ""], signer=STEVE) == "text\n\n\n"


TEXTS = st.lists(st.sampled_from(["word", " ", "\n", "\n\n", "---", "**Reference @x: X**", "<!-- lectern 2 5 ",
                                  "-->", "é", "\r\n", LOOKALIKE, HINTS]), max_size=12).map("".join)
BLOCKS = st.lists(st.sampled_from([HINTS, EXPANSION, "", "---\nanything\n---"]), max_size=3)


@settings(max_examples=300, deadline=None)
@given(text=TEXTS, blocks=BLOCKS, after=TEXTS)
@example(text="end\n\n\n", blocks=[HINTS], after="")
@example(text="", blocks=[HINTS], after="\n\nmore")
@example(text="question", blocks=[HINTS], after="\n")
def test_stripping_removes_exactly_what_was_appended_where_it_was_appended(text, blocks, after):
    enriched = append_blocks(text, blocks, signer=STEVE)

    assert strip(text) == text  # nothing here was signed
    assert strip(enriched) == text
    appended, trailing = enriched != text, not after.strip()  # only whitespace after the marker
    assert strip(enriched + after) == (text if appended and trailing else enriched + after)  # else not at the end
    assert strip(after + enriched) == (after + enriched if after else text)  # not the text it was appended to
    assert strip(enriched, ANA) == enriched


@pytest.mark.parametrize("text", ["", "x", "x\n", "x\n\n", "x\n\n\n", "\n"])
def test_the_texts_own_ending_survives_byte_for_byte(text):
    assert strip(append_blocks(text, [HINTS], signer=STEVE)) == text


def test_a_signer_strips_what_was_placed_for_any_of_its_scopes_and_signs_for_the_first():
    """A conversation's signer (steve's, then the agent's without an end user, as
    retrieval.enrichment.formatting.injection_signer makes it) strips what enrich added
    for the agent too, never what was placed for another end user or another agent."""
    conversation = InjectionSigner(keys=[KEY], scopes=[*STEVE.scopes, *AGENT_ALONE.scopes])

    for placed_for in (STEVE, AGENT_ALONE):
        assert strip(append_blocks("question", [HINTS], signer=placed_for), conversation) == "question"
    for placed_for in (ANA, OTHER_AGENT, InjectionSigner(keys=[KEY], scopes=["agent 2\nend user "])):
        enriched = append_blocks("question", [HINTS], signer=placed_for)
        assert strip(enriched, conversation) == enriched
    signed = append_blocks("question", [HINTS], signer=conversation)
    assert strip(signed, STEVE) == "question" and strip(signed, AGENT_ALONE) == signed  # signed for steve


@pytest.mark.parametrize("after", ["\n", "\r\n", "  ", "\n\n", " \t\n"])
def test_whitespace_after_the_marker_goes_with_the_injection(after):
    """A client that ends each message with a line break still gets Lectern's block
    removed, and the text it was appended to back exactly."""
    for text in ("question", "question\n", ""):
        assert strip(append_blocks(text, [HINTS], signer=STEVE) + after) == text
    kept = append_blocks("question", [HINTS], signer=STEVE) + after + "more"
    assert strip(kept) == kept
