"""Where a chunk sits in what it was read from, for a citation (pure: no Django).

A document's locator says where the document came from: its format and, for a git
file, the commit and a web link; for a web page, its URL. A chunk's locator adds where
in the document it sits, read back from the text extraction made
(catalog.sources.extraction): its line range (text and Markdown files), its pages
(PDF: the form feeds before it) or slides (PPTX), and the heading path in force where
it starts (Markdown headings, which HTML, DOCX and PPTX headings became).
"""

from __future__ import annotations

import bisect
import re
from typing import Any

from catalog.sources.extraction import PAGE_BREAK, file_format

Locator = dict[str, Any]

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_FENCE = re.compile(r"^ {0,3}(?:```|~~~)", re.MULTILINE)
HEADING_SEPARATOR = " › "
HEADING_PATH_CHARS = 300


class Positions:
    """A document's text indexed once, so each of its chunks is located by bisection."""

    def __init__(self, text: str, layout: str) -> None:
        self.layout = layout
        self.newlines = [m.start() for m in re.finditer("\n", text)] if layout == "lines" else []
        self.breaks = [m.start() for m in re.finditer(PAGE_BREAK, text)] if layout in ("pages", "slides") else []
        self.heading_at: list[int] = []
        self.heading_path: list[str] = []
        fences = [m.start() for m in _FENCE.finditer(text)]
        path: list[tuple[int, str]] = []
        # A slide's heading opens its page: after a form feed, as after a newline.
        for match in _HEADING.finditer(text.replace(PAGE_BREAK, "\n")):
            if bisect.bisect_left(fences, match.start()) % 2:  # inside a code fence: a comment, not a heading
                continue
            level, title = len(match.group(1)), " ".join(match.group(2).split())
            path = [entry for entry in path if entry[0] < level] + [(level, title)]
            self.heading_at.append(match.start())
            self.heading_path.append(HEADING_SEPARATOR.join(name for _, name in path)[:HEADING_PATH_CHARS])

    def locate(self, start: int, end: int) -> Locator:
        """Where the characters [start, end) of the text sit."""
        found: Locator = {}
        if self.layout == "lines":
            found["lines"] = [bisect.bisect_left(self.newlines, start) + 1,
                              bisect.bisect_left(self.newlines, max(start, end - 1)) + 1]
        elif self.breaks or self.layout in ("pages", "slides"):
            unit = "pages" if self.layout == "pages" else "slides"
            found[unit] = [bisect.bisect_right(self.breaks, start) + 1,
                           bisect.bisect_right(self.breaks, max(start, end - 1)) + 1]
        at = bisect.bisect_right(self.heading_at, start) - 1
        if at >= 0:
            found["heading"] = self.heading_path[at]
        return found


# How each format's positions read: the layout its text was extracted to.
LAYOUTS = {"markdown": "lines", "text": "lines", "html": "headings", "docx": "headings", "pdf": "pages",
           "pptx": "slides"}


def document_positions(path: str, text: str, locator: Locator) -> Positions:
    """`text` indexed for locating its chunks, as its format (the locator's, else the
    one its file name says, else plain text) was extracted."""
    return Positions(text, LAYOUTS.get(locator.get("format") or file_format(path) or "text", "lines"))


# How each forge writes a line range after a file's page (catalog.sources.git.FORGES).
LINE_ANCHORS = {"github": "#L{first}-L{last}", "gitlab": "#L{first}-{last}", "gitea": "#L{first}-L{last}"}
# What a document's locator keeps for the next sync or crawl, or for its chunks' sake
# only: a git file's blob id and forge; a web page's validators and links.
_DOCUMENT_ONLY = ("blob", "forge", "etag", "last_modified", "links")


def chunk_locator(document: Locator, found: Locator) -> Locator:
    """A chunk's locator: its document's, with where it sits (`found`); a git file's
    forge link pointing at the chunk's lines."""
    located = {key: value for key, value in document.items() if key not in _DOCUMENT_ONLY} | found
    anchor = LINE_ANCHORS.get(document.get("forge", ""))
    if anchor and "link" in located and "lines" in found:
        located["link"] += anchor.format(first=found["lines"][0], last=found["lines"][1])
    return located


def cite(locator: Locator, path: str = "") -> str:
    """A locator as one line a person or an agent quotes: `docs/run.md:12-30 @ 1a2b3c4`,
    `guide.pdf p. 3`, `deck.pptx slide 2`, `https://site/page — Setup › Install`."""
    where = str(locator.get("url") or locator.get("path") or path)
    if lines := locator.get("lines"):
        where += f":{_span(lines)}"
    if pages := locator.get("pages"):
        where += f" p. {_span(pages)}" if pages[0] == pages[1] else f" pp. {_span(pages)}"
    if slides := locator.get("slides"):
        where += f" slide {_span(slides)}" if slides[0] == slides[1] else f" slides {_span(slides)}"
    if commit := locator.get("commit"):
        where += f" @ {str(commit)[:12]}"
    if heading := locator.get("heading"):
        where += f" — {heading}"
    return where


def _span(pair: list[int]) -> str:
    return str(pair[0]) if pair[0] == pair[1] else f"{pair[0]}-{pair[1]}"
