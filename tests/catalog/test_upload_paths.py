"""What an upload source's file path may be: relative, normalised, printable, sane
length (catalog.sources.upload_paths; pure, no database)."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from catalog.sources.upload_paths import MAX_PATH_CHARS, MAX_SEGMENT_CHARS, UPLOAD_PATH_PATTERN, upload_path_problem


@pytest.mark.parametrize("path", [
    "a.md", "guides/retries.md", "MED-10", "notes/2024/Q1 review.md", "é/日本語.txt", ".well-known/x.md",
    "a" * MAX_SEGMENT_CHARS, "/".join(["b" * 200] * 5),
])
def test_relative_normalised_printable_paths_are_valid(path):
    assert upload_path_problem(path) is None


@pytest.mark.parametrize(("path", "problem"), [
    ("", "empty"),
    ("../../../../etc/passwd", "'..'"),
    ("guides/../secrets.md", "'..'"),
    ("/etc/shadow", "relative"),
    ("a\u0001\n<script>.md", "control"),
    ("a\tb.md", "control"),
    ("a\u2028b.md", "control"),
    ("a\u0085b.md", "control"),
    ("a//b.md", "empty segment"),
    ("a/b/", "empty segment"),
    ("./a.md", "'.'"),
    ("a/./b.md", "'.'"),
    ("a\\b.md", "backslash"),
    (" a.md", "space"),
    ("a/b.md ", "space"),
    ("a" * (MAX_SEGMENT_CHARS + 1), f"{MAX_SEGMENT_CHARS}"),
    ("/".join(["b" * 200] * 6), f"{MAX_PATH_CHARS}"),
])
def test_other_paths_are_refused_saying_why(path, problem):
    refusal = upload_path_problem(path)
    assert refusal is not None and problem in refusal


# Characters each rule turns on, and long runs for the part length.
_PATH_PIECES = st.sampled_from(["a", "é", ".", "..", "/", " ", "\\", "\n", "\t", "\u2028", "\x85", "b" * 254])


@given(st.lists(_PATH_PIECES, max_size=12).map("".join))
@example("a.md\n")
@example("b" * 255 + "/c")
@example("b" * 256)
def test_the_schema_pattern_states_the_same_rule(path):
    """The OpenAPI schema publishes UPLOAD_PATH_PATTERN (read as JSON Schema does, with
    a search) and maxLength: it must accept exactly the paths the API accepts."""
    published = bool(re.search(UPLOAD_PATH_PATTERN, path)) and 1 <= len(path) <= MAX_PATH_CHARS

    assert published == (upload_path_problem(path) is None)
