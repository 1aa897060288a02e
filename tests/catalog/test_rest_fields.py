"""The strict request fields' published rules match what they enforce (pure)."""

from __future__ import annotations

import re

from catalog.rest.fields import NOT_BLANK


def test_the_published_not_blank_pattern_is_pythons_whitespace_rule():
    """A text passes the pattern exactly when strip() leaves something: every code
    point is checked, since `\\S` in other regex dialects differs on a few."""
    pattern = re.compile(NOT_BLANK.regex)

    assert [c for c in range(0x110000) if bool(pattern.search(chr(c))) == chr(c).isspace()] == []
