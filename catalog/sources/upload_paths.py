"""What an upload source's file path may be (pure: no Django).

A path names a file inside its source, is shown to agents one per line in markdown
listings and ends up in chunk ids: it is relative and already normalised, printable,
and of sane length. Nothing is rewritten: a path is accepted as given or refused, so
the path a curator deletes by is the one they uploaded.
"""

from __future__ import annotations

import unicodedata

MAX_PATH_CHARS = 1024  # UploadedFile.path and Document.path hold this much
MAX_SEGMENT_CHARS = 255  # a file name on common file systems


def _unprintable(char: str) -> bool:
    """Control characters, and the Unicode line and paragraph separators: each would
    break a listing line or hide what follows it."""
    return unicodedata.category(char) in ("Cc", "Zl", "Zp")


# The same rule as one regular expression, for the OpenAPI schema (length aside:
# maxLength says that): '/'-separated parts of 1 to 255 characters, none '.' or '..',
# none starting or ending with a space, no backslash, no control characters or line or
# paragraph separators. tests/catalog/test_paths.py checks that the two agree.
_PART_CHAR = r"[^\x00-\x1f\x7f-\x9f\u2028\u2029\\/]"
_PART_EDGE = r"[^\x00-\x1f\x7f-\x9f\u2028\u2029\\/ ]"
_PART = rf"(?!\.\.?(?:/|$)){_PART_EDGE}(?:{_PART_CHAR}{{0,{MAX_SEGMENT_CHARS - 2}}}{_PART_EDGE})?"
# `$(?!\n)`: in Python, and so in schemathesis and the jsonschema package, a bare `$`
# also matches before a final newline.
UPLOAD_PATH_PATTERN = rf"^{_PART}(?:/{_PART})*$(?!\n)"


def upload_path_problem(path: str) -> str | None:
    """Why `path` is not a valid upload path, or None when it is."""
    if not path:
        return "a path may not be empty"
    if len(path) > MAX_PATH_CHARS:
        return f"a path may be at most {MAX_PATH_CHARS} characters"
    if any(_unprintable(char) for char in path):
        return "a path may not contain control characters or line breaks"
    if "\\" in path:
        return "a path separates folders with '/', and may not contain a backslash"
    if path.startswith("/"):
        return "a path must be relative (no leading '/')"
    for segment in path.split("/"):
        if not segment:
            return "a path may not hold an empty segment ('//' or a trailing '/')"
        if segment in (".", ".."):
            return "a path may not hold '.' or '..' segments"
        if len(segment) > MAX_SEGMENT_CHARS:
            return f"each '/'-separated part of a path may be at most {MAX_SEGMENT_CHARS} characters"
        if segment != segment.strip(" "):
            return "a part of a path may not start or end with a space"
    return None
