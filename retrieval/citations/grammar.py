"""The cite string, its grammar and the content fingerprint (pure: no Django).

A cite names one served passage exactly:

    cite        = "[lectern:" catalog "/" source "/" path "#b" start "-" end "@" fingerprint "]"
    catalog     = slug                 ; the catalog's slug
    source      = slug                 ; the source's slug (the reference id)
    path        = 1*char               ; the document's path within its source, with "%",
                                       ; "[", "]", "#", whitespace and control characters
                                       ; percent-encoded (UTF-8)
    start, end  = 1*DIGIT              ; the passage's bytes in the UTF-8 document text,
                                       ; start included, end excluded
    fingerprint = 12*64HEXDIG          ; sha256 of the passage's text (UTF-8), lower case;
                                       ; a cite carries the first 12, resolution takes any
                                       ; prefix of 12 or more

`[lectern:demo/runbooks/ops/retry.md#b1024-1876@3fa2c81e9b07]`. The path runs to the
last `#b`, so a path holding `/` or `@` needs no escape; the brackets may be left off.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

SHORT = 12  # hex digits of the fingerprint a cite carries
MAX_CHARS = 2000  # a longer cite is refused before it is parsed

_ESCAPED = re.compile(r"[%\[\]#\s\x00-\x1f\x7f]")
_CITE = re.compile(r"\[?lectern:(?P<catalog>[-\w]+)/(?P<source>[-\w]+)/(?P<path>[^\x00-\x1f\x7f]+)"
                   r"#b(?P<start>\d{1,18})-(?P<end>\d{1,18})@(?P<fingerprint>[0-9a-f]{12,64})\]?")
# The same for a schema: what a cite looks like (its range and escapes are checked on parsing).
PATTERN = r"^\s*" + re.sub(r"\?P<\w+>", "", _CITE.pattern) + r"\s*$"
_PERCENT = re.compile(r"(?:%[0-9A-Fa-f]{2})+")


class CiteError(ValueError):
    """A cite string that does not follow the grammar; the message is one line."""


@dataclass(frozen=True)
class Cite:
    catalog: str
    source: str
    path: str
    start: int
    end: int
    fingerprint: str  # a prefix of 12 to 64 hex digits

    def __str__(self) -> str:
        return cite_string(catalog=self.catalog, source=self.source, path=self.path, start=self.start,
                           end=self.end, fingerprint=self.fingerprint)


def fingerprint(text: str) -> str:
    """sha256 of the exact text served, as 64 lower-case hex digits."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def byte_range(offset: int, text: str) -> tuple[int, int]:
    """Where a passage cut at byte `offset` of its document ends: start and end bytes."""
    return offset, offset + len(text.encode("utf-8"))


def cite_string(*, catalog: str, source: str, path: str, start: int, end: int, fingerprint: str) -> str:
    escaped = _ESCAPED.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8")), path)
    return f"[lectern:{catalog}/{source}/{escaped}#b{start}-{end}@{fingerprint[:SHORT]}]"


def parse_cite(text: str) -> Cite:
    """The cite `text` names (surrounding whitespace ignored), or CiteError saying why not."""
    text = text.strip()
    if not text:
        raise CiteError("no cite given: pass one as c=[lectern:catalog/source/path#bSTART-END@FINGERPRINT]")
    if len(text) > MAX_CHARS:
        raise CiteError(f"a cite is at most {MAX_CHARS} characters")
    match = _CITE.fullmatch(text)
    if match is None or text.startswith("[") != text.endswith("]"):
        raise CiteError("not a cite: expected [lectern:catalog/source/path#bSTART-END@FINGERPRINT], "
                        "the fingerprint 12 to 64 lower-case hex digits")
    start, end = int(match["start"]), int(match["end"])
    if end <= start:
        raise CiteError(f"the byte range {start}-{end} is empty: its end must be past its start")
    try:
        path = _PERCENT.sub(lambda m: bytes.fromhex(m.group().replace("%", "")).decode("utf-8"), match["path"])
    except UnicodeDecodeError:
        raise CiteError("the path's percent-escapes are not UTF-8") from None
    if "\x00" in path:
        raise CiteError("the path holds a NUL (%00), which no path does")
    return Cite(match["catalog"], match["source"], path, start, end, match["fingerprint"])
