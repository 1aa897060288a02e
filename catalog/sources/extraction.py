"""Files as the text Lectern indexes (pure: no Django): plain text and Markdown as they
are, HTML's main text, and PDF, DOCX and PPTX through their libraries (pypdf,
python-docx, python-pptx: permissive licences; docs/architecture.md says why these).

What a file's text keeps is what a citation needs (catalog.sources.locators reads it
back): headings as Markdown headings (`## Setup`), so a chunk knows its heading path;
and a form feed between pages (PDF) or slides (PPTX), so a chunk knows its pages.

A file that cannot become text raises ExtractionError with one line saying why: a
scanned PDF without a text layer, an encrypted file, a corrupt one, a zip bomb. The
source's other files still index (the run lists the file as skipped, with that line).
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

# Between two pages of a PDF or two slides of a presentation: a chunk's pages are
# counted by the form feeds before it (catalog.sources.locators).
PAGE_BREAK = "\f"
# A DOCX or PPTX is a zip archive: one that unpacks to more than this, or any member
# more than ZIP_RATIO_MAX times its packed size (past a megabyte), is refused unread.
ZIP_UNPACKED_MAX = 256 * 1024 * 1024
ZIP_RATIO_MAX = 200
ZIP_MEMBERS_MAX = 10_000


class ExtractionError(ValueError):
    """A file that cannot become text; the message is one line saying why."""


@dataclass(frozen=True)
class Extracted:
    text: str
    title: str  # "" where the file names none: the caller falls back on its first heading or name
    format: str  # what it was read as (FORMATS): how its positions read (catalog.sources.locators)


def file_format(path: str) -> str | None:
    """The format a file of this name is read as, or None when Lectern does not read it."""
    return FORMATS.get(PurePosixPath(path).suffix.lower())


def extract(path: str, data: bytes) -> Extracted:
    """The text of the file `path` whose bytes are `data`, or ExtractionError."""
    kind = file_format(path)
    if kind is None:
        suffix = PurePosixPath(path).suffix or "(none)"
        raise ExtractionError(f"unsupported file type {suffix}; Lectern reads {', '.join(sorted(FORMATS))}")
    text, title = READERS[kind](data)
    return Extracted(text, title, kind)


def _decoded(data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExtractionError(f"is not UTF-8 text (byte {exc.start})") from None
    if "\x00" in text:
        raise ExtractionError("holds NUL characters, so it is not a text file")
    return text


def _plain(data: bytes) -> tuple[str, str]:
    return _decoded(data), ""


# --- HTML -------------------------------------------------------------------------------

# Never text: code, styling, and what a page repeats around its content.
_DROPPED = ("script", "style", "noscript", "template", "svg", "canvas", "iframe", "object", "nav", "header",
            "footer", "aside", "form", "button", "select", "dialog")
_DROPPED_ROLES = ("navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar", "toolbar")
_BLOCKS = frozenset(("p", "div", "section", "article", "main", "ul", "ol", "li", "dl", "dt", "dd", "pre",
                     "blockquote", "table", "thead", "tbody", "tr", "figure", "figcaption", "details", "summary",
                     "address", "hr", "br", "h1", "h2", "h3", "h4", "h5", "h6", "caption"))
# Sentinels (private-use characters, which lxml accepts as text): a block boundary, a
# newline kept (inside <pre>), the end of a table cell, a space kept (inside <pre>).
_BREAK, _NEWLINE, _CELL, _SPACE = "\ue000", "\ue001", "\ue002", "\ue003"
_SPACES = re.compile(r"[ \t\r\n\u00a0]+")


def html_text(data: bytes | str) -> tuple[str, str]:
    """(title, main text) of an HTML page: the <main> or <article> element when the page
    has one, else its body, without scripts, styles, navigation, headers, footers,
    asides and forms; headings as Markdown headings, list items as `- ` lines,
    preformatted text as it is, table rows with ` | ` between cells."""
    from lxml import etree, html

    try:
        root = html.document_fromstring(data)
    except (etree.ParserError, ValueError) as exc:
        raise ExtractionError(f"not a readable HTML page: {exc}") from None
    found = root.find(".//title")
    title = _SPACES.sub(" ", found.text_content()).strip() if found is not None else ""
    for element in list(root.iter(*_DROPPED)):
        _drop(element)
    for element in list(root.xpath("//*[@hidden or @aria-hidden='true' or @role]")):
        if element.get("role") in (None, *_DROPPED_ROLES) and element.getparent() is not None:
            _drop(element)
    main = next(iter(root.xpath("//main | //*[@role='main'] | //article")), None)
    body = main if main is not None else (root.find("body") if root.find("body") is not None else root)
    for element in body.iter(etree.Element):
        tag = element.tag if isinstance(element.tag, str) else ""
        if tag == "pre":
            for node in element.iter():
                node.text = _kept(node.text) if node.text else node.text
                if node is not element and node.tail:
                    node.tail = _kept(node.tail)
        if tag in ("td", "th"):
            element.tail = _CELL + (element.tail or "")
        if tag in _BLOCKS:
            prefix = {"li": "- ", "dd": "  "}.get(tag, "")
            if len(tag) == 2 and tag[0] == "h" and tag[1].isdigit():
                prefix = "#" * int(tag[1]) + " "
            element.text = f"{_BREAK}{prefix}{element.text or ''}"
            element.tail = f"{_BREAK}{element.tail or ''}"
    blocks = []
    for block in body.text_content().split(_BREAK):
        line = _SPACES.sub(" ", block).replace(_NEWLINE, "\n").replace(_SPACE, " ").strip(" ")
        line = " | ".join(cell.strip() for cell in line.split(_CELL) if cell.strip()) if _CELL in line else line
        if line.strip() and line.strip() not in ("-", "#"):
            blocks.append(line.strip("\n") if "\n" not in line.strip() else line)
    if not title:
        title = next((b.lstrip("#").strip() for b in blocks if b.startswith("# ")), "")
    return title[:500], "\n\n".join(blocks)


def _kept(text: str) -> str:
    """Preformatted text, its line breaks and spaces out of reach of the collapsing of
    whitespace the rest of the page gets."""
    return text.replace("\n", _NEWLINE).replace(" ", _SPACE).replace("\t", _SPACE * 4)


def _drop(element: object) -> None:
    """Remove an element but keep its tail (the text after it belongs to its parent)."""
    parent = element.getparent()  # type: ignore[attr-defined]
    if parent is None:
        return
    element.drop_tree()  # type: ignore[attr-defined]


def _html(data: bytes) -> tuple[str, str]:
    title, text = html_text(data)
    return text, title


# --- PDF --------------------------------------------------------------------------------


def _pdf(data: bytes) -> tuple[str, str]:
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError, PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ExtractionError("encrypted PDF (it needs a password): save a copy without one")
        pages = [_SPACES_IN_LINE.sub(" ", page.extract_text() or "").strip() for page in reader.pages]
        meta = reader.metadata
        title = str(meta.title or "").strip() if meta is not None else ""
    except ExtractionError:
        raise
    except FileNotDecryptedError:
        raise ExtractionError("encrypted PDF (it needs a password): save a copy without one") from None
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError,
            OSError, NotImplementedError) as exc:
        raise ExtractionError(f"not a readable PDF ({type(exc).__name__}: {_one_line(exc)})") from None
    if not pages:
        raise ExtractionError("a PDF without pages")
    if not any(pages):
        raise ExtractionError(f"no text in its {len(pages)} page(s): a scanned PDF without a text layer? "
                              "Lectern does no OCR; add a PDF with text")
    return PAGE_BREAK.join(pages), title[:500]


_SPACES_IN_LINE = re.compile(r"[ \t\u00a0]+")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or "no detail"


# --- Office: DOCX and PPTX --------------------------------------------------------------

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # an encrypted Office file, or the old binary .doc/.ppt


def _zip_checked(data: bytes, kind: str) -> None:
    """Refuse, before any library unpacks it, an Office file that is not a zip archive
    or one that would unpack to too much (a zip bomb)."""
    if data.startswith(_OLE_MAGIC):
        raise ExtractionError(f"encrypted, or in the old binary Office format: save it as .{kind} without a password")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise ExtractionError(f"not a valid .{kind} file (a .{kind} is a zip archive: {_one_line(exc)})") from None
    if len(members) > ZIP_MEMBERS_MAX:
        raise ExtractionError(f"refused as a zip bomb: {len(members)} files inside (at most {ZIP_MEMBERS_MAX})")
    unpacked = sum(member.file_size for member in members)
    if unpacked > ZIP_UNPACKED_MAX:
        raise ExtractionError(f"refused as a zip bomb: it unpacks to {unpacked:,} bytes "
                              f"(at most {ZIP_UNPACKED_MAX:,})")
    for member in members:
        if member.file_size > 1024 * 1024 and member.file_size > ZIP_RATIO_MAX * max(member.compress_size, 1):
            raise ExtractionError(f"refused as a zip bomb: {member.filename} unpacks {member.file_size:,} bytes "
                                  f"from {member.compress_size:,}")


def _office(kind: str, read: Callable[[bytes], tuple[str, str]]) -> Callable[[bytes], tuple[str, str]]:
    def reader(data: bytes) -> tuple[str, str]:
        _zip_checked(data, kind)
        try:
            title, text = read(data)
        except ExtractionError:
            raise
        except Exception as exc:  # noqa: BLE001 - a corrupt part surfaces as any of the libraries' errors
            raise ExtractionError(f"not a readable .{kind} file ({type(exc).__name__}: {_one_line(exc)})") from None
        if not text.replace(PAGE_BREAK, "").strip():
            raise ExtractionError(f"no text in this .{kind} file")
        return text, title[:500]

    return reader


_HEADING_STYLE = re.compile(r"^(?:heading|überschrift|titre|título)\s*(\d)$", re.IGNORECASE)


def _docx_text(data: bytes) -> tuple[str, str]:
    """(title, text) of a Word document: body paragraphs and tables in order; heading
    styles as Markdown headings (Title as level 1), list paragraphs as `- ` lines."""
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    document = docx.Document(io.BytesIO(data))
    blocks: list[str] = []
    for item in document.iter_inner_content():
        if isinstance(item, Paragraph):
            text = item.text.strip()
            if not text:
                continue
            style = (item.style.name if item.style is not None else "") or ""
            level = _HEADING_STYLE.match(style)
            if style == "Title":
                blocks.append(f"# {text}")
            elif level:
                blocks.append(f"{'#' * min(int(level.group(1)), 6)} {text}")
            elif style.startswith("List"):
                blocks.append(f"- {text}")
            else:
                blocks.append(text)
        elif isinstance(item, Table):
            blocks.extend(_rows(item))
    title = (document.core_properties.title or "").strip()
    return title, "\n\n".join(blocks)


def _rows(table: object) -> Iterator[str]:
    for row in table.rows:  # type: ignore[attr-defined]
        cells = [cell.text.strip() for cell in row.cells]
        if any(cells):
            yield " | ".join(cells)


def _pptx_text(data: bytes) -> tuple[str, str]:
    """(title, text) of a presentation: each slide's title as a `## ` heading, then its
    other text frames and tables, then its notes; a form feed between slides."""
    from pptx import Presentation

    deck = Presentation(io.BytesIO(data))
    slides = []
    first_title = ""
    for slide in deck.slides:
        blocks = []
        title_shape = slide.shapes.title
        title_id = title_shape.shape_id if title_shape is not None else None
        if title_shape is not None and title_shape.text_frame.text.strip():
            heading = " ".join(title_shape.text_frame.text.split())
            first_title = first_title or heading
            blocks.append(f"## {heading}")
        for shape in slide.shapes:
            if shape.shape_id == title_id:
                continue
            if shape.has_text_frame:
                blocks.extend(p for p in (" ".join(par.text.split()) for par in shape.text_frame.paragraphs) if p)
            if getattr(shape, "has_table", False):
                blocks.extend(_rows(shape.table))
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            if notes:
                blocks.append(f"Notes: {' '.join(notes.split())}")
        slides.append("\n\n".join(blocks))
    title = (deck.core_properties.title or "").strip() or first_title
    return title, PAGE_BREAK.join(slides)


# Each reader gives (text, title) of a file's bytes, or raises ExtractionError.
READERS: dict[str, Callable[[bytes], tuple[str, str]]] = {
    "text": _plain,
    "markdown": _plain,
    "html": _html,
    "pdf": _pdf,
    "docx": _office("docx", _docx_text),
    "pptx": _office("pptx", _pptx_text),
}
FORMATS = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".rst": "text", ".html": "html",
           ".htm": "html", ".pdf": "pdf", ".docx": "docx", ".pptx": "pptx"}
