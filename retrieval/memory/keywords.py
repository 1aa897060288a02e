"""Keyword extraction, for memory's lexical search: the words of a casual
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
    the and but nor for yet are was were been being has had have does did doing can could will would
    shall should may might must you your yours she her hers him his its our ours they them their theirs
    this that these those what which who whom whose when where why how about from into onto with
    over under than then there here also just very too any some all each both such same
    hey hello okay please thanks thank tell told remember recall know think really actually maybe
    dont didnt doesnt cant wont isnt arent wasnt werent ive youre youve theyre thats whats lets
""".split())

MIN_LENGTH = 3  # words of two characters or fewer are dropped
MAX_LENGTH = 100  # a longer "word" (a URL, a hash) is no keyword: memory stores keywords of at most this


def keywords(text: str) -> list[str]:
    """The message's keywords, in order of first appearance, each once."""
    seen: dict[str, None] = {}
    for raw in text.split():
        word = raw.translate(_PUNCTUATION).lower()
        if MIN_LENGTH <= len(word) <= MAX_LENGTH and word not in STOP_WORDS and word not in seen:
            seen[word] = None
    return list(seen)
