r"""Tag detection in arbitrary text (prompts and tool results: prose, code, logs, paths,
markdown); pure Python.

A tag occurs where its words appear in order, in any case, separated the way prose and
identifiers separate words, and not glued to a longer name. In a tag, any run of
spaces, `_` and `-` separates two words. These are the seed's rules
(`(?<![a-zA-Z0-9_./-])tag(?![a-zA-Z0-9_./-])`, hyphen, space and underscore
interchangeable), made Unicode-aware (`\w`: letters, digits, underscore), with two
refinements:

- Between two words of a tag the text may hold exactly one `_` or `-`, or a run of
  whitespace: "circuit breaker", "Circuit-Breaker", "circuit_breaker" and
  "circuit\n  breaker" all mention the tag "circuit breaker"; "circuit__breaker" and
  "circuit--breaker" do not. Why: markdown and wrapped log lines split a multi-word
  tag across a line break, or align it with several spaces.
- Nothing in [\w./-] may precede a match. After it, neither [\w/-] nor a `.` that is
  itself followed by [\w/] (a dotted name: `java.util`, `resilience.py`); a period
  that ends a sentence ("We use Java.", "Java...") does not refuse it. Why: the end of
  a sentence is the commonest place a tag is named, and the seed's guard refused it.

Tags may hold other characters (`c++`, `node.js`, `.net`, `c#`, `ci/cd`): they match
literally, under the same guards. Case is folded with str.lower() on both sides (the
text through `fold`, which keeps every character at its offset).

A tag's identity is its key (`catalog.tag_keys.tag_key`): several spellings of one key
are one tag. For each key that occurs, a search reports one hit, its first occurrence;
overlapping tags are each reported ("circuit breaker" is a hit for "circuit breaker" and
for "breaker").

Two implementations of the same rules:
- `regex_loop_find` / `scan_patterns`: one compiled regex per key, searched in turn.
  Obviously right and slow (one pass over the text per tag): the oracle of the tests
  and the baseline of `python -m benchmarks bench_detect`.
- `TagMatcher`: built once per vocabulary. One regex split cuts the folded text into
  word tokens (runs of letters and digits) and the gaps between them. A token that
  starts some tag opens an n-gram walk over a dict of keys and key prefixes, which
  stops at the first gap that is not a separator or the first n-gram that starts no
  key; a complete key counts if the gaps around it pass the guards. A tag holding other
  characters is tried with its own regex at the tokens equal to its first word; the
  rare tag with no letter or digit, or opening with punctuation and a separator
  (".-x"), is searched for in the whole text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, compress

from catalog.tag_keys import tag_key

_WORD = re.compile(r"[^\W_]+")  # letters and digits: a word of a tag, a token of a text
_SPLIT_WORDS = re.compile(r"([^\W_]+)").split
_SPLIT_ASCII_WORDS = re.compile(r"([a-z0-9]+)").split  # the same on lowercased ASCII text, faster
_PLAIN_KEY = re.compile(r"[^\W_]+(?:-[^\W_]+)*")
_SEPARATOR = r"(?:[_-]|\s+)"
_GUARD_BEFORE = r"(?<![\w./-])"
_GUARD_AFTER = r"(?![\w/-])(?!\.[\w/])"

_COMPLETE, _EXTENDS = 1, 2  # flags of an n-gram: a key; a proper prefix of a longer key

TagPattern = tuple[str, str, re.Pattern[str]]  # (tag as curated, key, regex)


def fold(text: str) -> str:
    """`text` lowercased, each character at its offset: 'İ', the one character whose
    lowercase is two characters long, becomes 'i'."""
    folded = text.lower()
    if len(folded) == len(text):
        return folded
    return "".join(char.lower()[0] for char in text)


def tag_pattern(key: str) -> re.Pattern[str]:
    """The regex of one key, to search in folded text."""
    words = _SEPARATOR.join(re.escape(part) for part in key.split("-"))
    return re.compile(_GUARD_BEFORE + words + _GUARD_AFTER)


@dataclass(frozen=True, slots=True)
class TagHit:
    tag: str  # the tag as curated: the first spelling given for its key
    key: str
    start: int  # offsets into the original text
    end: int
    text: str  # text[start:end], as written there


def tags_by_key(tags: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Distinct spellings per key, in the order given; tags with an empty key dropped."""
    spellings: dict[str, dict[str, None]] = {}
    for tag in tags:
        if key := tag_key(tag):
            spellings.setdefault(key, {})[tag] = None
    return {key: tuple(names) for key, names in spellings.items()}


def tag_patterns(tags: Iterable[str]) -> list[TagPattern]:
    """One compiled regex per key: the input of `scan_patterns`, compiled once."""
    return [(names[0], key, tag_pattern(key)) for key, names in tags_by_key(tags).items()]


def scan_patterns(patterns: Sequence[TagPattern], text: str) -> list[TagHit]:
    """The per-tag regex loop: each key's first match in the folded text."""
    folded = fold(text)
    hits = []
    for tag, key, pattern in patterns:
        if match := pattern.search(folded):
            start, end = match.span()
            hits.append(TagHit(tag, key, start, end, text[start:end]))
    return _ordered(hits)


