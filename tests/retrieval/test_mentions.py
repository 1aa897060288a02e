"""`@id` mentions (pure): where one starts and ends. An `@id` ends where a tag would
(retrieval/tagmatch.py's guards), so a package path, a dotted call or a domain that
begins with a reference's id is not a mention of it."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from retrieval.enrichment.detection import at_mentions
from retrieval.enrichment.tagmatch import fold, tag_pattern


@pytest.mark.parametrize("text", [
    "npm i @caching/redis-adapter",
    "@caching.cached(ttl=5)",
    "follow @caching.io",
    "import @caching.py",
    "see @caching/",
    "the @cachingé module",
    "mail ops@caching please",
    "path/@caching",
])
def test_an_id_glued_to_a_longer_name_is_not_a_mention_of_it(text):
    assert "caching" not in at_mentions(text)


@pytest.mark.parametrize("text", [
    "see @caching.",
    "see @caching...",
    "@caching, then @circuit-breaker",
    "(@caching)",
    "use @caching: it helps",
    "**@caching**",
    "`@caching`",
    "@caching? yes",
    "@CACHING!",
    "end with @caching",
    "@caching\nnext line",
])
def test_an_id_ended_the_way_prose_ends_words_is_a_mention(text):
    assert "caching" in at_mentions(text)


IDS = st.from_regex(r"[a-z0-9]{1,6}(-[a-z0-9]{1,6}){0,2}", fullmatch=True)
# What may follow an id (its first characters); `-` and `_` continue the id itself.
AFTER = st.sampled_from([
    "", " ", "\n", ".", ". ", "..", "./", ".a", ".1", "._", "/", "/x", ",", ")", "(", ":", ";", "!", "?", "'",
    '"', "`", "*", "é", "1", "a", "Z", "#", "+", "@", "Σ", "\u00a0", "\t",
])


@settings(max_examples=400, deadline=None)
@given(ident=IDS, after=AFTER, rest=st.sampled_from(["", " more", "x", ".y"]))
@example(ident="caching", after="/", rest="redis-adapter")
@example(ident="caching", after=".", rest="cached(ttl=5)")
def test_a_mention_ends_where_the_same_tag_would(ident, after, rest):
    text = ident + after + rest
    as_tag = tag_pattern(ident).match(fold(text))
    ends_like_a_tag = as_tag is not None and as_tag.end() == len(ident)

    assert (ident in at_mentions("see @" + text)) == ends_like_a_tag


@pytest.mark.parametrize(("text", "mentions"), [
    ("see @demo/caching.", ["demo/caching"]),
    ("@Demo/Caching and @caching", ["demo/caching", "caching"]),
    ("@demo/caching/x or @demo/caching.io", []),
    ("npm i @caching/redis-adapter", ["caching/redis-adapter"]),  # a catalog `caching` would hold it
])
def test_a_mention_may_name_its_catalog(text, mentions):
    assert at_mentions(text) == mentions
