"""Marking a query's terms in a passage (retrieval.search.highlight, pure): the words BM25
matched, by the same analysis, and nothing else; the parts join back to the passage."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from retrieval.search.highlight import marked_parts, query_terms


def marked(text: str, query: str) -> list[str]:
    return [part for part, hit in marked_parts(text, query_terms(query)) if hit]


def test_words_that_analyse_to_a_query_term_are_marked():
    assert marked("Retrying transient failures: the failure mode.", "transient failure retries") == [
        "Retrying", "transient", "failures", "failure"]


def test_stop_words_and_other_words_are_not():
    assert marked("The cache of the service", "the service of") == ["service"]
    assert marked("Caching", "cat") == []


def test_markup_in_the_passage_stays_text():
    parts = marked_parts("<b>vault</b> keys", query_terms("vault"))

    assert parts == [("<b>", False), ("vault", True), ("</b> keys", False)]


def test_no_terms_mark_nothing():
    assert marked_parts("the and of", query_terms("the of")) == [("the and of", False)]
    assert marked_parts("", query_terms("vault")) == []


@given(st.text(max_size=200), st.text(max_size=40))
def test_the_parts_join_back_to_the_passage(text, query):
    parts = marked_parts(text, query_terms(query))

    assert "".join(part for part, _ in parts) == text
    assert all(part for part, _ in parts)
