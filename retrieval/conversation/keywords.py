"""Seed 001's keyword extraction, for memory's lexical search: the words of a casual
message worth searching for. Pure.

1. split on whitespace; 2. strip punctuation and lower-case each word; 3. drop words
of two characters or fewer; 4. drop conversational stop words (articles, pronouns,
prepositions, auxiliaries and modals, fillers: broader than a search engine's list,
since "what did I tell you about my project?" should search for "project" alone);
5. the rest, in order, each once."""

from __future__ import annotations

import string

# Punctuation at either end of a word, and inside it (apostrophes: "don't" -> "dont").
_PUNCTUATION = str.maketrans("", "", string.punctuation + "“”‘’«»…–—")

STOP_WORDS = frozenset("""
    the and for are but not you all any can had her was one our out has him his how its may new now
    see who did get let say she too use via yes yet also been from have into just more most much must
    only over same some such than that them then they this very were what when which while will with
    would could should shall might about above after again against because before being below between
    both does doing down during each few further here hers herself himself itself myself ours
    ourselves themselves there these those through under until where whom why your yours yourself
    yourselves theirs their okay hey hello thanks thank please know think tell told remember recall
    like really actually maybe something anything everything thing things want need going gonna wanna
    dont didnt doesnt cant wont isnt arent wasnt werent ive youre youve theyre thats whats lets
    well sure right got can't
""".split())

MIN_LENGTH = 3  # words of two characters or fewer are dropped


def keywords(text: str) -> list[str]:
    """The message's keywords, in order of first appearance, each once."""
    seen: dict[str, None] = {}
    for raw in text.split():
        word = raw.translate(_PUNCTUATION).lower()
        if len(word) >= MIN_LENGTH and word not in STOP_WORDS and word not in seen:
            seen[word] = None
    return list(seen)
