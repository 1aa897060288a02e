"""Seed 001's keyword extraction."""

from __future__ import annotations

import pytest

from retrieval.memory.keywords import STOP_WORDS, keywords

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("text", "expected"), [
    ("What did I tell you about my project?", ["project"]),
    ("My name is Steve, and I live in TEXAS!", ["name", "steve", "live", "texas"]),
    ("VS Code... with vim keybindings; vim again", ["code", "vim", "keybindings", "again"]),  # each once
    ("  \t\n ", []),
    ("an ox is by me", []),  # two characters or fewer
    ("Don't you remember? I'd love pizza.", ["love", "pizza"]),  # punctuation stripped, then stop words
    ("«Kubernetes» — “pods”", ["kubernetes", "pods"]),
    ("What do I like to eat? Which new tools can I use?", ["like", "eat", "new", "tools", "use"]),  # content stays
    ("see https://example.com/" + "a" * 120 + " later", ["see", "later"]),  # no keyword over 100 characters
])
def test_keywords_are_tokenised_stripped_lowered_and_filtered(text, expected):
    assert keywords(text) == expected


def test_the_stop_words_are_conversational_and_all_of_them_are_dropped():
    assert {"what", "about", "remember", "please", "would", "should"} <= STOP_WORDS
    assert keywords(" ".join(sorted(STOP_WORDS))) == []
