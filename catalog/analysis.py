"""Lexical analysis shared by indexing and querying.

Mirrors Lucene's EnglishAnalyzer, which the published BM25 baselines use: unicode word
tokens, possessive `'s` removed, lower case, Lucene's English stop words, Porter stemming.
Pure Python (plus PyStemmer's C Porter stemmer); no Django.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

import Stemmer

# Lucene EnglishAnalyzer.ENGLISH_STOP_WORDS_SET
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with".split()
)
MAX_TERM_CHARS = 64
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_POSSESSIVE = re.compile(r"['\u2019]s\b")
_stemmer = Stemmer.Stemmer("porter")
_stemmer.maxCacheSize = 200_000


def analyze(text: str) -> list[str]:
    """Terms of `text` in order, duplicates kept (document length counts them)."""
    words = _WORD.findall(_POSSESSIVE.sub("", text.lower()))
    kept = [w for w in words if w not in STOP_WORDS and len(w) <= MAX_TERM_CHARS]
    return _stemmer.stemWords(kept)


def words_with_terms(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, term) of each word of `text` that is a term, in order: the words
    `analyze` keeps, with their offsets (to show where a query's terms occur)."""
    for match in _WORD.finditer(text):
        word = match.group().lower()
        if word not in STOP_WORDS and len(word) <= MAX_TERM_CHARS:
            yield match.start(), match.end(), _stemmer.stemWord(word)


def term_frequencies(text: str) -> tuple[Counter[str], int]:
    """(term -> frequency, document length in terms)."""
    terms = analyze(text)
    return Counter(terms), len(terms)
