"""A conversation cut into query chunks (retrieval.conversations.chunking), counted by the
real model's tokenizer: every chunk is whole paragraphs of the conversation's markdown
(or a piece of one too long for the model), none longer than the model reads, and
nothing of the conversation left out."""

from __future__ import annotations

import random

import pytest

from catalog.embedder import get_embedder
from retrieval.conversations.chunking import conversation_chunks, paragraphs
from retrieval.conversations.messages import Message, conversation_markdown

TOPICS = ["We moved the billing service to a new cluster and the calls started timing out under load.",
          "The nightly export job writes CSV files that the finance team opens in a spreadsheet.",
          "Our TLS certificates expire next month; the renewal has to happen before the freeze.",
          "Which cache eviction policy fits a read-heavy catalog of product descriptions?"]


@pytest.fixture(scope="module")
def embedder():
    loaded = get_embedder()
    if loaded is None:
        pytest.skip("no embedding model")
    return loaded


def long_conversation(seed: int = 7) -> list[Message]:
    """Forty messages of one to four paragraphs (each its own: numbered), and one paragraph
    longer than the model reads."""
    rng = random.Random(seed)
    messages = []
    for number in range(40):
        role = "user" if number % 2 == 0 else "assistant"
        parts = [f"Point {number}.{k}: " + " ".join(rng.choice(TOPICS) for _ in range(rng.randint(1, 3)))
                 for k in range(rng.randint(1, 4))]
        messages.append(Message(role, "\n\n".join(parts)))
    messages.insert(20, Message("tool", " ".join(TOPICS * 12)))  # one paragraph of ~900 tokens
    return messages


def chunks_of(markdown: str, embedder, **sizes) -> list[str]:
    defaults = {"max_tokens": embedder.max_tokens, "overlap_tokens": 25, "size": 1000, "overlap": 100}
    return conversation_chunks(markdown, count_tokens=embedder.count_tokens, **{**defaults, **sizes})


def test_a_long_conversation_is_cut_at_paragraph_boundaries_within_what_the_model_reads(embedder):
    markdown = conversation_markdown(long_conversation())
    raw = [p.strip() for p in markdown.split("\n\n")]
    long_paragraph = max(raw, key=len)

    chunks = chunks_of(markdown, embedder)

    assert len(chunks) > 5
    assert max(embedder.count_tokens(chunks)) <= embedder.max_tokens
    pieces = []
    for chunk in chunks:
        parts = chunk.split("\n\n")
        assert not parts[-1].startswith("## Message")  # a heading never ends a chunk
        for part in parts:  # whole paragraphs, or a piece of the one too long for a chunk
            if part not in raw:
                assert part in long_paragraph, part[:200]
                pieces.append(part)
    assert len(pieces) >= 4  # ~900 tokens, cut by the storage chunker at sentence ends
    assert all(piece.endswith((".", "?")) for piece in pieces)


def test_every_paragraph_is_read_by_some_chunk_and_neighbours_overlap(embedder):
    markdown = conversation_markdown(long_conversation(seed=11))
    units = paragraphs(markdown)

    chunks = chunks_of(markdown, embedder)

    assert all(any(unit in chunk for chunk in chunks) for unit in units if len(unit) < 800)
    overlapping = [(a, b) for a, b in zip(chunks, chunks[1:], strict=False) if a.split("\n\n")[-1] in b]
    assert overlapping  # a short last paragraph is read again at the head of the next chunk


def test_a_message_heading_stays_with_its_text():
    units = paragraphs(conversation_markdown([Message("user", "First.\n\nSecond."), Message("assistant", "Third.")]))

    assert units == ["## Message 1\n**Role:** user\n\nFirst.", "Second.", "## Message 2\n**Role:** assistant\n\nThird."]


def test_a_short_conversation_is_one_chunk_and_an_empty_one_none(embedder):
    markdown = conversation_markdown([Message("user", "Hello."), Message("assistant", "Hi.")])

    assert chunks_of(markdown, embedder) == [markdown]
    assert chunks_of(conversation_markdown([Message("user", "  ")]), embedder) == []


def test_no_overlap_when_none_is_asked(embedder):
    markdown = conversation_markdown(long_conversation())

    chunks = chunks_of(markdown, embedder, overlap_tokens=0)

    assert not any(a.split("\n\n")[-1] == b.split("\n\n")[0] for a, b in zip(chunks, chunks[1:], strict=False))