def regex_loop_find(tags: Iterable[str], text: str) -> list[TagHit]:
    """The straightforward implementation: compile a regex per tag, search each in turn."""
    return scan_patterns(tag_patterns(tags), text)


def _ordered(hits: list[TagHit]) -> list[TagHit]:
    hits.sort(key=lambda hit: (hit.start, -hit.end, hit.key))
    return hits


def _free_after(gap: str, at_end: bool) -> bool:
    """Whether the gap after a token lets a match end there (`at_end`: no token follows)."""
    if not gap or gap[0] not in "_/-.":
        return True
    if gap[0] == ".":
        return gap[1] not in "_/" if len(gap) > 1 else at_end
    return False


def _is_separator(gap: str) -> bool:
    return gap == " " or gap == "-" or gap == "_" or gap.isspace()


class TagMatcher:
    """Finds each tag of a fixed vocabulary in texts; build once per vocabulary.

    `tags_by_key` maps each key to its spellings, so that a caller can map a hit back
    to whatever carries that tag.
    """

    def __init__(self, tags: Iterable[str]) -> None:
        self.tags_by_key: Mapping[str, tuple[str, ...]] = tags_by_key(tags)
        self._display: dict[str, str] = {key: names[0] for key, names in self.tags_by_key.items()}
        self._ngrams: dict[str, int] = {}  # plain key or key prefix -> _COMPLETE | _EXTENDS
        self._anchored: dict[str, list[tuple[str, int, re.Pattern[str]]]] = {}  # first word -> (key, lead, regex)
        self._unanchored: list[tuple[str, re.Pattern[str]]] = []
        for key in self.tags_by_key:
            self._add(key)
        self._heads = frozenset([*(gram for gram in self._ngrams if "-" not in gram), *self._anchored])

    def __len__(self) -> int:
        return len(self.tags_by_key)

    def _add(self, key: str) -> None:
        if _PLAIN_KEY.fullmatch(key):
            cut = key.find("-")
            while cut != -1:
                self._ngrams[key[:cut]] = self._ngrams.get(key[:cut], 0) | _EXTENDS
                cut = key.find("-", cut + 1)
            self._ngrams[key] = self._ngrams.get(key, 0) | _COMPLETE
            return
        word = _WORD.search(key)
        if word is None or "-" in key[: word.start()]:
            self._unanchored.append((key, tag_pattern(key)))
        else:
            self._anchored.setdefault(word.group(), []).append((key, word.start(), tag_pattern(key)))

    def find(self, text: str) -> list[TagHit]:
        """Each tag's first occurrence in `text`, by start, longer first at one start."""
        folded = fold(text)
        # gap, token, gap, ..., token, gap: tokens at odd indexes; only the end gaps may be empty
        parts = (_SPLIT_ASCII_WORDS if folded.isascii() else _SPLIT_WORDS)(folded)
        found: dict[str, tuple[int, int]] = {}  # key -> (start, -end) of its first occurrence
        self._walk_tokens(folded, parts, found)
        for key, pattern in self._unanchored:
            if match := pattern.search(folded):
                found[key] = (match.start(), -match.end())
        display = self._display
        return [
            TagHit(display[key], key, start, -end, text[start:-end])
            for (start, end), key in sorted([(span, key) for key, span in found.items()])
        ]

    def _walk_tokens(self, folded: str, parts: list[str], found: dict[str, tuple[int, int]]) -> None:
        """From each token that starts a tag, walk the n-grams of growing n while they are
        keys or key prefixes and the gaps between their tokens are separators."""
        ends = list(accumulate(map(len, parts)))
        final, ngrams, anchored = len(parts) - 1, self._ngrams, self._anchored
        for first in compress(range(1, final, 2), map(self._heads.__contains__, parts[1::2])):
            gram, before = parts[first], parts[first - 1]
            if gram in anchored:
                _match_anchored(anchored[gram], folded, ends[first - 1], found)
            if (flags := ngrams.get(gram)) is None or (before and before[-1] in "_./-"):
                continue
            last = first
            while True:
                after = parts[last + 1]
                if flags & _COMPLETE and gram not in found and _free_after(after, last + 1 == final):
                    found[gram] = (ends[first - 1], -ends[last])
                if not flags & _EXTENDS or last + 1 == final or not _is_separator(after):
                    break
                last += 2
                gram = f"{gram}-{parts[last]}"
                if (flags := ngrams.get(gram)) is None:
                    break


def _match_anchored(
    candidates: list[tuple[str, int, re.Pattern[str]]], folded: str, token_start: int, found: dict[str, tuple[int, int]]
) -> None:
    """Try each tag holding other characters whose first word starts at `token_start`."""
    for key, lead, pattern in candidates:
        if key not in found and token_start >= lead and (match := pattern.match(folded, token_start - lead)):
            found[key] = (match.start(), -match.end())
